import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { type MemberHealth, serviceForwarding } from "../../src/forwarding/forwarding-state.ts";
import { forwardFromFlags } from "../../src/lb-host/routing/encap.ts";
import { type DashboardInput, dashboardState, STRIP_CELLS } from "../../src/web/dashboard-state.ts";
import { assertGolden } from "../golden.ts";
import { webPlans } from "../support/web-fixture.ts";

const FIXTURES = new URL("../fixtures/web/", import.meta.url);

interface InputFile {
  now: number;
  startedAt: number;
  health: Record<string, MemberHealth>;
  recentConnections: Record<string, Record<string, number>>;
  events: DashboardInput["events"];
  issues: DashboardInput["issues"];
}

function input(): DashboardInput {
  const file = JSON.parse(readFileSync(new URL("dashboard-input.json", FIXTURES), "utf8")) as InputFile;
  const health = (service: string, _check: string, node: string): MemberHealth =>
    file.health[`${service} ${node}`] ?? { state: "unknown" };
  return {
    now: file.now,
    startedAt: file.startedAt,
    process: "passlb up",
    dataplane: "userspace",
    forwarding: webPlans().map((p) => serviceForwarding(p, health, { seed: 7 })),
    health,
    windowSeconds: 10,
    recentConnections: new Map(
      Object.entries(file.recentConnections).map(([s, m]) => [s, new Map(Object.entries(m))]),
    ),
    events: file.events,
    issues: file.issues,
  };
}

test("/api/v1/state for the web scenario (golden)", () => {
  assertGolden(new URL("dashboard-state.golden.json", FIXTURES).pathname, dashboardState(input()));
});

test("the view says what the operator must see", () => {
  const state = dashboardState(input());
  const web = state.services.find((s) => s.service === "default/web")!;
  const byNode = new Map(web.nodes.map((n) => [n.node, n]));
  assert.equal(byNode.get("node-b")?.state, "unhealthy");
  assert.equal(byNode.get("node-b")?.active, false);
  assert.equal(byNode.get("node-c")?.state, "excluded");
  assert.equal(byNode.get("node-a")?.connectionShare, 0.75);
  assert.equal(byNode.get("node-a")?.slotShare, 1, "the only healthy node owns every slot");
  for (const l of web.listeners) {
    assert.equal(
      l.maglev.strip.reduce((n, [, len]) => n + len, 0),
      Math.min(STRIP_CELLS, l.maglev.size),
      "the strip covers every cell",
    );
    assert.deepEqual(l.maglev.strip, [[web.nodes.findIndex((n) => n.node === "node-a"), l.maglev.cells]]);
  }
  assert.equal(state.summary.services, 2);
  assert.equal(state.summary.issues.warning >= 1, true);
});

test("a healthy pair splits the strip about evenly, in runs", () => {
  const plans = webPlans();
  const web = plans.find((p) => p.service === "default/web")!;
  const state = dashboardState({
    ...input(),
    forwarding: [serviceForwarding(web, () => ({ state: "healthy" }), { seed: 7 })],
    health: () => ({ state: "healthy" }),
  });
  const l = state.services[0]!.listeners[0]!;
  const cells = new Map<number, number>();
  for (const [who, len] of l.maglev.strip) cells.set(who, (cells.get(who) ?? 0) + len);
  assert.equal(cells.has(-1), false);
  for (const n of cells.values()) assert.ok(n > l.maglev.cells * 0.35, `each node has a fair part: ${n}`);
  assert.ok(l.maglev.strip.length > 10, "Maglev interleaves owners");
});

test("on an LB host with --forward encap each node says how it is reached", () => {
  const base = input();
  const members = base.forwarding.flatMap((f) => f.plan.members);
  const first = members[0]!;
  const prefix = `${first.addresses.IPv4}/32`;
  const forward = forwardFromFlags({ forward: "encap", direct: [prefix] });
  assert.ok(typeof forward !== "string");
  const state = dashboardState({ ...base, forward });
  let seen = 0;
  for (const s of state.services) {
    const member = new Set(
      base.forwarding.find((f) => f.plan.service === s.service)!.plan.members.map((m) => m.node),
    );
    for (const n of s.nodes) {
      if (!member.has(n.node)) continue;
      seen++;
      assert.equal(
        n.path,
        n.node === first.node ? "route" : "encap vxlan-gpe:4790",
        `${s.service} ${n.node}`,
      );
    }
  }
  assert.ok(seen > 1);
  // without a forwarding mode (passlb up, agents) there is no path field
  assert.ok(dashboardState(base).services.every((s) => s.nodes.every((n) => n.path === undefined)));
});

test("--encap-check: a routed node whose tunnel check failed is unhealthy with that reason, and tunnel-checked", () => {
  const base = input();
  // a Service with several members (one alone would fail open and stay active)
  const web = base.forwarding.find((f) => f.plan.members.length >= 2)!.plan;
  const failed = web.members[0]!.node;
  const health = (_s: string, _c: string, node: string): MemberHealth =>
    node === failed ? { state: "unhealthy", reason: "tunnel_check_failed" } : { state: "healthy" };
  const forward = forwardFromFlags({ forward: "encap", encapCheck: true });
  assert.ok(typeof forward !== "string");
  const state = dashboardState({
    ...base,
    forwarding: [serviceForwarding(web, health, { seed: 7 })],
    health,
    forward,
  });
  const nodes = state.services
    .find((s) => s.service === web.service)!
    .nodes.filter((n) => web.members.some((m) => m.node === n.node));
  const row = nodes.find((n) => n.node === failed)!;
  assert.deepEqual([row.state, row.reason, row.active], ["unhealthy", "tunnel_check_failed", false]);
  for (const n of nodes) assert.equal(n.path, "encap vxlan-gpe:4790, tunnel-checked", n.node);
  // the others keep the plan's reason
  assert.ok(nodes.filter((n) => n.node !== failed).every((n) => n.reason !== "tunnel_check_failed"));
});
