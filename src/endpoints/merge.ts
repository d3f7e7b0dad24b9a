/**
 * The consumer side of EndpointSlices: merge every slice of a Service into endpoints per
 * service port, exactly as kube-proxy's EndpointSliceCache does (specs/endpointslice.md §3.1–3.2,
 * kubernetes pkg/proxy/endpointslicecache.go). Choosing which endpoints a node routes to
 * is `categorize.ts`; producing slices is the reconciler's job, not this module's.
 *
 * Determinism: kube-proxy iterates slices in map order (undefined); we iterate them by
 * name, so "the later one" in the duplicate rule is the slice whose name sorts later.
 */

import type { Endpoint, EndpointSlice, Protocol } from "../k8s/objects.ts";
import { canonicalIp, joinHostPort } from "../net/ip.ts";

export const SERVICE_NAME_LABEL = "kubernetes.io/service-name";

export interface ProxyEndpoint {
  /** canonical text of addresses[0] */
  readonly address: string;
  readonly family: "IPv4" | "IPv6";
  readonly port: number;
  /** `ip:port` (brackets for IPv6): the de-duplication key */
  readonly key: string;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly nodeName: string | undefined;
  readonly zone: string | undefined;
  readonly zoneHints: readonly string[];
  readonly nodeHints: readonly string[];
  /** the Pod (or other object) behind the endpoint, `namespace/name`, when the slice says */
  readonly target: string | undefined;
}

export interface ServicePortEndpoints {
  /** the service port's name ("" for an unnamed single port) */
  readonly name: string;
  readonly protocol: Protocol;
  /** sorted by `key` */
  readonly endpoints: readonly ProxyEndpoint[];
}

export interface MergeFinding {
  readonly code: "endpointslice_port_unnamed" | "endpointslice_port_missing_number";
  readonly slice: string;
  readonly message: string;
}

/** The Service a slice belongs to (`namespace/name` from the service-name label), or
 * undefined for slices kube-proxy ignores: no label, no name or namespace, or FQDN. */
export function sliceServiceKey(slice: EndpointSlice): string | undefined {
  const service = slice.metadata.labels?.[SERVICE_NAME_LABEL];
  if (!service || !slice.metadata.name || !slice.metadata.namespace) return undefined;
  if (slice.addressType === "FQDN") return undefined; // kube-proxy tracks IPv4 and IPv6 only
  return `${slice.metadata.namespace}/${service}`;
}

/** Groups slices by the Service they belong to (`sliceServiceKey`). */
export function slicesByService(slices: readonly EndpointSlice[]): Map<string, EndpointSlice[]> {
  const out = new Map<string, EndpointSlice[]>();
  for (const slice of slices) {
    const key = sliceServiceKey(slice);
    if (key === undefined) continue;
    const list = out.get(key);
    if (list) list.push(slice);
    else out.set(key, [slice]);
  }
  return out;
}

interface Winner {
  readonly address: string;
  readonly port: number;
  readonly key: string;
  readonly endpoint: Endpoint;
  readonly slice: EndpointSlice;
}

interface DedupedPort {
  readonly name: string;
  readonly protocol: Protocol;
  readonly byKey: Map<string, Winner>;
}

const NO_HINTS: readonly string[] = [];

/** The merge proper: per service port, the endpoint that wins for each IP:port. */
function dedupe(slices: readonly EndpointSlice[]): { ports: DedupedPort[]; findings: MergeFinding[] } {
  const byPort = new Map<string, DedupedPort>();
  const findings: MergeFinding[] = [];
  const ordered =
    slices.length < 2
      ? slices
      : [...slices].sort((a, b) => compare(a.metadata.name ?? "", b.metadata.name ?? ""));
  for (const slice of ordered) {
    for (const port of slice.ports ?? []) {
      if (port.name === undefined || port.name === null || !port.port) {
        const sliceName = `${slice.metadata.namespace}/${slice.metadata.name}`;
        findings.push(
          port.name === undefined || port.name === null
            ? {
                code: "endpointslice_port_unnamed",
                slice: sliceName,
                message: `EndpointSlice ${sliceName} has a port without a name; kube-proxy skips it (use name: "" for an unnamed port)`,
              }
            : {
                code: "endpointslice_port_missing_number",
                slice: sliceName,
                message: `EndpointSlice ${sliceName} port "${port.name}" has no port number; kube-proxy skips it`,
              },
        );
        continue;
      }
      const protocol = port.protocol ?? "TCP";
      const portKey = `${port.name}\u0000${protocol}`;
      let entry = byPort.get(portKey);
      if (!entry) {
        entry = { name: port.name, protocol, byKey: new Map() };
        byPort.set(portKey, entry);
      }
      for (const endpoint of slice.endpoints ?? []) {
        const first = endpoint.addresses[0];
        if (first === undefined) continue;
        const address = canonicalIp(first) ?? first;
        const key = joinHostPort(address, port.port);
        // A later duplicate replaces the earlier one unless it is terminating (kubernetes PR #135593).
        if ((endpoint.conditions.terminating ?? false) && entry.byKey.has(key)) continue;
        entry.byKey.set(key, { address, port: port.port, key, endpoint, slice });
      }
    }
  }
  const ports = [...byPort.values()].sort(
    (a, b) => compare(a.name, b.name) || compare(a.protocol, b.protocol),
  );
  return { ports, findings };
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Merges the slices of one Service into endpoints per service port (name, protocol). */
export function mergeServiceEndpoints(slices: readonly EndpointSlice[]): {
  ports: ServicePortEndpoints[];
  findings: MergeFinding[];
} {
  const { ports, findings } = dedupe(slices);
  return {
    findings,
    ports: ports.map((p) => ({
      name: p.name,
      protocol: p.protocol,
      endpoints: [...p.byKey.values()].sort((a, b) => compare(a.key, b.key)).map(proxyEndpoint),
    })),
  };
}

function proxyEndpoint(w: Winner): ProxyEndpoint {
  const ep = w.endpoint;
  const ref = ep.targetRef;
  const forZones = ep.hints?.forZones;
  const forNodes = ep.hints?.forNodes;
  return {
    address: w.address,
    family: w.address.includes(":") ? "IPv6" : "IPv4",
    port: w.port,
    key: w.key,
    ready: ep.conditions.ready ?? true,
    serving: ep.conditions.serving ?? true, // kube-proxy: nil → true, not "defer to ready"
    terminating: ep.conditions.terminating ?? false,
    nodeName: ep.nodeName ?? undefined,
    zone: ep.zone ?? undefined,
    zoneHints: forZones ? forZones.map((z) => z.name) : NO_HINTS,
    nodeHints: forNodes ? forNodes.map((n) => n.name) : NO_HINTS,
    target: ref?.name ? `${ref.namespace ?? w.slice.metadata.namespace}/${ref.name}` : undefined,
  };
}

export interface NodeEndpointCounts {
  /** distinct IPs that are ready (and so not terminating): the health check's weight */
  readonly ready: number;
  /** distinct IPs that are not terminating, ready or not: GKE's Local membership rule */
  readonly nonTerminating: number;
  /** distinct IPs that are serving and terminating: the terminating fallback */
  readonly servingTerminating: number;
}

/** The planner's view of a Service's endpoints: per node the counts above, over all ports,
 * after the same merge as `mergeServiceEndpoints`, without building an object per endpoint. */
export function endpointCountsByNode(slices: readonly EndpointSlice[]): {
  perNode: Map<string, NodeEndpointCounts>;
  anyReady: boolean;
  anyServingTerminating: boolean;
  findings: MergeFinding[];
} {
  const { ports, findings } = dedupe(slices);
  // One entry per address (an IP counts once however many ports it serves), its flags
  // OR-ed over the ports, then counted per node.
  const byAddress = new Map<string, { node: string; ready: boolean; live: boolean; draining: boolean }>();
  let anyReady = false;
  let anyServingTerminating = false;
  for (const p of ports)
    for (const w of p.byKey.values()) {
      const c = w.endpoint.conditions;
      const ready = c.ready ?? true;
      const terminating = c.terminating ?? false;
      const draining = (c.serving ?? true) && terminating;
      if (ready) anyReady = true;
      if (draining) anyServingTerminating = true;
      const node = w.endpoint.nodeName;
      if (!node) continue;
      const e = byAddress.get(w.address);
      if (e && e.node === node) {
        e.ready ||= ready && !terminating;
        e.live ||= !terminating;
        e.draining ||= draining;
      } else if (!e)
        byAddress.set(w.address, { node, ready: ready && !terminating, live: !terminating, draining });
    }
  const counts = new Map<string, { ready: number; nonTerminating: number; servingTerminating: number }>();
  for (const e of byAddress.values()) {
    let c = counts.get(e.node);
    if (!c) {
      c = { ready: 0, nonTerminating: 0, servingTerminating: 0 };
      counts.set(e.node, c);
    }
    if (e.ready) c.ready++;
    if (e.live) c.nonTerminating++;
    if (e.draining) c.servingTerminating++;
  }
  // in the order endpoints were met (slices by name, endpoints as listed): deterministic
  const perNode: Map<string, NodeEndpointCounts> = counts;
  return { perNode, anyReady, anyServingTerminating, findings };
}

/** What a node's health check reports for a Service: distinct IPs of endpoints on that
 * node that are ready, over all ports; terminating endpoints never count (§4.1). */
export function localReadyEndpointCount(ports: readonly ServicePortEndpoints[], nodeName: string): number {
  const ips = new Set<string>();
  for (const port of ports)
    for (const ep of port.endpoints)
      if (ep.nodeName === nodeName && ep.ready && !ep.terminating) ips.add(ep.address);
  return ips.size;
}
