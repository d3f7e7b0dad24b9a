/**
 * Kubernetes source benchmark (issue #8 §1, "a burst of 1,000 updates produces a handful
 * of reconciles"): the KubeSnapshotSource against the fake API server over HTTP with the
 * real client, a consumer that plans every read (planSnapshot, vipSource status — what
 * `passlb lb` does per read), and a burst of EndpointSlice updates.
 *
 * Two runs in the same process on the same cluster:
 *   - passlb: the default debounce (100 ms quiet, 1 s ceiling);
 *   - baseline: no debounce (quiet 0 ms, ceiling 0 ms) — a read per event-loop turn in
 *     which watch events arrived (events that arrive in one socket chunk still coalesce),
 *     as an event-driven consumer without a quiet period would do.
 * Reported: reads (reconciles), this process's CPU time from the first update until the
 * last update is in a read (process.cpuUsage, includes the fake server's share), the time
 * from the last update to the read holding it, and the load average.
 * Run: node --import tsx bench/kube-source.bench.ts [--services 250 --nodes 50 --updates 1000]
 * Addresses: nodes 198.51.100.0/24, VIPs 203.0.113.0/24 (documentation ranges, loopback API).
 */
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { KubeSnapshotSource } from "../src/cluster/kube-source.ts";
import { clientNodeTransport } from "../src/cluster/kube-transport.ts";
import type { SourceRead } from "../src/cluster/snapshot-source.ts";
import { realClock } from "../src/health/clock.ts";
import { DEFAULT_CONFIG } from "../src/k8s/snapshot.ts";
import { seededRandom } from "../src/net/seeded-random.ts";
import { createPlanCache, planSnapshot } from "../src/plan/planner.ts";
import { FakeApiServer } from "../test/support/fake-api-server.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SERVICES = Math.min(250, arg("services", 250));
const NODES = Math.min(250, arg("nodes", 50));
const UPDATES = arg("updates", 1000);

function slice(svc: number, generation: number, rand: () => number) {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: `svc-${svc}-1`,
      namespace: "bench",
      labels: { "kubernetes.io/service-name": `svc-${svc}`, "passlb.bench/generation": String(generation) },
    },
    addressType: "IPv4",
    ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    endpoints: Array.from({ length: 3 }, (_, e) => ({
      addresses: [`10.${svc % 250}.${e}.1`],
      nodeName: `node-${Math.floor(rand() * NODES)}`,
      conditions: { ready: rand() > 0.2, serving: true, terminating: false },
    })),
  };
}

async function cluster(): Promise<FakeApiServer> {
  const api = new FakeApiServer();
  await api.start();
  const rand = seededRandom(11);
  for (let i = 0; i < NODES; i++)
    api.put({
      apiVersion: "v1",
      kind: "Node",
      metadata: { name: `node-${i}`, labels: { "topology.kubernetes.io/zone": `zone-${i % 3}` } },
      status: {
        addresses: [{ type: "InternalIP", address: `198.51.100.${i + 1}` }],
        conditions: [{ type: "Ready", status: "True" }],
      },
    });
  for (let s = 0; s < SERVICES; s++) {
    api.put({
      apiVersion: "v1",
      kind: "Service",
      metadata: { name: `svc-${s}`, namespace: "bench" },
      spec: {
        type: "LoadBalancer",
        loadBalancerClass: "passlb.io/l4",
        externalTrafficPolicy: "Local",
        healthCheckNodePort: 31000,
        ports: [{ name: "http", port: 80, protocol: "TCP", targetPort: 8080, nodePort: 30000 + s }],
      },
      status: { loadBalancer: { ingress: [{ ip: `203.0.113.${s + 1}` }] } },
    });
    api.put(slice(s, 0, rand));
  }
  return api;
}

async function run(label: string, debounce: { quietMs: number; maxMs: number }) {
  const api = await cluster();
  const cache = createPlanCache();
  let reads = 0;
  let planMs = 0;
  let lastGeneration = "";
  let sawLast: (() => void) | undefined;
  const want = String(UPDATES);
  const source = new KubeSnapshotSource({
    transport: clientNodeTransport(api.kubeConfig("lb")),
    clock: realClock(),
    random: Math.random,
    config: DEFAULT_CONFIG,
    debounce,
  });
  await source.start({
    onChange: () => {},
    onRead: (read: SourceRead) => {
      if (!read.ok) return;
      reads++;
      const t0 = performance.now();
      planSnapshot(read.snapshot, { vipSource: "status" }, cache);
      planMs += performance.now() - t0;
      lastGeneration = "";
      for (const s of read.snapshot.endpointSlices) {
        const g = s.metadata.labels?.["passlb.bench/generation"];
        if (g === want) lastGeneration = g;
      }
      if (lastGeneration === want) sawLast?.();
    },
  });
  reads = 0;
  planMs = 0;
  const rand = seededRandom(5);
  const done = new Promise<void>((resolve) => {
    sawLast = resolve;
  });
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let tLast = t0;
  for (let u = 1; u <= UPDATES; u++) {
    api.put(slice(Math.floor(rand() * SERVICES), u, rand));
    if (u === UPDATES) tLast = performance.now();
    // a burst spread over about half a second, as a rolling update arrives: 50 updates, 25 ms pause
    if (u % 50 === 0) await new Promise((r) => setTimeout(r, 25));
  }
  await done;
  const converged = performance.now() - tLast;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  const wall = performance.now() - t0;
  await source.close();
  await api.close();
  console.log(
    `${label.padEnd(9)} reads ${String(reads).padStart(5)}  CPU ${cpuMs.toFixed(0).padStart(6)} ms (planning ${planMs.toFixed(0)} ms)  wall ${wall.toFixed(0)} ms  last update → read ${converged.toFixed(0)} ms`,
  );
  return { reads, cpuMs };
}

console.log(
  `kube source burst: ${SERVICES} Services, ${NODES} nodes, ${UPDATES} EndpointSlice updates; load average ${loadavg()
    .map((x) => x.toFixed(1))
    .join(" ")}`,
);
const base = await run("baseline", { quietMs: 0, maxMs: 0 });
const passlb = await run("passlb", { quietMs: 100, maxMs: 1000 });
console.log(
  `ratio passlb/baseline: reads ${(passlb.reads / base.reads).toFixed(3)}, CPU ${(passlb.cpuMs / base.cpuMs).toFixed(2)}; load average after ${loadavg()
    .map((x) => x.toFixed(1))
    .join(" ")}`,
);
