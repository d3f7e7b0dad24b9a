/**
 * The lab rewrite: how `passlb up --dataplane nftables` runs a folder of manifests in the
 * network-namespace lab (docs/lab.md). From a Snapshot it derives the lab's topology and
 * the Service/config manifests the lab runs against; the lab then generates its own Nodes,
 * Pods and EndpointSlices with its positional addresses (lab-layout.ts, lab-manifests.ts).
 * Deterministic and stateless, as the loopback rewrite (loopback-rewrite.ts) is:
 *
 *   what                      becomes
 *   zone (PasslbConfig zones   lab zone z, in config order, then zones seen only on
 *     in order, then Nodes')     Nodes; a client host `client-<zone>` per zone
 *   zone's clientCIDRs         the lab's 192.0.2.(64z)/26 and fd00:192:0:(z+1)::/64
 *   Node (zone label)          a node host in its zone (exclude-from-LB label kept);
 *                              no zone label: zone `nozone`
 *   Pod (nodeName, Running)    a pod host on its node running an echo server on its
 *                              containerPorts (else the numeric targetPorts of the
 *                              Services selecting it); Ready and deletionTimestamp kept
 *   VIP pools, loadBalancerIP  kept when inside the lab's free VIP space (203.0.113.1-63,
 *     status ingress             203.0.113.128-254, fd00::/8 outside the lab's own
 *                              fd00:192::/32, fd00:198::/32, fd00:203::/32); otherwise a
 *                              pool entry becomes 203.0.113.1-203.0.113.62 or
 *                              fd00:10::1-fd00:10::ff and a requested IP is dropped
 *   loadBalancerSourceRanges   a range covering a zone's original clientCIDR becomes
 *                              that zone's lab ranges; others are kept
 * Ports stay (the lab runs as root). Things the lab cannot show are notes with stable
 * codes (`lab_*`); limits the lab cannot hold (4 zones, 9 nodes a zone, 62 pods) are errors.
 * Not here: addresses of nodes and pods (lab-layout.ts), running anything.
 */
import type { Pod, Service } from "../k8s/objects.ts";
import { objectKey, type Snapshot } from "../k8s/snapshot.ts";
import type { Topology, TopologyPod } from "../lab/topology.ts";
import { cidrContains, cidrRange, type IpAddress, type IpRange, parseCidr, parseIp } from "../net/ip.ts";
import type { Finding } from "../plan/load-balancer-plan.ts";
import { EXCLUDE_LB_LABEL, LEGACY_ZONE_LABEL, ZONE_LABEL } from "../plan/node-facts.ts";

export const LAB_POOL_V4 = "203.0.113.1-203.0.113.62";
export const LAB_POOL_V6 = "fd00:10::1-fd00:10::ff";
export const NO_ZONE = "nozone";
const MAX_ZONES = 4;
const MAX_NODES_PER_ZONE = 9;
const MAX_PODS = 62;

export interface LabRewrite {
  /** `services` names the one file the caller writes `manifests` to: services.yaml */
  readonly topology: Topology;
  /** the rewritten Services, PasslbConfig and Namespaces, as manifests */
  readonly manifests: readonly object[];
  /** the rewritten Services (also in `manifests`) */
  readonly services: readonly Service[];
  /** lab zone → its client host */
  readonly clients: ReadonlyMap<string, string>;
  readonly notes: readonly Finding[];
  /** the lab cannot run this folder */
  readonly errors: readonly string[];
}

export interface LabRewriteOptions {
  /** the lab's name (1-8 lower-case letters or digits) */
  readonly name: string;
  /** a running lab's zones, in its order: they keep their positions (a live reload) */
  readonly zones?: readonly string[];
}

const HOST_NAME = /^[a-z0-9]([a-z0-9-]{0,30}[a-z0-9])?$/;

export function labRewrite(snapshot: Snapshot, options: LabRewriteOptions): LabRewrite {
  const notes: Finding[] = [];
  const errors: string[] = [];
  const note = (code: string, subject: string, message: string, severity: Finding["severity"] = "warning") =>
    notes.push({ code, severity, subject, message });

  // zones: a running lab's first, then the config's, then those only Nodes name
  const zoneOf = (labels: Record<string, string> | undefined) =>
    labels?.[ZONE_LABEL] ?? labels?.[LEGACY_ZONE_LABEL] ?? NO_ZONE;
  const zones: string[] = [];
  const addZone = (z: string) => {
    if (!zones.includes(z)) zones.push(z);
  };
  for (const z of options.zones ?? []) addZone(z);
  for (const z of snapshot.config.zones) addZone(z.name);
  for (const n of snapshot.nodes) addZone(zoneOf(n.metadata.labels ?? undefined));
  for (const z of zones)
    if (!HOST_NAME.test(z) || z.length > 24)
      errors.push(`zone ${z}: the lab needs short DNS-label zone names`);
  if (zones.length > MAX_ZONES) errors.push(`the lab has room for ${MAX_ZONES} zones, not ${zones.length}`);

  const hosts = new Set<string>(["lb"]);
  const clients = new Map<string, string>();
  for (const z of zones) {
    const c = `client-${z}`;
    clients.set(z, c);
    hosts.add(c);
  }

  const nodeNames = new Set<string>();
  const zoneNodes = new Map<string, Topology["zones"][number]["nodes"]>(zones.map((z) => [z, []]));
  for (const n of snapshot.nodes) {
    const name = n.metadata.name ?? "";
    if (!HOST_NAME.test(name) || hosts.has(name)) {
      errors.push(`Node ${name}: not usable as a lab host name (short DNS label, unique)`);
      continue;
    }
    const zone = zoneOf(n.metadata.labels ?? undefined);
    if (zone === NO_ZONE)
      note("lab_zone_assigned", `Node ${name}`, `no zone label: the lab puts it in zone ${NO_ZONE}`);
    hosts.add(name);
    nodeNames.add(name);
    zoneNodes.get(zone)?.push({
      name,
      excludeFromLoadBalancers: n.metadata.labels?.[EXCLUDE_LB_LABEL] !== undefined,
      pods: [],
    });
  }
  for (const [z, list] of zoneNodes)
    if (list.length > MAX_NODES_PER_ZONE)
      errors.push(`zone ${z}: the lab has room for ${MAX_NODES_PER_ZONE} nodes a zone, not ${list.length}`);

  let podCount = 0;
  const nodesByName = new Map([...zoneNodes.values()].flat().map((n) => [n.name, n]));
  for (const p of snapshot.pods) {
    const key = objectKey(p.metadata);
    const subject = `Pod ${key}`;
    const name = p.metadata.name ?? "";
    const node = p.spec.nodeName ?? "";
    const phase = p.status?.phase;
    if (phase === "Succeeded" || phase === "Failed") continue;
    if (!nodesByName.has(node)) {
      note("lab_pod_skipped", subject, `runs on ${node || "no node"}, which is not a lab node`);
      continue;
    }
    if (!HOST_NAME.test(name) || hosts.has(name)) {
      note("lab_pod_skipped", subject, "its name is not usable as a lab host name (short DNS label, unique)");
      continue;
    }
    const ports = podPorts(p, snapshot.services);
    if (ports.length === 0) {
      note("lab_pod_skipped", subject, "no TCP or UDP port to serve (containerPorts or numeric targetPorts)");
      continue;
    }
    hosts.add(name);
    podCount++;
    const ready = (p.status?.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
    const pod: TopologyPod = {
      name,
      namespace: p.metadata.namespace ?? "default",
      labels: { ...(p.metadata.labels ?? {}) },
      ports,
      ready,
      terminating: p.metadata.deletionTimestamp != null,
    };
    nodesByName.get(node)!.pods.push(pod);
  }
  if (podCount > MAX_PODS) errors.push(`the lab has room for ${MAX_PODS} pods, not ${podCount}`);

  // addresses: config and Services
  const labClientCidrs = (z: string) => {
    const i = zones.indexOf(z);
    return { IPv4: `192.0.2.${64 * i}/26`, IPv6: `fd00:192:0:${i + 1}::/64` };
  };
  const originalZones = snapshot.config.zones.map((z) => ({
    name: z.name,
    cidrs: z.clientCIDRs.map((c) => parseCidr(c, true)).filter((c) => c !== undefined),
  }));
  const config = {
    ...snapshot.config,
    pools: snapshot.config.pools.map((pool) => {
      const addresses: string[] = [];
      for (const a of pool.addresses) {
        const range = poolRange(a);
        const keep = range !== undefined && vipSafe(range);
        const next = keep ? a : range?.family === "IPv6" || a.includes(":") ? LAB_POOL_V6 : LAB_POOL_V4;
        if (!keep)
          note(
            "lab_pool_rewritten",
            `pool ${pool.name}`,
            `${a} is not free lab VIP space: ${next} instead`,
            "info",
          );
        if (!addresses.includes(next)) addresses.push(next);
      }
      return { ...pool, addresses };
    }),
    zones: snapshot.config.zones.map((z) => ({
      ...z,
      clientCIDRs: Object.values(labClientCidrs(z.name)),
    })),
  };
  const safeIp = (text: string) => {
    const ip = parseIp(text);
    return ip !== undefined && vipSafe({ family: ip.family, first: ip.value, last: ip.value });
  };
  const services = snapshot.services.map((s): Service => {
    const subject = `Service ${objectKey(s.metadata)}`;
    const spec = { ...s.spec };
    if (spec.loadBalancerIP && !safeIp(spec.loadBalancerIP)) {
      note(
        "lab_vip_dropped",
        subject,
        `loadBalancerIP ${spec.loadBalancerIP} is not free lab VIP space; the pool assigns one`,
      );
      delete spec.loadBalancerIP;
    }
    if (spec.loadBalancerSourceRanges)
      spec.loadBalancerSourceRanges = [
        ...new Set(
          spec.loadBalancerSourceRanges.flatMap((text) => {
            const range = parseCidr(text, true);
            if (!range) return [text];
            const covered = originalZones.filter((z) =>
              z.cidrs.some(
                (c) => c.family === range.family && c.prefix >= range.prefix && cidrContains(range, ipOf(c)),
              ),
            );
            return covered.length === 0 ? [text] : covered.map((z) => labClientCidrs(z.name)[range.family]);
          }),
        ),
      ];
    const ingress = s.status?.loadBalancer?.ingress;
    const status = ingress
      ? {
          ...s.status,
          loadBalancer: { ...s.status?.loadBalancer, ingress: ingress.filter((i) => !i.ip || safeIp(i.ip)) },
        }
      : s.status;
    return { ...s, spec, ...(status ? { status } : {}) };
  });
  const manifests: object[] = [
    ...snapshot.namespaces,
    { apiVersion: "passlb.io/v1alpha1", kind: "PasslbConfig", metadata: { name: "default" }, spec: config },
    ...services,
  ];
  const topology: Topology = {
    name: options.name,
    services: ["services.yaml"],
    namespace: "default",
    lb: { name: "lb" },
    zones: zones.map((z) => ({ name: z, clients: [clients.get(z)!], nodes: zoneNodes.get(z) ?? [] })),
  };
  return { topology, manifests, services, clients, notes, errors };
}

function ipOf(c: { family: IpAddress["family"]; base: bigint }): IpAddress {
  return { family: c.family, value: c.base };
}

/** containerPorts, else the numeric targetPorts of the Services selecting the pod */
function podPorts(pod: Pod, services: readonly Service[]): TopologyPod["ports"] {
  const out: TopologyPod["ports"][number][] = [];
  const add = (port: number, protocol: string, name?: string) => {
    if (protocol !== "TCP" && protocol !== "UDP") return;
    if (out.some((p) => p.port === port && p.protocol === protocol)) return;
    out.push({ ...(name ? { name } : {}), port, protocol });
  };
  for (const c of pod.spec.containers)
    for (const cp of c.ports ?? []) add(cp.containerPort, cp.protocol ?? "TCP", cp.name);
  if (out.length > 0) return out;
  const labels = pod.metadata.labels ?? {};
  for (const s of services) {
    const sel = s.spec.selector;
    if ((s.metadata.namespace ?? "default") !== (pod.metadata.namespace ?? "default")) continue;
    if (!sel || Object.keys(sel).length === 0 || !Object.entries(sel).every(([k, v]) => labels[k] === v))
      continue;
    for (const sp of s.spec.ports) {
      const target = sp.targetPort ?? sp.port;
      if (typeof target === "number") add(target, sp.protocol ?? "TCP");
    }
  }
  return out;
}

function poolRange(text: string): IpRange | undefined {
  if (text.includes("/")) {
    const c = parseCidr(text, true);
    return c ? cidrRange(c) : undefined;
  }
  const [a, b] = text.split("-").map((x) => x.trim());
  const first = a ? parseIp(a) : undefined;
  const last = b ? parseIp(b) : first;
  if (!first || !last || first.family !== last.family) return undefined;
  return { family: first.family, first: first.value, last: last.value };
}

const v4 = (text: string) => parseIp(text)!.value;
const v6cidr = (text: string) => cidrRange(parseCidr(text)!);
/** where VIPs may live in the lab: documentation/ULA space no lab host uses */
const FREE_V4: readonly (readonly [bigint, bigint])[] = [
  [v4("203.0.113.1"), v4("203.0.113.63")],
  [v4("203.0.113.128"), v4("203.0.113.254")],
];
const ULA = v6cidr("fd00::/8");
const LAB_V6: readonly IpRange[] = ["fd00:192::/32", "fd00:198::/32", "fd00:203::/32"].map(v6cidr);

function vipSafe(r: IpRange): boolean {
  if (r.first > r.last) return false;
  if (r.family === "IPv4") return FREE_V4.some(([lo, hi]) => r.first >= lo && r.last <= hi);
  if (r.first < ULA.first || r.last > ULA.last) return false;
  return !LAB_V6.some((l) => r.first <= l.last && r.last >= l.first);
}
