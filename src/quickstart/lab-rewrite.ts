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
import { cidrContains, type IpAddress, parseCidr } from "../net/ip.ts";
import type { Finding } from "../plan/load-balancer-plan.ts";
import { EXCLUDE_LB_LABEL, LEGACY_ZONE_LABEL, ZONE_LABEL } from "../plan/node-facts.ts";
import { poolRange, safeIp, vipSafe } from "./lab-vip-space.ts";

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

/** What the steps of labRewrite append to, and the host names taken so far. */
interface Walk {
  readonly snapshot: Snapshot;
  readonly notes: Finding[];
  readonly errors: string[];
  readonly hosts: Set<string>;
  readonly note: (code: string, subject: string, message: string, severity?: Finding["severity"]) => void;
}

const zoneOf = (labels: Record<string, string> | undefined) =>
  labels?.[ZONE_LABEL] ?? labels?.[LEGACY_ZONE_LABEL] ?? NO_ZONE;

/** In steps: zones → client hosts → node hosts → pod hosts → config → Services → assemble. */
export function labRewrite(snapshot: Snapshot, options: LabRewriteOptions): LabRewrite {
  const notes: Finding[] = [];
  const w: Walk = {
    snapshot,
    notes,
    errors: [],
    hosts: new Set<string>(["lb"]),
    note: (code, subject, message, severity = "warning") => notes.push({ code, severity, subject, message }),
  };
  const zones = labZones(w, options);
  const clients = new Map<string, string>();
  for (const z of zones) {
    const c = `client-${z}`;
    clients.set(z, c);
    w.hosts.add(c);
  }
  const zoneNodes = labNodes(w, zones);
  labPods(w, zoneNodes);
  const labClientCidrs = (z: string) => {
    const i = zones.indexOf(z);
    return { IPv4: `192.0.2.${64 * i}/26`, IPv6: `fd00:192:0:${i + 1}::/64` };
  };
  const config = labConfig(w, labClientCidrs);
  const services = snapshot.services.map((s) => labService(w, s, labClientCidrs));
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
  return { topology, manifests, services, clients, notes, errors: w.errors };
}

/** A running lab's zones first, then the config's, then those only Nodes name. */
function labZones(w: Walk, options: LabRewriteOptions): string[] {
  const zones: string[] = [];
  const addZone = (z: string) => {
    if (!zones.includes(z)) zones.push(z);
  };
  for (const z of options.zones ?? []) addZone(z);
  for (const z of w.snapshot.config.zones) addZone(z.name);
  for (const n of w.snapshot.nodes) addZone(zoneOf(n.metadata.labels ?? undefined));
  for (const z of zones)
    if (!HOST_NAME.test(z) || z.length > 24)
      w.errors.push(`zone ${z}: the lab needs short DNS-label zone names`);
  if (zones.length > MAX_ZONES) w.errors.push(`the lab has room for ${MAX_ZONES} zones, not ${zones.length}`);
  return zones;
}

type ZoneNodes = Map<string, Topology["zones"][number]["nodes"]>;

/** A node host per Node, in its zone. */
function labNodes(w: Walk, zones: readonly string[]): ZoneNodes {
  const zoneNodes: ZoneNodes = new Map(zones.map((z) => [z, []]));
  for (const n of w.snapshot.nodes) {
    const name = n.metadata.name ?? "";
    if (!HOST_NAME.test(name) || w.hosts.has(name)) {
      w.errors.push(`Node ${name}: not usable as a lab host name (short DNS label, unique)`);
      continue;
    }
    const zone = zoneOf(n.metadata.labels ?? undefined);
    if (zone === NO_ZONE)
      w.note("lab_zone_assigned", `Node ${name}`, `no zone label: the lab puts it in zone ${NO_ZONE}`);
    w.hosts.add(name);
    zoneNodes.get(zone)?.push({
      name,
      excludeFromLoadBalancers: n.metadata.labels?.[EXCLUDE_LB_LABEL] !== undefined,
      pods: [],
    });
  }
  for (const [z, list] of zoneNodes)
    if (list.length > MAX_NODES_PER_ZONE)
      w.errors.push(`zone ${z}: the lab has room for ${MAX_NODES_PER_ZONE} nodes a zone, not ${list.length}`);
  return zoneNodes;
}

/** A pod host per running Pod on a lab node that has a port to serve, added to its node. */
function labPods(w: Walk, zoneNodes: ZoneNodes): void {
  let podCount = 0;
  const nodesByName = new Map([...zoneNodes.values()].flat().map((n) => [n.name, n]));
  for (const p of w.snapshot.pods) {
    const subject = `Pod ${objectKey(p.metadata)}`;
    const name = p.metadata.name ?? "";
    const node = p.spec.nodeName ?? "";
    const phase = p.status?.phase;
    if (phase === "Succeeded" || phase === "Failed") continue;
    if (!nodesByName.has(node)) {
      w.note("lab_pod_skipped", subject, `runs on ${node || "no node"}, which is not a lab node`);
      continue;
    }
    if (!HOST_NAME.test(name) || w.hosts.has(name)) {
      w.note(
        "lab_pod_skipped",
        subject,
        "its name is not usable as a lab host name (short DNS label, unique)",
      );
      continue;
    }
    const ports = podPorts(p, w.snapshot.services);
    if (ports.length === 0) {
      w.note(
        "lab_pod_skipped",
        subject,
        "no TCP or UDP port to serve (containerPorts or numeric targetPorts)",
      );
      continue;
    }
    w.hosts.add(name);
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
  if (podCount > MAX_PODS) w.errors.push(`the lab has room for ${MAX_PODS} pods, not ${podCount}`);
}

type LabClientCidrs = (zone: string) => { IPv4: string; IPv6: string };

/** Pools kept when in free lab VIP space, else the lab's pool; zones get the lab's client ranges. */
function labConfig(w: Walk, labClientCidrs: LabClientCidrs): Snapshot["config"] {
  const config = w.snapshot.config;
  return {
    ...config,
    pools: config.pools.map((pool) => {
      const addresses: string[] = [];
      for (const a of pool.addresses) {
        const range = poolRange(a);
        const keep = range !== undefined && vipSafe(range);
        const next = keep ? a : range?.family === "IPv6" || a.includes(":") ? LAB_POOL_V6 : LAB_POOL_V4;
        if (!keep)
          w.note(
            "lab_pool_rewritten",
            `pool ${pool.name}`,
            `${a} is not free lab VIP space: ${next} instead`,
            "info",
          );
        if (!addresses.includes(next)) addresses.push(next);
      }
      return { ...pool, addresses };
    }),
    zones: config.zones.map((z) => ({ ...z, clientCIDRs: Object.values(labClientCidrs(z.name)) })),
  };
}

/** loadBalancerIP and status VIPs outside free lab space dropped; source ranges mapped to lab zones. */
function labService(w: Walk, s: Service, labClientCidrs: LabClientCidrs): Service {
  const subject = `Service ${objectKey(s.metadata)}`;
  const spec = { ...s.spec };
  if (spec.loadBalancerIP && !safeIp(spec.loadBalancerIP)) {
    w.note(
      "lab_vip_dropped",
      subject,
      `loadBalancerIP ${spec.loadBalancerIP} is not free lab VIP space; the pool assigns one`,
    );
    delete spec.loadBalancerIP;
  }
  if (spec.loadBalancerSourceRanges) {
    const originalZones = w.snapshot.config.zones.map((z) => ({
      name: z.name,
      cidrs: z.clientCIDRs.map((c) => parseCidr(c, true)).filter((c) => c !== undefined),
    }));
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
  }
  const ingress = s.status?.loadBalancer?.ingress;
  const status = ingress
    ? {
        ...s.status,
        loadBalancer: { ...s.status?.loadBalancer, ingress: ingress.filter((i) => !i.ip || safeIp(i.ip)) },
      }
    : s.status;
  return { ...s, spec, ...(status ? { status } : {}) };
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
