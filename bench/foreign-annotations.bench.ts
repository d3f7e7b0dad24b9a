/**
 * Foreign-annotation benchmark (issue #15): the controller's decision pass
 * (controllerWrites: ownership, request reading, IPAM, per-Service diff, pool status) over a
 * settled cluster of N Services carrying other tools' annotations — MetalLB (current and
 * deprecated prefix, with the `ip-allocated-from-pool` output MetalLB writes on every
 * Service), Cilium, kube-vip, PureLB, OpenELB — against the same pass over the same cluster
 * written with passlb's own annotations (the baseline), measured in the same process,
 * rounds interleaved so that load from other processes falls on both alike.
 * Reported: ms per pass for both, the ratio (wall and process CPU), the load average.
 * Run: node --import tsx bench/foreign-annotations.bench.ts [--services 10000 --rounds 10]
 * Addresses: fd00::/8 (ULA) only; no traffic.
 */
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { controllerWrites } from "../src/controller/controller-writes.ts";
import { applyServiceWrite } from "../src/controller/service-writes.ts";
import type { LoadBalancerIPPool } from "../src/k8s/load-balancer-ip-pool.ts";
import type { Service } from "../src/k8s/objects.ts";
import { objectKey } from "../src/k8s/snapshot.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SERVICES = arg("services", 10_000);
const ROUNDS = arg("rounds", 10);
const OPTIONS = { defaultClass: true, ipMode: "VIP" as const };

const pool = (name: string, cidr: string, created: string): LoadBalancerIPPool => ({
  apiVersion: "passlb.io/v1alpha1",
  kind: "LoadBalancerIPPool",
  metadata: { name, creationTimestamp: created, resourceVersion: "1" },
  spec: { addresses: [cidr], autoAssign: true, avoidBuggyIPs: false, disabled: false },
});
const pools = [
  pool("main", "fd00:10::/112", "2026-01-01T00:00:00Z"),
  pool("extra", "fd00:20::/112", "2026-01-01T00:00:01Z"),
];

const pinned = (i: number) => `fd00:10::${(0x8000 + i).toString(16)}`;

/** The same request, in passlb's words and in another tool's. */
function annotations(i: number, foreign: boolean): Record<string, string> {
  switch (i % 10) {
    case 0:
      return foreign
        ? { "metallb.io/allow-shared-ip": `k${i % 40}` }
        : { "passlb.io/allow-shared-ip": `k${i % 40}` };
    case 1:
      return foreign
        ? { "metallb.io/loadBalancerIPs": pinned(i), "metallb.io/ip-allocated-from-pool": "main" }
        : { "passlb.io/load-balancer-ips": pinned(i) };
    case 2:
      return foreign
        ? {
            "metallb.universe.tf/address-pool": "extra",
            "metallb.universe.tf/ip-allocated-from-pool": "extra",
          }
        : { "passlb.io/address-pool": "extra" };
    case 3:
      return foreign ? { "lbipam.cilium.io/ips": pinned(i) } : { "passlb.io/load-balancer-ips": pinned(i) };
    case 4:
      return foreign
        ? { "kube-vip.io/loadbalancerIPs": pinned(i), "kube-vip.io/vipHost": "node-1" }
        : { "passlb.io/load-balancer-ips": pinned(i) };
    case 5:
      return foreign
        ? { "purelb.io/service-group": "extra", "purelb.io/allocated-by": "PureLB" }
        : { "passlb.io/address-pool": "extra" };
    case 6:
      return foreign
        ? { "lb.kubesphere.io/v1alpha1": "openelb", "eip.openelb.kubesphere.io/v1alpha2": "main" }
        : { "passlb.io/address-pool": "main" };
    case 7:
      return foreign
        ? { "lbipam.cilium.io/sharing-key": `c${i % 40}` }
        : { "passlb.io/allow-shared-ip": `c${i % 40}` };
    default:
      return foreign ? { "metallb.io/ip-allocated-from-pool": "main" } : {};
  }
}

function cluster(foreign: boolean): Service[] {
  const services: Service[] = Array.from({ length: SERVICES }, (_, i) => ({
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: `svc-${i}`,
      namespace: `ns-${i % 50}`,
      resourceVersion: "1",
      creationTimestamp: "2026-01-01T00:00:00Z",
      annotations: { "app.kubernetes.io/managed-by": "helm", ...annotations(i, foreign) },
    },
    spec: {
      type: "LoadBalancer",
      selector: { app: `a${i}` },
      ports: [{ port: 1000 + (i % 60000), protocol: "TCP" }],
      ipFamilies: ["IPv6"],
    },
  }));
  // settle: apply one pass's writes so the measured passes decide over a cluster in place
  const first = controllerWrites({ services, pools, options: OPTIONS, nowMs: 0 });
  const byKey = new Map(first.services.map((w) => [w.key, w]));
  return services.map((s) => {
    let o = s;
    for (const w of byKey.get(objectKey(s.metadata))?.writes ?? []) o = applyServiceWrite(o, w, 0) ?? o;
    return o;
  });
}

const own = cluster(false);
const foreign = cluster(true);
const addressed = (list: Service[]) =>
  list.filter((s) => (s.status?.loadBalancer?.ingress ?? []).length > 0).length;

const pass = (services: Service[]) => controllerWrites({ services, pools, options: OPTIONS, nowMs: 1000 });
pass(own);
pass(foreign); // warm-up
const totals = { own: { ms: 0, cpu: 0 }, foreign: { ms: 0, cpu: 0 } };
let writes = { own: 0, foreign: 0 };
for (let r = 0; r < ROUNDS; r++)
  for (const which of ["own", "foreign"] as const) {
    const cpu = process.cpuUsage();
    const t0 = performance.now();
    const w = pass(which === "own" ? own : foreign);
    totals[which].ms += performance.now() - t0;
    const used = process.cpuUsage(cpu);
    totals[which].cpu += (used.user + used.system) / 1000;
    writes = { ...writes, [which]: w.services.length };
  }
const per = (x: { ms: number; cpu: number }) => ({ ms: x.ms / ROUNDS, cpu: x.cpu / ROUNDS });
const a = per(totals.own);
const b = per(totals.foreign);
const [l1, l5] = loadavg();
console.log(
  `services ${SERVICES}, rounds ${ROUNDS} (interleaved); addressed: own ${addressed(own)}, foreign ${addressed(foreign)}; writes in a settled pass: own ${writes.own}, foreign ${writes.foreign}`,
);
console.log(`baseline (passlb's own annotations): ${a.ms.toFixed(1)} ms/pass, CPU ${a.cpu.toFixed(1)} ms`);
console.log(`foreign annotations:                 ${b.ms.toFixed(1)} ms/pass, CPU ${b.cpu.toFixed(1)} ms`);
console.log(`ratio foreign/own: ${(b.ms / a.ms).toFixed(2)} (CPU ${(b.cpu / a.cpu).toFixed(2)}); bound 1.20`);
console.log(`load average ${l1?.toFixed(2)} ${l5?.toFixed(2)}`);
