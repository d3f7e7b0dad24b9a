import assert from "node:assert/strict";
import { test } from "node:test";
import { webPlans } from "../../test/support/web-fixture.ts";
import { serviceForwarding } from "../forwarding/forwarding-state.ts";
import type { ProbeTarget } from "../health/state-probe-targets.ts";
import { createLogger } from "./logger.ts";
import { Metrics } from "./metrics.ts";
import { Observer } from "./observer.ts";

function setup() {
  let now = Date.UTC(2026, 0, 1);
  const lines: Record<string, unknown>[] = [];
  const observer = new Observer({
    process: "passlb lb",
    dataplane: "nftables",
    now: () => now,
    metrics: new Metrics(),
    logger: createLogger({ level: "info", component: "lb", write: (l) => lines.push(JSON.parse(l)) }),
    windowMs: 10_000,
    maxEvents: 3,
  });
  return { observer, lines, advance: (ms: number) => (now += ms) };
}

const target: ProbeTarget = {
  key: "HTTP 198.51.100.12:10256/healthz",
  protocol: "HTTP",
  family: "IPv4",
  address: "198.51.100.12",
  port: 10256,
  path: "/healthz",
  intervalMs: 8000,
  timeoutMs: 1000,
  healthyThreshold: 1,
  unhealthyThreshold: 3,
  readsWeight: false,
  users: [{ service: "default/web", check: "node-healthz", node: "node-b" }],
};

test("one prober transition: a metric, a log line and a dashboard event with the same keys", async () => {
  const { observer, lines } = setup();
  observer.proberEvent({
    kind: "transition",
    target,
    from: "healthy",
    to: "unhealthy",
    reason: "3 consecutive failures",
    at: 0,
  });
  assert.deepEqual(
    [lines[0]!.event, lines[0]!.reason, lines[0]!.node, lines[0]!.service, lines[0]!.level],
    ["health_transition", "probe_failures", "node-b", "default/web", "warn"],
  );
  const ev = observer.state().events[0]!;
  assert.deepEqual(
    [ev.event, ev.reason, ev.node, ev.severity],
    ["health_transition", "probe_failures", "node-b", "warning"],
  );
  assert.match(
    await observer.metrics.text(),
    /passlb_health_transitions_total\{node="node-b",to="unhealthy"\} 1/,
  );
});

test("connection shares over the window; old seconds drop out; events are bounded", () => {
  const { observer, advance } = setup();
  observer.forwarding(webPlans().map((p) => serviceForwarding(p, () => ({ state: "healthy" }), { seed: 1 })));
  for (let i = 0; i < 3; i++) observer.connection("default/web", "node-a");
  observer.connection("default/web", "node-b");
  let web = observer.state().services.find((s) => s.service === "default/web")!;
  assert.deepEqual(
    web.nodes.map((n) => [n.node, n.connections, n.connectionShare]),
    [
      ["node-a", 3, 0.75],
      ["node-b", 1, 0.25],
      ["node-c", 0, 0],
    ],
  );
  advance(11_000);
  observer.connection("default/web", "node-b");
  web = observer.state().services.find((s) => s.service === "default/web")!;
  assert.equal(web.connections, 1, "only the last window counts");
  for (let i = 0; i < 5; i++) observer.note({ event: "reload", severity: "info", message: `reload ${i}` });
  assert.deepEqual(
    observer.state().events.map((e) => e.message),
    ["reload 2", "reload 3", "reload 4"],
  );
});

test("with a traffic source: shares and counters come from the data plane's running totals", async () => {
  const { observer, advance } = setup();
  observer.forwarding(webPlans().map((p) => serviceForwarding(p, () => ({ state: "healthy" }), { seed: 1 })));
  const totals = new Map<string, { connections: number; bytesToBackend: number; bytesToClient: number }>([
    ["node-a", { connections: 0, bytesToBackend: 0, bytesToClient: 0 }],
    ["node-b", { connections: 0, bytesToBackend: 0, bytesToClient: 0 }],
  ]);
  observer.traffic(() => [...totals].map(([node, t]) => ({ service: "default/web", node, ...t })));
  totals.set("node-a", { connections: 6, bytesToBackend: 600, bytesToClient: 6000 });
  totals.set("node-b", { connections: 2, bytesToBackend: 200, bytesToClient: 2000 });
  const share = () =>
    observer
      .state()
      .services.find((s) => s.service === "default/web")!
      .nodes.filter((n) => n.node !== "node-c")
      .map((n) => [n.node, n.connections, n.connectionShare]);
  assert.deepEqual(share(), [
    ["node-a", 6, 0.75],
    ["node-b", 2, 0.25],
  ]);
  // a read long after the last one counts only the window's part, shares intact
  advance(40_000);
  totals.set("node-a", { connections: 6 + 40, bytesToBackend: 600, bytesToClient: 6000 });
  totals.set("node-b", { connections: 2 + 40, bytesToBackend: 200, bytesToClient: 2000 });
  assert.deepEqual(share(), [
    ["node-a", 10, 0.5],
    ["node-b", 10, 0.5],
  ]);
  const text = await observer.metrics.text();
  assert.match(text, /passlb_connections_total\{service="default\/web",node="node-a"\} 46/);
  assert.match(text, /passlb_bytes_total\{service="default\/web",node="node-b",direction="to_client"\} 2000/);
  assert.match(text, /passlb_bytes_total\{service="default\/web",node="node-a",direction="to_backend"\} 600/);
});

test("a backend whose state changes between two forwardings is one backend_state event", () => {
  const { observer, lines } = setup();
  const plans = webPlans();
  observer.forwarding(
    plans.map((p) => serviceForwarding(p, () => ({ state: "healthy" }), { seed: 1 })),
    () => ({ state: "healthy" }),
  );
  assert.equal(lines.length, 0, "the first forwarding is the baseline");
  const bDown = (_s: string, _c: string, node: string) => ({
    state: node === "node-b" ? ("unhealthy" as const) : ("healthy" as const),
  });
  observer.forwarding(
    plans.map((p) => serviceForwarding(p, bDown, { seed: 1 })),
    bDown,
  );
  assert.deepEqual(
    lines.map((l) => [l.event, l.reason, l.service, l.node]),
    [["backend_state", "unhealthy", "default/web", "node-b"]],
  );
});

test("standing findings: logged once, replaced by the next set", () => {
  const { observer, lines } = setup();
  const f = { code: "agent_unreachable", severity: "warning" as const, subject: "Node node-b", message: "m" };
  observer.setFindings([f]);
  observer.setFindings([f]);
  assert.equal(lines.length, 1);
  assert.equal(observer.state().issues.length, 1);
  observer.setFindings([]);
  assert.equal(observer.state().issues.length, 0);
});

test("an announcement source shows in the state as it is at each read, one shape for both engines", () => {
  const { observer } = setup();
  assert.equal(observer.state().announce, null, "no announcement section without a source");
  let health: "healthy" | "degraded" = "healthy";
  observer.announcement(() => ({
    engine: "bird",
    host: "lb-1",
    state: "running",
    generation: 3,
    vips: [{ vip: "203.0.113.10", state: "held", reason: "bgp/web: 2 healthy node(s); to 198.51.100.1" }],
    groups: [],
    speaker: {
      health,
      findings: [],
      sessions: [{ peer: "198.51.100.1", state: "Established", established: true, bfd: "Up" }],
    },
  }));
  assert.equal(observer.state().announce?.speaker?.health, "healthy");
  health = "degraded";
  assert.equal(observer.state().announce?.speaker?.health, "degraded");
  assert.deepEqual(
    observer.state().announce?.vips.map((v) => v.state),
    ["held"],
  );
});
