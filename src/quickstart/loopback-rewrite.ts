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

export function loopbackSnapshot(snapshot: Snapshot): { snapshot: Snapshot; notes: RewriteNote[] } {
  const notes: RewriteNote[] = [];
  const seen = new Map<string, string>();
  const claim = (loop: string | undefined, original: string, subject: string): string | undefined => {
    if (loop === undefined) return undefined;
    const prior = seen.get(loop);
    if (prior !== undefined && prior !== original)
      notes.push({
        code: "loopback_address_collision",
        severity: "warning",
        subject,
        message: `${original} and ${prior} both map to ${loop}`,
      });
    else seen.set(loop, original);
    return loop;
  };
  let droppedV6 = false;
  const v4 = (a: string) => {
    const ok = parseIp(a)?.family === "IPv4";
    if (!ok) droppedV6 = true;
    return ok;
  };
  const port = (p: number, subject: string): number => {
    const q = loopbackPort(p);
    if (q !== p)
      notes.push({
        code: "loopback_port_shifted",
        severity: "info",
        subject,
        message: `port ${p} is served on ${q}`,
      });
    return q;
  };

  const config = {
    ...snapshot.config,
    pools: snapshot.config.pools.map((p) => ({
      ...p,
      addresses: p.addresses
        .filter((a) => !a.includes(":"))
        .map(loopbackPool)
        .filter(defined),
    })),
    zones: snapshot.config.zones.map((z) => ({
      ...z,
      clientCIDRs: z.clientCIDRs.map((c) => loopbackCidr(c, "client")).filter(defined),
    })),
  };

  const services = snapshot.services.map((s): Service => {
    const subject = `Service ${objectKey(s.metadata)}`;
    const spec = { ...s.spec };
    if (spec.type === "LoadBalancer" || spec.type === "NodePort") {
      spec.ports = spec.ports.map((p) => ({
        ...p,
        port: spec.type === "LoadBalancer" ? port(p.port, subject) : p.port,
        ...(typeof p.targetPort === "number" ? { targetPort: loopbackPort(p.targetPort) } : {}),
      }));
    }
    if (spec.ipFamilies) spec.ipFamilies = spec.ipFamilies.filter((f) => f === "IPv4");
    if (spec.ipFamilyPolicy && spec.ipFamilyPolicy !== "SingleStack") {
      spec.ipFamilyPolicy = "SingleStack";
      droppedV6 = true;
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
              .filter((i) => i.ip === undefined || v4(i.ip))
              .map((i) => (i.ip ? { ...i, ip: loopbackAddress(i.ip, "vip")! } : i)),
          },
        }
      : s.status;
    return { ...s, spec, ...(status ? { status } : {}) };
  });

  const nodes = snapshot.nodes.map((n): Node => {
    const addresses = n.status?.addresses;
    if (!addresses) return n;
    const subject = `Node ${n.metadata.name ?? ""}`;
    return {
      ...n,
      status: {
        ...n.status,
        addresses: addresses
          .filter((a) => (a.type === "InternalIP" || a.type === "ExternalIP" ? v4(a.address) : true))
          .map((a) =>
            a.type === "InternalIP" || a.type === "ExternalIP"
              ? { ...a, address: claim(loopbackAddress(a.address, "node"), a.address, subject)! }
              : a,
          ),
      },
    };
  });

  const pods = snapshot.pods.map((p): Pod => {
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
      st.podIP && v4(st.podIP) ? claim(loopbackAddress(st.podIP, "pod"), st.podIP, subject) : undefined;
    const podIPs = st.podIPs
      ?.filter((i) => v4(i.ip))
      .map((i) => ({ ...i, ip: loopbackAddress(i.ip, "pod")! }));
    const status = { ...st, ...(podIP ? { podIP } : {}), ...(podIPs ? { podIPs } : {}) };
    if (!podIP) delete status.podIP;
    return { ...p, spec, status };
  });

  const endpointSlices = snapshot.endpointSlices
    .filter((s) => {
      if (s.addressType === "IPv6") droppedV6 = true;
      return s.addressType !== "IPv6";
    })
    .map(
      (s): EndpointSlice => ({
        ...s,
        ...(s.ports
          ? {
              ports: s.ports.map((p) =>
                typeof p.port === "number" ? { ...p, port: loopbackPort(p.port) } : p,
              ),
            }
          : {}),
        ...(s.endpoints
          ? {
              endpoints: s.endpoints.map((e) => ({
                ...e,
                addresses: e.addresses.map((a) => loopbackAddress(a, "pod")).filter(defined),
              })),
            }
          : {}),
      }),
    );

  if (droppedV6)
    notes.push({
      code: "loopback_ipv6_dropped",
      severity: "info",
      subject: "loopback",
      message: "IPv6 addresses are dropped on loopback; dual-stack Services run IPv4 only",
    });
  const endpoints = snapshot.endpoints.map((e) => ({
    ...e,
    ...(e.subsets
      ? {
          subsets: e.subsets.map((sub) => ({
            ...sub,
            ...(sub.addresses
              ? {
                  addresses: sub.addresses
                    .filter((a) => v4(a.ip))
                    .map((a) => ({ ...a, ip: loopbackAddress(a.ip, "pod")! })),
                }
              : {}),
            ...(sub.notReadyAddresses
              ? {
                  notReadyAddresses: sub.notReadyAddresses
                    .filter((a) => v4(a.ip))
                    .map((a) => ({ ...a, ip: loopbackAddress(a.ip, "pod")! })),
                }
              : {}),
          })),
        }
      : {}),
  }));
  return {
    snapshot: { ...snapshot, config, services, nodes, pods, endpointSlices, endpoints },
    notes,
  };
}
