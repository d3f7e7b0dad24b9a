/**
 * The loopback rewrite: how `passlb up` runs a folder of manifests written for real
 * addresses (the network-namespace lab uses the same folder) on one machine, without root,
 * binding only 127.0.0.0/8. Deterministic and stateless, so a live reload maps every
 * address the same way again:
 *
 *   role                         IPv4 a.b.c.d becomes   example (examples/quickstart)
 *   VIPs (pools, loadBalancerIP,  127.0.1.d             203.0.113.1    → 127.0.1.1
 *         status ingress)
 *   node addresses               127.0.2.d             198.51.100.11  → 127.0.2.11
 *   pod and endpoint addresses   127.0.3.d             203.0.113.65   → 127.0.3.65
 *   client ranges (zones'        127.0.4.d/p           192.0.2.64/26  → 127.0.4.64/26
 *     clientCIDRs, loadBalancerSourceRanges)
 *
 * A CIDR with a prefix shorter than /24 becomes the whole 127.0.R.0/24; a pool range that
 * leaves its /24 becomes 127.0.1.1-127.0.1.254. Two addresses of one role that share a
 * last octet would collide: reported as `loopback_address_collision`.
 * Ports below 1024 (Service ports, target ports, container and endpoint ports) move up by
 * 8000 (80 → 8080, 53 → 8053), since binding them needs privileges. IPv6 addresses are
 * dropped (loopback has one: ::1) and Services become IPv4 single-stack.
 * Pure: a Snapshot in, a Snapshot and notes out.
 */
import type { EndpointSlice, Node, Pod, Service } from "../k8s/objects.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { parseCidr, parseIp } from "../net/ip.ts";

export const LOOPBACK_ROLES = { vip: 1, node: 2, pod: 3, client: 4 } as const;
export type LoopbackRole = keyof typeof LOOPBACK_ROLES;

export const PRIVILEGED_PORT_SHIFT = 8000;

export interface RewriteNote {
  readonly code: "loopback_address_collision" | "loopback_ipv6_dropped" | "loopback_port_shifted";
  readonly severity: "warning" | "info";
  readonly subject: string;
  readonly message: string;
}

export function loopbackAddress(address: string, role: LoopbackRole): string | undefined {
  const ip = parseIp(address);
  if (ip?.family !== "IPv4") return undefined;
  return `127.0.${LOOPBACK_ROLES[role]}.${Number(ip.value & 0xffn)}`;
}

export function loopbackCidr(text: string, role: LoopbackRole): string | undefined {
  const c = parseCidr(text, true);
  if (c?.family !== "IPv4") return undefined;
  if (c.prefix < 24) return `127.0.${LOOPBACK_ROLES[role]}.0/24`;
  return `127.0.${LOOPBACK_ROLES[role]}.${Number(c.base & 0xffn)}/${c.prefix}`;
}

export function loopbackPort(port: number): number {
  return port < 1024 ? port + PRIVILEGED_PORT_SHIFT : port;
}

function loopbackPool(text: string): string | undefined {
  if (text.includes("/")) return loopbackCidr(text, "vip");
  const [a, b] = text.split("-").map((s) => s.trim());
  if (a === undefined || b === undefined) return undefined;
  const pa = parseIp(a);
  const pb = parseIp(b);
  if (!pa || !pb || pa.family !== "IPv4" || pb.family !== "IPv4") return undefined;
  if (pa.value >> 8n !== pb.value >> 8n) return "127.0.1.1-127.0.1.254";
  return `${loopbackAddress(a, "vip")}-${loopbackAddress(b, "vip")}`;
}

const defined = <T>(x: T | undefined): x is T => x !== undefined;

/** What the per-kind rewrites share: the notes, the addresses claimed so far, whether IPv6 was dropped. */
class Rewrite {
  readonly notes: RewriteNote[] = [];
  droppedV6 = false;
  private readonly seen = new Map<string, string>();

  /** a node or pod address: two originals on one loopback address are a collision */
  claim(loop: string | undefined, original: string, subject: string): string | undefined {
    if (loop === undefined) return undefined;
    const prior = this.seen.get(loop);
    if (prior !== undefined && prior !== original)
      this.notes.push({
        code: "loopback_address_collision",
        severity: "warning",
        subject,
        message: `${original} and ${prior} both map to ${loop}`,
      });
    else this.seen.set(loop, original);
    return loop;
  }

  /** whether an address is IPv4 (kept); an IPv6 one is dropped and remembered */
  v4(a: string): boolean {
    const ok = parseIp(a)?.family === "IPv4";
    if (!ok) this.droppedV6 = true;
    return ok;
  }

  /** a Service port, shifted when privileged, with a note */
  port(p: number, subject: string): number {
    const q = loopbackPort(p);
    if (q !== p)
      this.notes.push({
        code: "loopback_port_shifted",
        severity: "info",
        subject,
        message: `port ${p} is served on ${q}`,
      });
    return q;
  }
}

/** In steps, one per kind: config → Services → Nodes → Pods → EndpointSlices → Endpoints. */
export function loopbackSnapshot(snapshot: Snapshot): { snapshot: Snapshot; notes: RewriteNote[] } {
  const r = new Rewrite();
  const config = loopbackConfig(snapshot.config);
  const services = snapshot.services.map((s) => loopbackService(r, s));
  const nodes = snapshot.nodes.map((n) => loopbackNode(r, n));
  const pods = snapshot.pods.map((p) => loopbackPod(r, p));
  const endpointSlices = snapshot.endpointSlices
    .filter((s) => {
      if (s.addressType === "IPv6") r.droppedV6 = true;
      return s.addressType !== "IPv6";
    })
    .map(loopbackSlice);
  // the note is decided before the legacy Endpoints are read, as it always was
  if (r.droppedV6)
    r.notes.push({
      code: "loopback_ipv6_dropped",
      severity: "info",
      subject: "loopback",
      message: "IPv6 addresses are dropped on loopback; dual-stack Services run IPv4 only",
    });
  const endpoints = snapshot.endpoints.map((e) => loopbackEndpoints(r, e));
  return {
    snapshot: { ...snapshot, config, services, nodes, pods, endpointSlices, endpoints },
    notes: r.notes,
  };
}

function loopbackConfig(config: Snapshot["config"]): Snapshot["config"] {
  return {
    ...config,
    pools: config.pools.map((p) => ({
      ...p,
      addresses: p.addresses
        .filter((a) => !a.includes(":"))
        .map(loopbackPool)
        .filter(defined),
    })),
    zones: config.zones.map((z) => ({
      ...z,
      clientCIDRs: z.clientCIDRs.map((c) => loopbackCidr(c, "client")).filter(defined),
    })),
  };
}

function loopbackService(r: Rewrite, s: Service): Service {
  const subject = `Service ${objectKey(s.metadata)}`;
  const spec = { ...s.spec };
  if (spec.type === "LoadBalancer" || spec.type === "NodePort") {
    spec.ports = spec.ports.map((p) => ({
      ...p,
      port: spec.type === "LoadBalancer" ? r.port(p.port, subject) : p.port,
      ...(typeof p.targetPort === "number" ? { targetPort: loopbackPort(p.targetPort) } : {}),
    }));
  }
  if (spec.ipFamilies) spec.ipFamilies = spec.ipFamilies.filter((f) => f === "IPv4");
  if (spec.ipFamilyPolicy && spec.ipFamilyPolicy !== "SingleStack") {
    spec.ipFamilyPolicy = "SingleStack";
    r.droppedV6 = true;
  }
  if (spec.loadBalancerIP) spec.loadBalancerIP = loopbackAddress(spec.loadBalancerIP, "vip") ?? "";
  if (spec.loadBalancerSourceRanges)
    spec.loadBalancerSourceRanges = spec.loadBalancerSourceRanges
      .map((c) => loopbackCidr(c, "client"))
      .filter(defined);
  const ingress = s.status?.loadBalancer?.ingress;
  const status = ingress
    ? {
        ...s.status,
        loadBalancer: {
          ...s.status?.loadBalancer,
          ingress: ingress
            .filter((i) => i.ip === undefined || r.v4(i.ip))
            .map((i) => (i.ip ? { ...i, ip: loopbackAddress(i.ip, "vip")! } : i)),
        },
      }
    : s.status;
  return { ...s, spec, ...(status ? { status } : {}) };
}

function loopbackNode(r: Rewrite, n: Node): Node {
  const addresses = n.status?.addresses;
  if (!addresses) return n;
  const subject = `Node ${n.metadata.name ?? ""}`;
  return {
    ...n,
    status: {
      ...n.status,
      addresses: addresses
        .filter((a) => (a.type === "InternalIP" || a.type === "ExternalIP" ? r.v4(a.address) : true))
        .map((a) =>
          a.type === "InternalIP" || a.type === "ExternalIP"
            ? { ...a, address: r.claim(loopbackAddress(a.address, "node"), a.address, subject)! }
            : a,
        ),
    },
  };
}

function loopbackPod(r: Rewrite, p: Pod): Pod {
  const st = p.status;
  const subject = `Pod ${objectKey(p.metadata)}`;
  const spec = {
    ...p.spec,
    containers: p.spec.containers.map((c) => ({
      ...c,
      ...(c.ports
        ? { ports: c.ports.map((cp) => ({ ...cp, containerPort: loopbackPort(cp.containerPort) })) }
        : {}),
    })),
  };
  if (!st) return { ...p, spec };
  const podIP =
    st.podIP && r.v4(st.podIP) ? r.claim(loopbackAddress(st.podIP, "pod"), st.podIP, subject) : undefined;
  const podIPs = st.podIPs
    ?.filter((i) => r.v4(i.ip))
    .map((i) => ({ ...i, ip: loopbackAddress(i.ip, "pod")! }));
  const status = { ...st, ...(podIP ? { podIP } : {}), ...(podIPs ? { podIPs } : {}) };
  if (!podIP) delete status.podIP;
  return { ...p, spec, status };
}

function loopbackSlice(s: EndpointSlice): EndpointSlice {
  return {
    ...s,
    ...(s.ports
      ? { ports: s.ports.map((p) => (typeof p.port === "number" ? { ...p, port: loopbackPort(p.port) } : p)) }
      : {}),
    ...(s.endpoints
      ? {
          endpoints: s.endpoints.map((e) => ({
            ...e,
            addresses: e.addresses.map((a) => loopbackAddress(a, "pod")).filter(defined),
          })),
        }
      : {}),
  };
}

function loopbackEndpoints(r: Rewrite, e: Snapshot["endpoints"][number]): Snapshot["endpoints"][number] {
  const addresses = <A extends { ip: string }>(list: readonly A[]): A[] =>
    list.filter((a) => r.v4(a.ip)).map((a) => ({ ...a, ip: loopbackAddress(a.ip, "pod")! }));
  return {
    ...e,
    ...(e.subsets
      ? {
          subsets: e.subsets.map((sub) => ({
            ...sub,
            ...(sub.addresses ? { addresses: addresses(sub.addresses) } : {}),
            ...(sub.notReadyAddresses ? { notReadyAddresses: addresses(sub.notReadyAddresses) } : {}),
          })),
        }
      : {}),
  };
}
