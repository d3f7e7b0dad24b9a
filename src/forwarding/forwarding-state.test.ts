import assert from "node:assert/strict";
import { test } from "node:test";
import { DEFAULT_CONFIG, type Snapshot } from "../k8s/snapshot.ts";
import { planSnapshot } from "../plan/planner.ts";
import { type HealthLookup, serviceForwarding } from "./forwarding-state.ts";
import { slotShares } from "./maglev.ts";

const node = (name: string, zone: string) => ({
  apiVersion: "v1" as const,
  kind: "Node" as const,
  metadata: { name, labels: { "topology.kubernetes.io/zone": zone } },
  spec: {},
  status: {
    addresses: [{ type: "InternalIP", address: `198.51.100.${name.length + zone.length}${name.at(-1)}` }],
  },
});

function plan(opts: { local?: boolean; zonal?: boolean }) {
  const eps = [
    ["a1", true],
    ["a1", true],
    ["b1", true],
  ] as const;
  const snapshot: Snapshot = {
    services: [
      {
        apiVersion: "v1",
        kind: "Service",
        metadata: {
          name: "web",
          namespace: "ns",
          annotations: { "networking.gke.io/weighted-load-balancing": "pods-per-node" },
        },
        spec: {
          type: "LoadBalancer",
          externalTrafficPolicy: opts.local ? "Local" : "Cluster",
          ...(opts.local && { healthCheckNodePort: 31000 }),
          ...(opts.zonal && { trafficDistribution: "PreferClose" as const }),
          ports: [{ port: 80, protocol: "TCP" }],
        },
      },
    ],
    nodes: [node("a1", "za"), node("a2", "za"), node("b1", "zb")],
    pods: [],
    endpointSlices: [
      {
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: { name: "web-1", namespace: "ns", labels: { "kubernetes.io/service-name": "web" } },
        addressType: "IPv4",
        ports: [{ name: "", port: 80, protocol: "TCP" }],
        endpoints: eps.map(([n, ready], i) => ({
          addresses: [`203.0.113.${i + 1}`],
          conditions: { ready },
          nodeName: n,
        })),
      },
    ],
    endpoints: [],
    namespaces: [],
    config: {
      ...DEFAULT_CONFIG,
      defaultClass: true,
      pools: [
        { name: "p", addresses: ["203.0.113.100-203.0.113.101"], autoAssign: true, avoidBuggyIPs: false },
      ],
    },
  };
  return planSnapshot(snapshot).plans[0]!;
}

const states =
  (m: Record<string, ReturnType<HealthLookup>>): HealthLookup =>
  (_s, _c, node) =>
    m[node] ?? { state: "unknown" };

test("unhealthy members leave the table; unknown ones stay", () => {
  const f = serviceForwarding(plan({}), states({ a2: { state: "unhealthy" } }), { seed: 1 });
  assert.deepEqual(
    f.listeners[0]?.backends.map((b) => b.node),
    ["a1", "b1"],
  );
  assert.deepEqual(f.listeners[0]?.table.backends, ["a1", "b1"]);
  assert.equal(f.listeners[0]?.failOpen, false);
});

test("a member whose check appeared after the LB's first plan waits for a verdict", () => {
  const f = serviceForwarding(plan({}), states({ b1: { state: "unknown", awaitingVerdict: true } }), {
    seed: 1,
  });
  assert.deepEqual(
    f.listeners[0]?.backends.map((b) => b.node),
    ["a1", "a2"],
  );
});

test("no healthy member: every member serves (fail open), and it is flagged", () => {
  const down = { state: "unhealthy" as const };
  const f = serviceForwarding(plan({}), states({ a1: down, a2: down, b1: down }), { seed: 1 });
  assert.equal(f.listeners[0]?.failOpen, true);
  assert.equal(f.listeners[0]?.backends.length, 3);
});

test("weights: the plan's pods-per-node weight, replaced by the health check's header when it reports one", () => {
  const p = plan({ local: true });
  const before = serviceForwarding(p, states({}), { seed: 1, sizeFor: () => 1009 });
  assert.deepEqual(
    before.listeners[0]?.backends.map((b) => [b.node, b.weight]),
    [
      ["a1", 2],
      ["b1", 1],
    ],
  );
  const after = serviceForwarding(p, states({ b1: { state: "healthy", weight: 6 } }), {
    seed: 1,
    sizeFor: () => 1009,
  });
  const shares = Object.fromEntries(slotShares(after.listeners[0]!.table).map((s) => [s.name, s.share]));
  assert.ok(Math.abs((shares.b1 ?? 0) - 6 / 8) < 0.01, JSON.stringify(shares));
  const zero = serviceForwarding(p, states({ b1: { state: "healthy", weight: 0 } }), { seed: 1 });
  assert.deepEqual(
    zero.listeners[0]?.backends.map((b) => b.node),
    ["a1"],
  );
});

test("zonal affinity: a table per zone with healthy members", () => {
  const f = serviceForwarding(plan({ zonal: true }), states({ b1: { state: "unhealthy" } }), { seed: 1 });
  const l = f.listeners[0]!;
  assert.deepEqual([...l.zoneTables.keys()], ["za"]);
  assert.deepEqual(l.zoneTables.get("za")?.backends, ["a1", "a2"]);
});
