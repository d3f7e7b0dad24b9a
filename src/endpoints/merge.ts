/**
 * The consumer side of EndpointSlices: merge every slice of a Service into endpoints per
 * service port, exactly as kube-proxy's EndpointSliceCache does (kubernetes pkg/proxy/endpointslicecache.go,
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

/**
 * The endpoints of one service port (name, protocol) after the merge, as parallel arrays
 * in first-seen order (a replaced duplicate keeps its place, as a Map entry would). No
 * object per endpoint: at 200,000 endpoints per plan the allocations are what cost.
 */
interface DedupedPort {
  readonly name: string;
  readonly protocol: Protocol;
  /** canonical address (or the text as given when it does not parse) */
  readonly addresses: string[];
  readonly ports: number[];
  readonly endpoints: Endpoint[];
  readonly slices: EndpointSlice[];
  /** the first port number seen: entries with it are keyed by address alone … */
  readonly mainPort: number;
  readonly byAddress: Map<string, number>;
  /** … and entries with any other number (rare) by `ip:port` */
  otherPorts: Map<string, number> | undefined;
}

const NO_HINTS: readonly string[] = [];

/** The merge proper: per service port, the endpoint that wins for each IP:port. */
function dedupe(slices: readonly EndpointSlice[]): { ports: DedupedPort[]; findings: MergeFinding[] } {
  // the first port group, and a map of all groups once there is a second (most Services
  // have one port: no map, no key string)
  let first: DedupedPort | undefined;
  let byPort: Map<string, DedupedPort> | undefined;
  const groupKey = (name: string, protocol: string) => `${name}\u0000${protocol}`;
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
      let entry =
        first && first.name === port.name && first.protocol === protocol
          ? first
          : byPort?.get(groupKey(port.name, protocol));
      if (!entry) {
        entry = {
          name: port.name,
          protocol,
          addresses: [],
          ports: [],
          endpoints: [],
          slices: [],
          mainPort: port.port,
          byAddress: new Map(),
          otherPorts: undefined,
        };
        if (!first) first = entry;
        else {
          byPort ??= new Map([[groupKey(first.name, first.protocol), first]]);
          byPort.set(groupKey(port.name, protocol), entry);
        }
      }
      const number = port.port;
      const main = number === entry.mainPort;
      for (const endpoint of slice.endpoints ?? []) {
        const first = endpoint.addresses[0];
        if (first === undefined) continue;
        const address = canonicalIp(first) ?? first;
        // the IP:port key: the address alone for the group's first port number
        let index: Map<string, number>;
        let key: string;
        if (main) {
          index = entry.byAddress;
          key = address;
        } else {
          entry.otherPorts ??= new Map();
          index = entry.otherPorts;
          key = joinHostPort(address, number);
        }
        const at = index.get(key);
        if (at === undefined) {
          index.set(key, entry.addresses.length);
          entry.addresses.push(address);
          entry.ports.push(number);
          entry.endpoints.push(endpoint);
          entry.slices.push(slice);
          continue;
        }
        // A later duplicate replaces the earlier one unless it is terminating (kubernetes PR #135593).
        if (endpoint.conditions.terminating ?? false) continue;
        entry.endpoints[at] = endpoint;
        entry.slices[at] = slice;
      }
    }
  }
  const ports = (byPort ? [...byPort.values()] : first ? [first] : []).sort(
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
      endpoints: p.endpoints.map((_, i) => proxyEndpoint(p, i)).sort((a, b) => compare(a.key, b.key)),
    })),
  };
}

function proxyEndpoint(p: DedupedPort, i: number): ProxyEndpoint {
  const ep = p.endpoints[i]!;
  const address = p.addresses[i]!;
  const port = p.ports[i]!;
  const ref = ep.targetRef;
  const forZones = ep.hints?.forZones;
  const forNodes = ep.hints?.forNodes;
  return {
    address,
    family: address.includes(":") ? "IPv6" : "IPv4",
    port,
    key: joinHostPort(address, port),
    ready: ep.conditions.ready ?? true,
    serving: ep.conditions.serving ?? true, // kube-proxy: nil → true, not "defer to ready"
    terminating: ep.conditions.terminating ?? false,
    nodeName: ep.nodeName ?? undefined,
    zone: ep.zone ?? undefined,
    zoneHints: forZones ? forZones.map((z) => z.name) : NO_HINTS,
    nodeHints: forNodes ? forNodes.map((n) => n.name) : NO_HINTS,
    target: ref?.name ? `${ref.namespace ?? p.slices[i]!.metadata.namespace}/${ref.name}` : undefined,
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
export function endpointCountsByNode(
  slices: readonly EndpointSlice[],
  /** false: only the any-ready flags and findings (perNode comes back empty) */
  perNodeWanted = true,
): {
  perNode: Map<string, NodeEndpointCounts>;
  anyReady: boolean;
  anyServingTerminating: boolean;
  findings: MergeFinding[];
} {
  const { ports, findings } = dedupe(slices);
  const counts = new Map<string, { ready: number; nonTerminating: number; servingTerminating: number }>();
  let anyReady = false;
  let anyServingTerminating = false;
  const count = (node: string, ready: boolean, live: boolean, draining: boolean) => {
    let c = counts.get(node);
    if (!c) {
      c = { ready: 0, nonTerminating: 0, servingTerminating: 0 };
      counts.set(node, c);
    }
    if (ready) c.ready++;
    if (live) c.nonTerminating++;
    if (draining) c.servingTerminating++;
  };
  // An IP counts once however many ports it serves: with one port and one port number
  // (the usual case) the merge's entries are distinct IPs already; otherwise one entry per
  // IP, the node first seen for it, its flags OR-ed over the ports where it is on that node.
  const single = ports.length === 1 && ports[0]!.otherPorts === undefined;
  const byAddress = single ? undefined : new Map<string, number>();
  const nodes: string[] = [];
  const flags: number[] = []; // bit 1 ready (and not terminating), 2 not terminating, 4 serving and terminating
  for (const p of ports)
    for (let i = 0; i < p.endpoints.length; i++) {
      const c = p.endpoints[i]!.conditions;
      const ready = c.ready ?? true;
      const terminating = c.terminating ?? false;
      const draining = (c.serving ?? true) && terminating;
      if (ready) anyReady = true;
      if (draining) anyServingTerminating = true;
      const node = p.endpoints[i]!.nodeName;
      if (!node || !perNodeWanted) continue;
      if (!byAddress) {
        count(node, ready && !terminating, !terminating, draining);
        continue;
      }
      const bits = (ready && !terminating ? 1 : 0) | (terminating ? 0 : 2) | (draining ? 4 : 0);
      const address = p.addresses[i]!;
      const at = byAddress.get(address);
      if (at === undefined) {
        byAddress.set(address, nodes.length);
        nodes.push(node);
        flags.push(bits);
      } else if (nodes[at] === node) flags[at]! |= bits;
    }
  for (let i = 0; i < nodes.length; i++) {
    const f = flags[i]!;
    count(nodes[i]!, (f & 1) !== 0, (f & 2) !== 0, (f & 4) !== 0);
  }
  // in the order endpoints were met (slices by name, endpoints as listed): deterministic
  const perNode: Map<string, NodeEndpointCounts> = counts;
  return { perNode, anyReady, anyServingTerminating, findings };
}

/** What a node's health check reports for a Service: distinct IPs of endpoints on that
 * node that are ready, over all ports; terminating endpoints never count (§4.1). Counted
 * per IP family, as each family's kube-proxy counts only its own endpoints
 * (merge-by-family.ts), and the larger count reported: a dual-stack pod counts once. */
export function localReadyEndpointCount(ports: readonly ServicePortEndpoints[], nodeName: string): number {
  const ips = { IPv4: new Set<string>(), IPv6: new Set<string>() };
  for (const port of ports)
    for (const ep of port.endpoints)
      if (ep.nodeName === nodeName && ep.ready && !ep.terminating) ips[ep.family].add(ep.address);
  return Math.max(ips.IPv4.size, ips.IPv6.size);
}
