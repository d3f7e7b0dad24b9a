import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import type { EndpointSlice, Node, Service } from "../k8s/objects.ts";
import { DEFAULT_CONFIG, type Snapshot } from "../k8s/snapshot.ts";
import { planJson } from "./plan-json.ts";
import { createPlanCache, planSnapshot } from "./planner.ts";
import { withStatusAddresses } from "./status-vips.ts";

const node = (i: number, zone: string): Node => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name: `node-${i}`, labels: { "topology.kubernetes.io/zone": zone } },
  spec: {},
  status: {
    addresses: [{ type: "InternalIP", address: `198.51.100.${i}` }],
    conditions: [{ type: "Ready", status: "True" }],
  },
});

const service = (name: string, etp: "Cluster" | "Local"): Service => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace: "ns" },
  spec: {
    type: "LoadBalancer",
    externalTrafficPolicy: etp,
    ...(etp === "Local" && { healthCheckNodePort: 31000 }),
    ports: [{ port: 80, protocol: "TCP" }],
  },
});

interface Ep {
  node: number;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
}
const slice = (svc: string, eps: readonly Ep[], name = `${svc}-1`): EndpointSlice => ({
  apiVersion: "discovery.k8s.io/v1",
  kind: "EndpointSlice",
  metadata: { name, namespace: "ns", labels: { "kubernetes.io/service-name": svc } },
  addressType: "IPv4",
  ports: [{ name: "", port: 80, protocol: "TCP" }],
  endpoints: eps.map((e, i) => ({
    addresses: [`203.0.113.${i + 1}`],
    conditions: { ready: e.ready, serving: e.serving, terminating: e.terminating },
    nodeName: `node-${e.node}`,
  })),
});

const config = {
  ...DEFAULT_CONFIG,
  defaultClass: true,
  pools: [{ name: "p", addresses: ["203.0.113.200-203.0.113.250"], autoAssign: true, avoidBuggyIPs: false }],
};
const nodes = [1, 2, 3, 4, 5, 6].map((i) => node(i, `z${i % 3}`));
const snapshot = (services: Service[], slices: EndpointSlice[]): Snapshot => ({
  services,
  nodes,
  pods: [],
  endpointSlices: slices,
  endpoints: [],
  namespaces: [],
  config,
});

const epArb = fc.record({
  node: fc.integer({ min: 1, max: 7 }), // node-7 does not exist
  ready: fc.boolean(),
  serving: fc.boolean(),
  terminating: fc.boolean(),
});

test("property: a Local Service never targets a node without a non-terminating endpoint (unless all are terminating)", () => {
  fc.assert(
    fc.property(fc.array(epArb, { maxLength: 12 }), (eps) => {
      const { plans } = planSnapshot(snapshot([service("web", "Local")], [slice("web", eps)]));
      const plan = plans[0]!;
      const exists = (n: string) => nodes.some((x) => x.metadata.name === n);
      const live = new Set(
        eps
          .filter((e) => !e.terminating)
          .map((e) => `node-${e.node}`)
          .filter(exists),
      );
      const draining = new Set(eps.filter((e) => e.terminating && e.serving).map((e) => `node-${e.node}`));
      for (const b of plan.members) {
        if (live.size > 0) assert.ok(live.has(b.node), `${b.node} has no non-terminating endpoint`);
        else assert.ok(draining.has(b.node), `${b.node} has no serving endpoint`);
      }
      // and every node with a non-terminating endpoint is a member
      for (const n of live)
        assert.ok(
          plan.members.some((b) => b.node === n),
          `${n} left out`,
        );
      assert.equal(plan.backends.length, nodes.length, "every node appears in backends");
    }),
  );
});

test("incremental: after one slice changes, only that Service is planned again, and the result equals a fresh plan", () => {
  const services = [service("a", "Local"), service("b", "Cluster"), service("c", "Local")];
  const live = (n: number): Ep => ({ node: n, ready: true, serving: true, terminating: false });
  const slices = [slice("a", [live(1)]), slice("b", [live(2)]), slice("c", [live(3)])];
  const cache = createPlanCache();
  const first = planSnapshot(snapshot(services, slices), {}, cache);
  const changed = [slices[0]!, slices[1]!, slice("c", [live(3), live(4)])];
  const second = planSnapshot({ ...snapshot(services, changed), nodes, config }, {}, cache);
  // same `nodes` and `services` arrays were passed through the spread: a and b are reused
  assert.equal(second.plans[0], first.plans[0]);
  assert.equal(second.plans[1], first.plans[1]);
  assert.notEqual(second.plans[2], first.plans[2]);
  const fresh = planSnapshot(snapshot(services, changed));
  assert.deepEqual(JSON.parse(JSON.stringify(second.plans)), JSON.parse(JSON.stringify(fresh.plans)));
  assert.deepEqual(
    second.plans[2]?.members.map((b) => b.node),
    ["node-3", "node-4"],
  );
});

test("sticky subsets: the previous plan's members survive an unrelated node joining", () => {
  const many = Array.from({ length: 20 }, (_, i) => node(i + 1, "z"));
  const small = { ...config, clusterBackendLimit: 5 };
  const base: Snapshot = {
    services: [service("api", "Cluster")],
    nodes: many,
    pods: [],
    endpointSlices: [],
    endpoints: [],
    namespaces: [],
    config: small,
  };
  const first = planSnapshot(base).plans[0]!;
  const previous = new Map([[first.service, first]]);
  const grown = planSnapshot({ ...base, nodes: [node(0, "z"), ...many] }, { previous }).plans[0]!;
  assert.deepEqual(
    grown.members.map((b) => b.node),
    first.members.map((b) => b.node),
  );
});

test("property: planning slice changes incrementally gives the same plans as planning from scratch", () => {
  const services = [service("a", "Local"), service("b", "Cluster"), service("c", "Local")];
  const change = fc.record({
    at: fc.integer({ min: 0, max: 3 }),
    owner: fc.constantFrom("a", "b", "c", "x"),
    eps: fc.array(epArb, { maxLength: 4 }),
  });
  fc.assert(
    fc.property(fc.array(change, { minLength: 1, maxLength: 8 }), (changes) => {
      let slices = ["a", "b", "c", "a"].map((s, i) => slice(s, [], `slice-${i}`));
      const cache = createPlanCache();
      planSnapshot(snapshot(services, slices), {}, cache);
      for (const c of changes) {
        slices = slices.map((s, i) => (i === c.at ? slice(c.owner, c.eps, `slice-${i}`) : s));
        const warm = planSnapshot({ ...snapshot(services, slices), services, nodes, config }, {}, cache);
        const cold = planSnapshot(snapshot(services, slices));
        assert.deepEqual(JSON.parse(JSON.stringify(warm)), JSON.parse(JSON.stringify(cold)));
      }
    }),
    { numRuns: 60 },
  );
});

test("vipSource status: VIPs only from status (no pool needed, no allocation); withStatusAddresses leaves the rest out", () => {
  const withStatus = (name: string, ips: string[]): Service => ({
    ...service(name, "Cluster"),
    status: { loadBalancer: { ingress: ips.map((ip) => ({ ip })) } },
  });
  const a = withStatus("a", ["192.0.2.77"]); // in no pool: kept anyway, the controller chose it
  const b = withStatus("b", []);
  const c = withStatus("c", ["2001:db8::1", "198.51.100.9"]); // IPv4 single-stack: the IPv4 one
  const snap = snapshot([a, b, c], []);
  const ipam = planSnapshot(snap).plans;
  assert.equal(ipam.find((p) => p.service === "ns/b")?.vips[0]?.source, "allocated", "ipam allocates");
  const plans = planSnapshot(snap, { vipSource: "status" }).plans;
  const vips = Object.fromEntries(
    plans.map((p) => [p.service, p.vips.map((v) => `${v.address} ${v.source}`)]),
  );
  assert.deepEqual(vips, {
    "ns/a": ["192.0.2.77 status"],
    "ns/b": [],
    "ns/c": ["198.51.100.9 status"],
  });
  const filtered = withStatusAddresses(snap);
  assert.deepEqual(filtered.waiting, ["ns/b"]);
  assert.deepEqual(
    filtered.snapshot.services.map((s) => s.metadata.name),
    ["a", "c"],
  );
  const clean = snapshot([a], []);
  assert.equal(withStatusAddresses(clean).snapshot, clean, "nothing left out: the same snapshot");
  // a non-owned Service without status is not "waiting": it is not passlb's
  const other = { ...b, spec: { ...b.spec, loadBalancerClass: "example.com/other" } };
  assert.deepEqual(withStatusAddresses(snapshot([other], [])).waiting, []);
});

test("the JSON view: every field of the plan but members, in the order docs/plan.md shows", () => {
  const foreign: Service = {
    ...service("api", "Cluster"),
    metadata: {
      name: "api",
      namespace: "ns",
      annotations: { "metallb.io/loadBalancerIPs": "203.0.113.210" },
    },
  };
  const live: Ep = { node: 1, ready: true, serving: true, terminating: false };
  const plans = planSnapshot(snapshot([service("a", "Local"), foreign], [slice("a", [live])])).plans;
  const [local, withKeys] = plans;
  assert.ok(local && withKeys?.foreignKeys, "a plan without and one with foreign keys");
  const fields = (foreignKeys: boolean) => [
    ...["service", "uid", "externalTrafficPolicy", "ipFamilies", "vips"],
    ...(foreignKeys ? ["foreignKeys"] : []),
    ...["listeners", "backends", "healthChecks", "weighted", "zonalAffinity", "sessionAffinity"],
    ...["sourceRanges", "ipMode", "issues"],
  ];
  for (const [plan, keys] of [
    [local, false],
    [withKeys, true],
  ] as const) {
    const view = planJson(plan);
    assert.deepEqual(Object.keys(view), fields(keys));
    // nothing of the plan is lost but members, which repeats the included backends
    assert.deepEqual(
      Object.keys(plan).filter((k) => !(k in view)),
      ["members"],
    );
    assert.deepEqual(
      plan.members,
      plan.backends.filter((b) => b.included),
    );
    for (const k of Object.keys(view))
      assert.equal(view[k as keyof typeof view], plan[k as keyof typeof plan], k);
  }
});
