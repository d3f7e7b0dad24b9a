import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import type { LoadBalancerIPPool } from "../k8s/load-balancer-ip-pool.ts";
import type { Service } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { REQUESTED_IPS_ANNOTATION, SHARED_IP_ANNOTATION } from "../plan/ipam.ts";
import { POOL_EXHAUSTED_CONDITION, POOL_OVERLAP_CONDITION, SERVICE_READY_CONDITION } from "./conditions.ts";
import { type ControllerOptions, type ControllerWrites, controllerWrites } from "./controller-writes.ts";
import { applyServiceWrite, CLEANUP_FINALIZER } from "./service-writes.ts";

const NOW = Date.UTC(2026, 0, 1);
const OPTIONS: ControllerOptions = { defaultClass: false, ipMode: "VIP" };

function svc(
  name: string,
  extra: { spec?: Partial<Service["spec"]>; meta?: Partial<Service["metadata"]>; ip?: string } = {},
): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name,
      namespace: "default",
      uid: `uid-${name}`,
      creationTimestamp: "2026-01-01T00:00:00Z",
      ...extra.meta,
    },
    spec: {
      type: "LoadBalancer",
      loadBalancerClass: "passlb.io/l4",
      ports: [{ port: 80, protocol: "TCP" }],
      ...extra.spec,
    },
    ...(extra.ip ? { status: { loadBalancer: { ingress: [{ ip: extra.ip }] } } } : {}),
  };
}

function pool(
  name: string,
  addresses: string[],
  created = "2026-01-01T00:00:00Z",
  extra: Partial<LoadBalancerIPPool["spec"]> = {},
): LoadBalancerIPPool {
  return {
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name, creationTimestamp: created },
    spec: { addresses, autoAssign: true, avoidBuggyIPs: false, disabled: false, ...extra },
  };
}

/** What the API server would hold after every write succeeded. */
function applyAll(services: readonly Service[], pools: readonly LoadBalancerIPPool[], w: ControllerWrites) {
  const byKey = new Map(services.map((s) => [objectKey(s.metadata), s]));
  for (const work of w.services) {
    let s: Service | undefined = byKey.get(work.key)!;
    for (const write of work.writes) s = applyServiceWrite(s, write, NOW) ?? s;
    if (s.metadata.deletionTimestamp && !(s.metadata.finalizers ?? []).length) byKey.delete(work.key);
    else byKey.set(work.key, s);
  }
  const poolStatus = new Map(w.pools.map((p) => [p.pool.metadata.name, p.status]));
  return {
    services: [...byKey.values()],
    pools: pools.map((p) => {
      const status = poolStatus.get(p.metadata.name);
      return status ? { ...p, status } : p;
    }),
  };
}

const ingressOf = (s: Service | undefined) => (s?.status?.loadBalancer?.ingress ?? []).map((i) => i.ip);

test("an owned Service gets the finalizer first, then its VIP and condition; other Services are left alone", () => {
  const services = [
    svc("web"),
    svc("other", { spec: { loadBalancerClass: "example.com/lb" } }),
    svc("plain", { spec: { loadBalancerClass: undefined } }),
  ];
  const pools = [pool("default", ["203.0.113.10-203.0.113.11"])];
  const w = controllerWrites({ services, pools, options: OPTIONS, nowMs: NOW });
  assert.deepEqual(
    w.services.map((s) => s.key),
    ["default/web"],
  );
  const work = w.services[0]!;
  assert.deepEqual(
    work.writes.map((x) => x.op),
    ["add_finalizer", "status"],
  );
  const status = work.writes[1]!;
  assert.ok(status.op === "status");
  assert.deepEqual(status.ingress, [{ ip: "203.0.113.10", ipMode: "VIP" }]);
  assert.equal(status.condition?.type, SERVICE_READY_CONDITION);
  assert.equal(status.condition?.status, "True");
  assert.deepEqual(
    work.before.map((e) => e.reason),
    ["EnsuringLoadBalancer"],
  );
  assert.deepEqual(
    work.after.map((e) => e.reason),
    ["EnsuredLoadBalancer"],
  );

  const after = applyAll(services, pools, w);
  const web = after.services.find((s) => s.metadata.name === "web");
  assert.deepEqual(web?.metadata.finalizers, [CLEANUP_FINALIZER]);
  assert.deepEqual(ingressOf(web), ["203.0.113.10"]);
  assert.deepEqual(after.pools[0]?.status?.ipv4, { total: "2", used: 1 });

  const again = controllerWrites({ ...after, options: OPTIONS, nowMs: NOW + 60_000 });
  assert.deepEqual(again.services, [], "an unchanged cluster gives no Service writes");
  assert.deepEqual(again.pools, [], "and no pool writes");
});

test("--default-class takes class-less Services; --ip-mode Proxy is written into the ingress", () => {
  const services = [svc("plain", { spec: { loadBalancerClass: undefined } })];
  const w = controllerWrites({
    services,
    pools: [pool("p", ["203.0.113.0/30"])],
    options: { defaultClass: true, ipMode: "Proxy" },
    nowMs: NOW,
  });
  const status = w.services[0]?.writes.find((x) => x.op === "status");
  assert.ok(status?.op === "status");
  assert.deepEqual(status.ingress, [{ ip: "203.0.113.0", ipMode: "Proxy" }]);
});

test("a Service keeps the address its status already holds (what a new leader reads first)", () => {
  const services = [svc("b", { ip: "203.0.113.12" }), svc("a")];
  const pools = [pool("default", ["203.0.113.10-203.0.113.12"])];
  const after = applyAll(
    services,
    pools,
    controllerWrites({ services, pools, options: OPTIONS, nowMs: NOW }),
  );
  assert.deepEqual(ingressOf(after.services.find((s) => s.metadata.name === "b")), ["203.0.113.12"]);
  assert.deepEqual(ingressOf(after.services.find((s) => s.metadata.name === "a")), ["203.0.113.10"]);
});

test("class change or type change releases: ingress and condition cleared, then the finalizer removed", () => {
  const pools = [pool("default", ["203.0.113.10-203.0.113.11"])];
  const first = [svc("web"), svc("db")];
  let state = applyAll(
    first,
    pools,
    controllerWrites({ services: first, pools, options: OPTIONS, nowMs: NOW }),
  );
  const changed = state.services.map((s) =>
    s.metadata.name === "web"
      ? { ...s, spec: { ...s.spec, loadBalancerClass: "example.com/lb" } }
      : { ...s, spec: { ...s.spec, type: "ClusterIP" as const } },
  );
  const w = controllerWrites({ services: changed, pools: state.pools, options: OPTIONS, nowMs: NOW });
  assert.deepEqual(
    w.services.map((s) => [s.key, s.action, s.writes.map((x) => x.op)]),
    [
      ["default/db", "release", ["status", "remove_finalizer"]],
      ["default/web", "release", ["status", "remove_finalizer"]],
    ],
  );
  assert.deepEqual(
    w.services[0]?.before.map((e) => e.reason),
    ["DeletingLoadBalancer"],
  );
  assert.deepEqual(
    w.services[0]?.after.map((e) => e.reason),
    ["DeletedLoadBalancer"],
  );
  state = applyAll(changed, state.pools, w);
  for (const s of state.services) {
    assert.deepEqual(ingressOf(s), []);
    assert.deepEqual(s.metadata.finalizers, []);
    assert.ok(!(s.status?.conditions ?? []).some((c) => c.type === SERVICE_READY_CONDITION));
  }
  assert.deepEqual(state.pools[0]?.status?.ipv4, { total: "2", used: 0 });
  assert.deepEqual(controllerWrites({ ...state, options: OPTIONS, nowMs: NOW }).services, []);
});

test("deletion: only the finalizer is removed, and the address is free in the same pass", () => {
  const pools = [pool("default", ["203.0.113.10"])];
  const first = [svc("old")];
  const state = applyAll(
    first,
    pools,
    controllerWrites({ services: first, pools, options: OPTIONS, nowMs: NOW }),
  );
  const deleting = state.services.map((s) => ({
    ...s,
    metadata: { ...s.metadata, deletionTimestamp: "2026-01-01T00:01:00Z" },
  }));
  const services = [...deleting, svc("newcomer")];
  const w = controllerWrites({ services, pools: state.pools, options: OPTIONS, nowMs: NOW });
  assert.deepEqual(
    w.services.map((s) => [s.key, s.writes.map((x) => x.op)]),
    [
      ["default/old", ["remove_finalizer"]],
      ["default/newcomer", ["add_finalizer", "status"]],
    ],
  );
  const after = applyAll(services, state.pools, w);
  assert.deepEqual(
    after.services.map((s) => s.metadata.name),
    ["newcomer"],
  );
  assert.deepEqual(ingressOf(after.services[0]), ["203.0.113.10"]);
});

test("pool exhaustion: condition False with the issue code, Warning Events, pool status Exhausted", () => {
  const pools = [pool("tiny", ["203.0.113.10"])];
  const services = [svc("first"), svc("second-one")];
  const w = controllerWrites({ services, pools, options: OPTIONS, nowMs: NOW });
  const second = w.services.find((s) => s.key === "default/second-one")!;
  const status = second.writes.find((x) => x.op === "status");
  assert.ok(status?.op === "status");
  assert.deepEqual(status.ingress, []);
  assert.equal(status.condition?.status, "False");
  assert.equal(status.condition?.reason, "PoolExhausted");
  assert.deepEqual(second.before, [], "nothing is being ensured");
  assert.deepEqual(
    second.after.map((e) => [e.type, e.reason]),
    [
      ["Warning", "SyncLoadBalancerFailed"],
      ["Warning", "PoolExhausted"],
    ],
  );
  const poolStatus = w.pools[0]?.status;
  assert.deepEqual(poolStatus?.ipv4, { total: "1", used: 1 });
  const exhausted = poolStatus?.conditions?.find((c) => c.type === POOL_EXHAUSTED_CONDITION);
  assert.equal(exhausted?.status, "True");
  // nothing changes: no more writes, no more Events
  const state = applyAll(services, pools, w);
  assert.deepEqual(controllerWrites({ ...state, options: OPTIONS, nowMs: NOW + 1000 }).services, []);
});

test("conflicts: a requested address another Service holds is listed on its pool", () => {
  const pools = [pool("default", ["203.0.113.10-203.0.113.12"])];
  const services = [
    svc("a", { ip: "203.0.113.11", meta: { finalizers: [CLEANUP_FINALIZER] } }),
    svc("bb", { meta: { annotations: { [REQUESTED_IPS_ANNOTATION]: "203.0.113.11" } } }),
    svc("ccc", {
      ip: "203.0.113.12",
      meta: { annotations: { [SHARED_IP_ANNOTATION]: "k", [REQUESTED_IPS_ANNOTATION]: "203.0.113.12" } },
    }),
    svc("dddd", {
      meta: { annotations: { [SHARED_IP_ANNOTATION]: "k", [REQUESTED_IPS_ANNOTATION]: "203.0.113.12" } },
    }),
  ];
  const w = controllerWrites({ services, pools, options: OPTIONS, nowMs: NOW });
  assert.deepEqual(w.pools[0]?.status.conflicts, [
    { address: "203.0.113.11", services: ["default/a", "default/bb"], reason: "address_in_use" },
    { address: "203.0.113.12", services: ["default/ccc", "default/dddd"], reason: "port_clash_on_shared_ip" },
  ]);
});

test("overlapping pools: the later one says so; a disabled pool hands out nothing", () => {
  const pools = [
    pool("later", ["203.0.113.8/29"], "2026-01-02T00:00:00Z"),
    pool("first", ["203.0.113.10-203.0.113.20"], "2026-01-01T00:00:00Z"),
    pool("off", ["198.51.100.0/30"], "2026-01-03T00:00:00Z", { disabled: true }),
  ];
  const w = controllerWrites({ services: [svc("x")], pools, options: OPTIONS, nowMs: NOW });
  const cond = (name: string, type: string) =>
    w.pools.find((p) => p.pool.metadata.name === name)?.status.conditions?.find((c) => c.type === type);
  assert.equal(cond("later", POOL_OVERLAP_CONDITION)?.status, "True");
  assert.match(cond("later", POOL_OVERLAP_CONDITION)?.message ?? "", /first/);
  assert.equal(cond("first", POOL_OVERLAP_CONDITION)?.status, "False");
  assert.equal(cond("off", "passlb.io/PoolReady")?.reason, "Disabled");
  assert.equal(w.assignments.get("default/x")?.vips[0]?.pool, "first");
});

test("IPv6 totals beyond 2^53 are exact decimal strings", () => {
  const w = controllerWrites({
    services: [],
    pools: [pool("v6", ["fd00::/64", "203.0.113.0/24"])],
    options: OPTIONS,
    nowMs: NOW,
  });
  assert.deepEqual(w.pools[0]?.status.ipv6, { total: (2n ** 64n).toString(), used: 0 });
  assert.deepEqual(w.pools[0]?.status.ipv4, { total: "256", used: 0 });
});

const specArb = fc.record({
  key: fc.option(fc.constantFrom("a", "b"), { nil: undefined }),
  ports: fc.uniqueArray(fc.constantFrom(53, 80, 443), { minLength: 1, maxLength: 2 }),
  request: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
  status: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
  owned: fc.boolean(),
  deleting: fc.boolean(),
  finalizer: fc.boolean(),
});

test("property: after the writes, no address is held by two clashing Services; no address moves after the first pass; the cluster settles", () => {
  fc.assert(
    fc.property(fc.array(specArb, { maxLength: 10 }), (specs) => {
      const services = specs.map((s, i) =>
        svc(`s${i}`, {
          spec: {
            loadBalancerClass: s.owned ? "passlb.io/l4" : "example.com/lb",
            ports: s.ports.map((port) => ({ port, protocol: "TCP" as const })),
          },
          meta: {
            annotations: {
              ...(s.key && { [SHARED_IP_ANNOTATION]: s.key }),
              ...(s.request && { [REQUESTED_IPS_ANNOTATION]: `203.0.113.${s.request}` }),
            },
            ...(s.deleting && { deletionTimestamp: "2026-01-01T00:00:00Z" }),
            ...(s.finalizer && { finalizers: [CLEANUP_FINALIZER] }),
          },
          ...(s.status && { ip: `203.0.113.${s.status}` }),
        }),
      );
      const pools = [
        pool("p", ["203.0.113.1-203.0.113.4"]),
        pool("q", ["203.0.113.5-203.0.113.6"], "2026-01-02T00:00:00Z"),
      ];
      const state = applyAll(
        services,
        pools,
        controllerWrites({ services, pools, options: OPTIONS, nowMs: NOW }),
      );
      const byIp = new Map<string, Service[]>();
      for (const s of state.services) {
        if (s.spec.loadBalancerClass !== "passlb.io/l4" || s.metadata.deletionTimestamp) continue;
        for (const ip of ingressOf(s)) byIp.set(ip!, [...(byIp.get(ip!) ?? []), s]);
      }
      for (const [ip, holders] of byIp) {
        if (holders.length < 2) continue;
        const keys = new Set(holders.map((h) => h.metadata.annotations?.[SHARED_IP_ANNOTATION]));
        assert.equal(keys.size, 1, `${ip}: holders without one sharing key`);
        assert.ok(!keys.has(undefined), `${ip}: shared without a key`);
        const ports = holders.flatMap((h) => h.spec.ports.map((p) => p.port));
        assert.equal(new Set(ports).size, ports.length, `${ip}: port clash`);
      }
      for (const s of state.services)
        if (s.spec.loadBalancerClass === "passlb.io/l4" && !s.metadata.deletionTimestamp)
          assert.ok(s.metadata.finalizers?.includes(CLEANUP_FINALIZER), "owned without the finalizer");
      // The second pass never moves an address. It may still restate a condition: an
      // issue's message names the Services holding an address, and a sharer assigned late
      // in the first pass holds it from its status in the second. It may give an address
      // to a Service that had none: one the first pass left because another Service still
      // showed it in its status (never handed out while shown: ipam.ts, address-ledger.ts).
      const second = controllerWrites({ ...state, options: OPTIONS, nowMs: NOW + 5000 });
      for (const work of second.services) {
        assert.equal(work.action, "ensure");
        for (const write of work.writes) {
          assert.equal(write.op, "status", `${work.key}: ${write.op} in the second pass`);
          if (write.op === "status" && ingressOf(work.service).length > 0)
            assert.deepEqual(
              write.ingress.map((i) => i.ip),
              ingressOf(work.service),
              `${work.key}: address moved in the second pass`,
            );
        }
      }
      const settled = applyAll(state.services, state.pools, second);
      const third = controllerWrites({ ...settled, options: OPTIONS, nowMs: NOW + 10_000 });
      assert.deepEqual(
        third.services.map((x) => x.key),
        [],
        "the third pass writes nothing",
      );
      assert.deepEqual(
        third.pools.map((p) => p.pool.metadata.name),
        [],
      );
    }),
    { numRuns: 200 },
  );
});

test("accepted foreign classes, Services holding addresses first, allocateLoadBalancerNodePorts: false per mode", () => {
  const pools = [pool("default", ["203.0.113.10-203.0.113.12"])];
  const noNodePorts = {
    allocateLoadBalancerNodePorts: false,
    ports: [{ port: 80, protocol: "TCP" as const }],
  };
  const services = [
    svc("a-new", { spec: { loadBalancerClass: "io.cilium/l2-announcer", ...noNodePorts } }),
    svc("b-held", { spec: { loadBalancerClass: "io.cilium/l2-announcer" }, ip: "203.0.113.12" }),
    svc("c-other", { spec: { loadBalancerClass: "example.com/lb" }, ip: "203.0.113.10" }),
  ];
  const options = { ...OPTIONS, acceptClasses: ["io.cilium/l2-announcer"] };
  const w = controllerWrites({ services, pools, options, nowMs: NOW });
  assert.deepEqual(
    w.services.map((s) => s.key),
    ["default/b-held", "default/a-new"],
    "the Service holding an address is written first; another class is not touched",
  );
  const status = (key: string, x: ControllerWrites) =>
    x.services.find((s) => s.key === key)?.writes.find((y) => y.op === "status");
  const a = status("default/a-new", w);
  assert.deepEqual(
    a?.op === "status" && a.ingress,
    [{ ip: "203.0.113.11", ipMode: "VIP" }],
    "not c-other's .10",
  );
  assert.equal(a?.op === "status" && a.condition?.status, "True");
  assert.ok(!w.assignments.get("default/a-new")?.issues.some((i) => i.code === "node_ports_required"));
  const proxy = controllerWrites({ services, pools, options: { ...options, ipMode: "Proxy" }, nowMs: NOW });
  assert.deepEqual(
    proxy.assignments.get("default/a-new")?.issues.map((i) => i.code),
    ["node_ports_required"],
    "the userspace mode needs NodePorts",
  );
  assert.ok(
    proxy.services
      .find((s) => s.key === "default/a-new")
      ?.after.some((e) => e.reason === "NodePortsRequired" && e.type === "Warning"),
  );
});

test("pool namespace selectors see the watched Namespaces' labels", () => {
  const pools = [
    pool("gold", ["203.0.113.10"], "2026-01-01T00:00:00Z", {
      allocation: { namespaceSelectors: [{ matchLabels: { tier: "gold" } }] },
    }),
    pool("rest", ["203.0.113.20"], "2026-01-01T00:00:01Z"),
  ];
  const services = [svc("a", { meta: { namespace: "vip" }, ip: "203.0.113.10" })];
  const namespaces = [
    {
      apiVersion: "v1" as const,
      kind: "Namespace" as const,
      metadata: { name: "vip", labels: { tier: "gold" } },
    },
  ];
  const kept = controllerWrites({ services, pools, namespaces, options: OPTIONS, nowMs: NOW });
  assert.deepEqual(
    kept.assignments.get("vip/a")?.vips.map((v) => [v.address, v.source]),
    [["203.0.113.10", "status"]],
  );
  const blind = controllerWrites({ services, pools, options: OPTIONS, nowMs: NOW });
  assert.deepEqual(
    blind.assignments.get("vip/a")?.vips.map((v) => v.address),
    ["203.0.113.20"],
    "without the labels the pool does not admit it",
  );
});

test("usage: every pool's size and use per family each pass, also when no status changes (the pool gauges)", () => {
  const services = [svc("web"), svc("api")];
  const pools = [
    pool("default", ["203.0.113.10-203.0.113.12", "fd00:10::/64"]),
    pool("spare", ["203.0.113.20"]),
  ];
  const first = controllerWrites({ services, pools, options: OPTIONS, nowMs: NOW });
  const expected = [
    { pool: "default", family: "IPv4", size: 3, used: 2 },
    { pool: "default", family: "IPv6", size: Number.MAX_SAFE_INTEGER, used: 0 },
    { pool: "spare", family: "IPv4", size: 1, used: 0 },
  ];
  assert.deepEqual(first.usage, expected);
  const after = applyAll(services, pools, first);
  const second = controllerWrites({ ...after, options: OPTIONS, nowMs: NOW });
  assert.deepEqual(second.pools, [], "nothing left to write");
  assert.deepEqual(second.usage, expected);
});
