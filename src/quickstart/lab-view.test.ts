/**
 * The lab-mode view's pure parts: one counter per pod port on the pod's veth, the kernel's
 * JSON read back, counters mapped to Services through the lab's EndpointSlices, the LB's
 * view merged in, and the window over monotonic counters.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { readManifests } from "../cluster/manifest-files.ts";
import { decodeDocuments } from "../k8s/decode.ts";
import { labLayout } from "../lab/lab-layout.ts";
import { labManifests } from "../lab/lab-manifests.ts";
import { planSnapshot } from "../plan/planner.ts";
import type { DashboardService } from "../web/dashboard-state.ts";
import { CounterWindow } from "./counter-window.ts";
import { labRewrite } from "./lab-rewrite.ts";
import { labTryLines } from "./lab-try-lines.ts";
import { labLiveState, parseCounters, podCounterScript, serviceTargets } from "./lab-view.ts";

async function quickstartLab() {
  const read = await readManifests(["examples/quickstart"], async () => "");
  const rw = labRewrite(decodeDocuments(read.documents).snapshot, { name: "up" });
  const layout = labLayout(rw.topology);
  return { rw, layout, gen: labManifests(layout, rw.services) };
}

test("a counter per pod port, matched on the pod's veth (plbp<j>) after the DNAT", async () => {
  const { layout } = await quickstartLab();
  const a1 = podCounterScript(layout).get("node-a1")!;
  assert.deepEqual(
    a1.counters.map((c) => `${c.name} ${c.pod}`),
    [
      "c_web-1_tcp_8080 demo/web-1",
      "c_web-2_tcp_8080 demo/web-2",
      "c_web-3_tcp_8080 demo/web-3",
      "c_dns-1_udp_5353 demo/dns-1",
    ],
  );
  assert.match(
    a1.script,
    /oifname "plbp3" meta l4proto udp th dport 5353 ct state new counter name "c_dns-1_udp_5353"/,
  );
  assert.match(a1.script, /^table inet plbview \{/);
  assert.doesNotMatch(a1.script, /delete counter/);
  // run again on a changed node: the rules are replaced, a counter no pod needs is deleted
  const fewer = {
    ...layout,
    nodes: layout.nodes.map((n) => (n.name === "node-a1" ? { ...n, pods: n.pods.slice(1) } : n)),
  };
  const again = podCounterScript(fewer, new Map([["node-a1", a1.counters]])).get("node-a1")!;
  assert.match(again.script, /flush chain inet plbview forward\n/);
  assert.match(again.script, /\ndelete counter inet plbview c_web-1_tcp_8080\n/);
  assert.ok(again.script.indexOf("flush chain") < again.script.indexOf("delete counter"));
  assert.match(again.script, /counter c_web-2_tcp_8080 \{ \}/, "kept counters are declared again");
  const parsed = parseCounters(readFileSync("test/fixtures/up-lab/counters.json", "utf8"));
  assert.deepEqual(
    [...parsed],
    [
      ["c_0_tcp_8080", 6],
      ["c_3_udp_5353", 4],
    ],
  );
  assert.equal(parseCounters("not json").size, 0);
});

test("the live state: the LB's health and weights, pod shares through the slices", async () => {
  const { rw, gen } = await quickstartLab();
  const targets = serviceTargets(gen.endpointSlices);
  assert.ok(targets.get("demo/web")?.has("demo/web-1|TCP|8080"));
  assert.ok(targets.get("demo/dns")?.has("demo/dns-2|UDP|5353"));
  const decoded = decodeDocuments(
    [...rw.manifests, ...gen.nodes, ...gen.pods, ...gen.endpointSlices].map((value, i) => ({
      source: "lab",
      index: i + 1,
      value,
    })),
  );
  const plans = planSnapshot(decoded.snapshot).plans;
  const lbWeb = {
    service: "demo/web",
    listeners: [{ failOpen: false }],
    nodes: [
      { node: "node-a1", zone: "zone-a", state: "healthy", weight: 3, active: true },
      { node: "node-c1", zone: "zone-c", state: "unhealthy", weight: 0, active: false },
      { node: "node-b2", zone: "zone-b", state: "excluded", weight: 0, active: false },
    ],
  } as unknown as DashboardService;
  const state = labLiveState({
    now: 5000,
    startedAt: 0,
    windowSeconds: 10,
    plans,
    lb: [lbWeb],
    recent: new Map([
      ["demo/web-1|TCP|8080", 4],
      ["demo/web-4|TCP|8080", 2],
      ["demo/dns-1|UDP|5353", 0],
    ]),
    targets,
    podNodes: new Map([
      ["demo/web-1", "node-a1"],
      ["demo/web-4", "node-a2"],
    ]),
    events: ["12:00:00 reloaded"],
  });
  const web = state.services.find((s) => s.service === "demo/web")!;
  assert.deepEqual(
    web.nodes.map((n) => `${n.node} ${n.health} w${n.weight}`),
    ["node-a1 healthy w3", "node-c1 unhealthy w0"],
  );
  assert.deepEqual(web.pods, [
    { pod: "demo/web-1", node: "node-a1", connections: 4 },
    { pod: "demo/web-4", node: "node-a2", connections: 2 },
  ]);
  assert.equal(web.listeners[0], "TCP 203.0.113.3:80");
  // a Service the LB has not reported yet: its planned members, health unknown
  const dns = state.services.find((s) => s.service === "demo/dns")!;
  assert.ok(dns.nodes.length > 0 && dns.nodes.every((n) => n.health === "unknown"));
  assert.deepEqual(dns.pods, []);
});

test("the counter window: growth within the window, a reset counts from zero", () => {
  const w = new CounterWindow({ windowMs: 10_000 });
  w.record(0, new Map([["a", 5]]));
  assert.deepEqual([...w.recent()], [["a", 0]]);
  w.record(
    4000,
    new Map([
      ["a", 8],
      ["b", 2],
    ]),
  );
  assert.deepEqual(
    [...w.recent()],
    [
      ["a", 3],
      ["b", 2],
    ],
  );
  w.record(
    12_000,
    new Map([
      ["a", 10],
      ["b", 2],
    ]),
  );
  // the baseline stays at t=0: still the newest sample at or before 12000 - 10000
  assert.deepEqual(
    [...w.recent()],
    [
      ["a", 5],
      ["b", 2],
    ],
  );
  w.record(
    15_000,
    new Map([
      ["a", 11],
      ["b", 2],
    ]),
  );
  // now t=4000 is the newest sample at or before 5000
  assert.deepEqual(
    [...w.recent()],
    [
      ["a", 3],
      ["b", 0],
    ],
  );
  w.record(
    16_000,
    new Map([
      ["a", 1],
      ["b", 2],
    ]),
  );
  assert.deepEqual(
    [...w.recent()],
    [
      ["a", 1],
      ["b", 0],
    ],
  );
});

test("try lines: the lab client from a client host per listener, every zone's for zonal Services", async () => {
  const { rw, gen } = await quickstartLab();
  const decoded = decodeDocuments(
    [...rw.manifests, ...gen.nodes, ...gen.pods, ...gen.endpointSlices].map((value, i) => ({
      source: "lab",
      index: i + 1,
      value,
    })),
  );
  const lines = labTryLines(planSnapshot(decoded.snapshot).plans, rw.clients, "up", "/s/lab-client.mjs");
  const prefix = "passlb lab exec --name up";
  assert.deepEqual(lines, [
    `${prefix} client-zone-a -- node /s/lab-client.mjs --target 203.0.113.1:53 --proto udp --count 20`,
    `${prefix} client-zone-a -- node /s/lab-client.mjs --target 203.0.113.2:9000 --count 20`,
    `${prefix} client-zone-a -- node /s/lab-client.mjs --target 203.0.113.3:80 --count 20`,
    `${prefix} client-zone-b -- node /s/lab-client.mjs --target 203.0.113.3:80 --count 20`,
    `${prefix} client-zone-c -- node /s/lab-client.mjs --target 203.0.113.3:80 --count 20`,
  ]);
});
