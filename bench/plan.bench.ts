/**
 * Planner benchmark (issue: foundation §9).
 *   - full plan: 10,000 Services over 5,000 nodes and 200,000 endpoints, one snapshot;
 *     targets ≤ 2 s and peak RSS ≤ 1 GB;
 *   - incremental: one endpoint changes, re-plan with the cache; target ≤ 10 ms.
 * Ratios against baselines measured in the same process: structuredClone of the snapshot
 * (touching every input object once) for the full plan, and the full plan for the
 * incremental one. Wall and CPU time (process.cpuUsage) are both reported: on a shared
 * machine the CPU figures and ratios are the ones to compare. Run:
 *   node --import tsx bench/plan.bench.ts [--services N --nodes N --endpoints N --runs N --changes N]
 * Addresses are IPv6 ULA (fd00::/8): nothing is sent anywhere, but the bench stays inside
 * the documentation and private ranges the project uses.
 */
import { performance } from "node:perf_hooks";
import type { EndpointSlice, Node, Service } from "../src/k8s/objects.ts";
import { DEFAULT_CONFIG, type Snapshot } from "../src/k8s/snapshot.ts";
import { seededRandom } from "../src/net/seeded-random.ts";
import { createPlanCache, planSnapshot } from "../src/plan/planner.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SERVICES = arg("services", 10_000);
const NODES = arg("nodes", 5_000);
const ENDPOINTS = arg("endpoints", 200_000);
const ZONES = 5;
const CHANGES = arg("changes", 1_000); // incremental re-plans, each after one endpoint change
const RUNS = arg("runs", 3); // full plans with a fresh cache (after the first of the process)

/** The pod's address in fd00:2::/64, as Go prints it (RFC 5952): pods past 0xffff need a
 * second word (a single group above 0xffff would not be an address at all). */
function podAddress(pod: number): string {
  const low = (pod & 0xffff).toString(16);
  return pod > 0xffff ? `fd00:2::${(pod >>> 16).toString(16)}:${low}` : `fd00:2::${low}`;
}

function makeSnapshot(): Snapshot {
  const rand = seededRandom(42);
  const nodes: Node[] = Array.from({ length: NODES }, (_, i) => ({
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: `node-${i}`, labels: { "topology.kubernetes.io/zone": `zone-${i % ZONES}` } },
    spec: {},
    status: {
      addresses: [{ type: "InternalIP", address: `fd00:1::${i.toString(16)}` }],
      conditions: [{ type: "Ready", status: "True" }],
    },
  }));
  const services: Service[] = [];
  const endpointSlices: EndpointSlice[] = [];
  const perService = Math.floor(ENDPOINTS / SERVICES);
  let pod = 0;
  for (let s = 0; s < SERVICES; s++) {
    const name = `svc-${s}`;
    const local = s % 2 === 1;
    services.push({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name, namespace: `ns-${s % 50}` },
      spec: {
        type: "LoadBalancer",
        ipFamilies: ["IPv6"],
        externalTrafficPolicy: local ? "Local" : "Cluster",
        ...(local && { healthCheckNodePort: 30000 + (s % 2700) }),
        ports: [{ name: "http", port: 80, protocol: "TCP", targetPort: 8080 }],
      },
    });
    endpointSlices.push({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: `${name}-abcde`,
        namespace: `ns-${s % 50}`,
        labels: { "kubernetes.io/service-name": name },
      },
      addressType: "IPv6",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints: Array.from({ length: perService }, () => {
        pod++;
        return {
          addresses: [podAddress(pod)],
          conditions: { ready: rand() > 0.05, serving: true, terminating: false },
          nodeName: `node-${Math.floor(rand() * NODES)}`,
        };
      }),
    });
  }
  return {
    services,
    nodes,
    pods: [],
    endpointSlices,
    endpoints: [],
    namespaces: [],
    config: {
      ...DEFAULT_CONFIG,
      defaultClass: true,
      pools: [{ name: "bench", addresses: ["fd00:10::/112"], autoAssign: true, avoidBuggyIPs: false }],
    },
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** nearest-rank percentile: the smallest sample with at least p of all samples at or below it */
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(xs.length * p) - 1)]!;

const snapshot = makeSnapshot();
const rssBefore = process.memoryUsage().rss;

// Baseline: touch every input object once.
const cloneTimes: number[] = [];
const cloneCpu: number[] = [];
for (let i = 0; i < 3; i++) {
  const t = performance.now();
  const c = process.cpuUsage();
  structuredClone(snapshot);
  cloneTimes.push(performance.now() - t);
  const u = process.cpuUsage(c);
  cloneCpu.push((u.user + u.system) / 1000);
}

// Full plans, each with a fresh cache (cold), RUNS runs.
const fullTimes: number[] = [];
const fullCpu: number[] = [];
let cache = createPlanCache();
const c0 = process.cpuUsage();
const t0first = performance.now();
let result = planSnapshot(snapshot, {}, cache);
const firstWall = performance.now() - t0first;
const firstCpuUsage = process.cpuUsage(c0);
const firstCpu = (firstCpuUsage.user + firstCpuUsage.system) / 1000;
for (let i = 0; i < RUNS; i++) {
  cache = createPlanCache();
  const t = performance.now();
  const c = process.cpuUsage();
  result = planSnapshot(snapshot, {}, cache);
  fullTimes.push(performance.now() - t);
  const u = process.cpuUsage(c);
  fullCpu.push((u.user + u.system) / 1000);
}
const members = result.plans.reduce((n, p) => n + p.members.length, 0);
const errors = result.plans.filter((p) => p.issues.some((i) => i.severity === "error")).length;

// Incremental: flip one endpoint's readiness in one slice, re-plan with the warm cache.
const incTimes: number[] = [];
const incCpu: number[] = [];
let current = snapshot;
const rand = seededRandom(7);
for (let i = 0; i < CHANGES; i++) {
  const s = Math.floor(rand() * SERVICES);
  const slices = current.endpointSlices.slice();
  const old = slices[s]!;
  const eps = (old.endpoints ?? []).slice();
  const e = eps[0]!;
  eps[0] = { ...e, conditions: { ...e.conditions, ready: !e.conditions.ready } };
  slices[s] = { ...old, endpoints: eps };
  current = { ...current, endpointSlices: slices };
  const t = performance.now();
  const c = process.cpuUsage();
  const r = planSnapshot(current, {}, cache);
  incTimes.push(performance.now() - t);
  const u = process.cpuUsage(c);
  incCpu.push((u.user + u.system) / 1000);
  if (r.plans.length !== result.plans.length) throw new Error("incremental plan lost Services");
}

// Materialising every node for one Service's output (the lazy `backends`).
const t0 = performance.now();
const one = result.plans[0]!.backends.length;
const materialise = performance.now() - t0;

const peakRss = process.resourceUsage().maxRSS * 1024;
const full = median(fullTimes);
const cpu = median(fullCpu);
const clone = median(cloneTimes);
const cloneCpuMedian = median(cloneCpu);
const inc50 = median(incTimes);
const inc99 = pct(incTimes, 0.99);
const mb = (b: number) => `${(b / 1024 / 1024).toFixed(0)} MB`;
const load = (await import("node:os")).loadavg()[0]!.toFixed(1);

console.log(
  `planner benchmark: ${SERVICES} Services, ${NODES} nodes, ${SERVICES * Math.floor(ENDPOINTS / SERVICES)} endpoints (load average ${load})`,
);
console.log(`  plans: ${result.plans.length} (${errors} with errors), members in total: ${members}`);
console.log(
  `  first plan of the process:             ${firstWall.toFixed(0)} ms wall, ${firstCpu.toFixed(0)} ms CPU (JIT warm-up included)`,
);
console.log(
  `  full plan, fresh cache (median of ${RUNS}):  ${full.toFixed(0)} ms wall, ${cpu.toFixed(0)} ms CPU   target ≤ 2000 ms → ${(full / 2000).toFixed(2)} of budget (CPU ${(cpu / 2000).toFixed(2)})`,
);
console.log(
  `  baseline structuredClone(snapshot):    ${clone.toFixed(0)} ms wall, ${cloneCpuMedian.toFixed(0)} ms CPU   ratio plan/clone = ${(full / clone).toFixed(2)} wall, ${(cpu / cloneCpuMedian).toFixed(2)} CPU`,
);
console.log(
  `  incremental re-plan, ${CHANGES} changes:    p50 ${inc50.toFixed(2)} ms, p99 ${inc99.toFixed(2)} ms, max ${Math.max(...incTimes).toFixed(2)} ms wall (CPU p50 ${median(incCpu).toFixed(2)}, p99 ${pct(incCpu, 0.99).toFixed(2)} ms)   target ≤ 10 ms; p50 = ${(inc50 / full).toFixed(5)} × full plan`,
);
console.log(`  one Service's full backend list (${one} nodes) built in ${materialise.toFixed(2)} ms`);
console.log(`  RSS: ${mb(rssBefore)} after building the snapshot, peak ${mb(peakRss)}   target ≤ 1024 MB`);
