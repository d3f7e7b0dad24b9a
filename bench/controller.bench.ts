/**
 * Controller decision benchmark (issue #8 §2, issue 17 §4): one pass of the pure core
 * (controllerWrites: ownership, IPAM, per-Service writes, pool status) over a settled
 * cluster — what every read costs the leader — against the baseline of the planner's
 * IPAM alone (assignVips over the same Services and pools), measured in the same process.
 * With `--nodes N` the cluster also has N nodes (3 zones) and `--pods` Pods per Service
 * (selector Services, IPv6 Pods on random nodes), and the pass also includes what the leader
 * decides per read with `--manage-endpointslices` — the EndpointSlice decisions
 * (passlbSliceWrites: Pod selection, node zones and names, slice diff) — over slices settled
 * by a first pass, so a measured pass writes nothing.
 * Reported: ms per pass for both, the ratio, the process CPU time of the passes
 * (process.cpuUsage) and the load average.
 * Run: node --import tsx bench/controller.bench.ts [--services 5000 --rounds 20]
 *      node --import tsx bench/controller.bench.ts --services 10000 --nodes 5000 --pods 10 --rounds 5
 * Addresses: VIPs from 203.0.113.0/24 and fd00::/8 (documentation and ULA ranges), Pods from
 * fd00:2::/64; no traffic.
 */
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { controllerWrites } from "../src/controller/controller-writes.ts";
import { passlbSliceWrites } from "../src/controller/passlb-slices.ts";
import { applyServiceWrite } from "../src/controller/service-writes.ts";
import type { LoadBalancerIPPool } from "../src/k8s/load-balancer-ip-pool.ts";
import { poolOf } from "../src/k8s/load-balancer-ip-pool.ts";
import type { EndpointSlice, Node, Pod, Service } from "../src/k8s/objects.ts";
import { emptySnapshot, objectKey, type Snapshot } from "../src/k8s/snapshot.ts";
import { seededRandom } from "../src/net/seeded-random.ts";
import { addressPools } from "../src/plan/address-pools.ts";
import { assignVips } from "../src/plan/ipam.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SERVICES = arg("services", 5000);
const ROUNDS = arg("rounds", 20);
const NODES = arg("nodes", 0);
const PODS_PER_SERVICE = arg("pods", 10);
const OPTIONS = { defaultClass: false, ipMode: "VIP" as const };

const pools: LoadBalancerIPPool[] = [
  {
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name: "v4", creationTimestamp: "2026-01-01T00:00:00Z", resourceVersion: "1" },
    spec: { addresses: ["203.0.113.0/24"], autoAssign: true, avoidBuggyIPs: false, disabled: false },
  },
  {
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name: "v6", creationTimestamp: "2026-01-01T00:00:01Z", resourceVersion: "1" },
    spec: { addresses: ["fd00:10::/112"], autoAssign: true, avoidBuggyIPs: false, disabled: false },
  },
];

// IPv6-first single-stack Services, a quarter dual stack, every tenth sharing an address
let services: Service[] = Array.from({ length: SERVICES }, (_, i) => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: {
    name: `svc-${i}`,
    namespace: `ns-${i % 50}`,
    resourceVersion: "1",
    creationTimestamp: "2026-01-01T00:00:00Z",
    annotations: i % 10 === 0 ? { "passlb.io/allow-shared-ip": "shared" } : {},
  },
  spec: {
    type: "LoadBalancer",
    loadBalancerClass: "passlb.io/l4",
    ports: [{ port: 1000 + (i % 60000), protocol: "TCP", targetPort: 8080 }],
    ...(NODES > 0 ? { selector: { app: `svc-${i}` } } : {}),
    ipFamilies: ["IPv6"],
    ...(i % 4 === 0 ? { ipFamilyPolicy: "PreferDualStack" as const } : {}),
  },
}));

// settle the cluster: apply one pass's writes so the measured passes write nothing
const first = controllerWrites({ services, pools, options: OPTIONS, nowMs: 0 });
const byKey = new Map(first.services.map((w) => [w.key, w]));
services = services.map((s) => {
  let o = s;
  for (const w of byKey.get(objectKey(s.metadata))?.writes ?? []) o = applyServiceWrite(o, w, 0) ?? o;
  return o;
});
const settledPools = pools.map((p) => {
  const status = first.pools.find((x) => x.pool.metadata.name === p.metadata.name)?.status;
  return status ? { ...p, status } : p;
});

// nodes and Pods (with --nodes): the EndpointSlice decisions, settled by a first pass
const rand = seededRandom(11);
const nodes: Node[] = Array.from({ length: NODES }, (_, i) => ({
  apiVersion: "v1",
  kind: "Node",
  metadata: { name: `node-${i}`, labels: { "topology.kubernetes.io/zone": `zone-${i % 3}` } },
  spec: {},
  status: { conditions: [{ type: "Ready", status: "True" }] },
}));
const pods: Pod[] = [];
if (NODES > 0)
  for (let i = 0; i < SERVICES; i++)
    for (let k = 0; k < PODS_PER_SERVICE; k++) {
      const n = pods.length + 1;
      const ip = `fd00:2::${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`;
      pods.push({
        apiVersion: "v1",
        kind: "Pod",
        metadata: {
          name: `svc-${i}-${k}`,
          namespace: `ns-${i % 50}`,
          uid: `uid-${i}-${k}`,
          labels: { app: `svc-${i}` },
        },
        spec: {
          nodeName: `node-${Math.floor(rand() * NODES)}`,
          containers: [{ name: "main", ports: [{ containerPort: 8080, protocol: "TCP" }] }],
        },
        status: {
          phase: "Running",
          podIP: ip,
          podIPs: [{ ip }],
          conditions: [{ type: "Ready", status: "True" }],
        },
      });
    }
const cluster = (endpointSlices: EndpointSlice[]): Snapshot => ({
  ...emptySnapshot(),
  services,
  nodes,
  pods,
  endpointSlices,
});
let settledSlices: EndpointSlice[] = [];
if (NODES > 0) {
  let n = 0;
  for (const w of passlbSliceWrites(cluster([]), false, []))
    for (const slice of w.create)
      settledSlices.push({
        ...slice,
        metadata: {
          ...slice.metadata,
          name: `${slice.metadata.generateName ?? ""}${(n++).toString(36)}`,
          resourceVersion: "1",
        },
      });
}
const snapshot = cluster(settledSlices);
settledSlices = [];

function time(run: () => void): { ms: number; cpuMs: number } {
  run(); // warm-up
  const cpu = process.cpuUsage();
  const t0 = performance.now();
  for (let r = 0; r < ROUNDS; r++) run();
  const used = process.cpuUsage(cpu);
  return { ms: (performance.now() - t0) / ROUNDS, cpuMs: (used.user + used.system) / 1000 / ROUNDS };
}

let writes = -1;
const baseline = time(() => {
  assignVips(services, addressPools(settledPools.map(poolOf)));
});
let sliceWrites = -1;
const pass = time(() => {
  const w = controllerWrites({ services, pools: settledPools, options: OPTIONS, nowMs: 1000 });
  writes = w.services.length + w.pools.length;
  if (NODES > 0) sliceWrites = passlbSliceWrites(snapshot, false, []).length;
});
const [l1, l5] = loadavg();
console.log(
  `services ${SERVICES}, nodes ${NODES}, pods ${pods.length}, slices ${snapshot.endpointSlices.length}, rounds ${ROUNDS}, writes in a settled pass: ${writes}${NODES > 0 ? `, Services with slice writes: ${sliceWrites}` : ""}`,
);
console.log(
  `baseline (planner IPAM alone): ${baseline.ms.toFixed(1)} ms/pass, CPU ${baseline.cpuMs.toFixed(1)} ms`,
);
console.log(
  `controller pass (decide + diff${NODES > 0 ? " + EndpointSlice decisions" : ""}): ${pass.ms.toFixed(1)} ms/pass, CPU ${pass.cpuMs.toFixed(1)} ms`,
);
console.log(
  `ratio controller/baseline: ${(pass.ms / baseline.ms).toFixed(2)} (CPU ${(pass.cpuMs / baseline.cpuMs).toFixed(2)})`,
);
console.log(`load average ${l1?.toFixed(2)} ${l5?.toFixed(2)}`);
