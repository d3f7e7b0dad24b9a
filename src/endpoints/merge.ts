/**
 * The consumer side of EndpointSlices: merge every slice of a Service into endpoints per
 * service port, exactly as kube-proxy's EndpointSliceCache does (specs/endpointslice.md §3.1–3.2,
 * kubernetes pkg/proxy/endpointslicecache.go). Choosing which endpoints a node routes to
 * is `categorize.ts`; producing slices is the reconciler's job, not this module's.
 *
 * Determinism: kube-proxy iterates slices in map order (undefined); we iterate them by
 * name, so "the later one" in the duplicate rule is the slice whose name sorts later.
 */

import type { EndpointSlice, Protocol } from "../k8s/objects.ts";
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

/** Groups slices by the Service they belong to (`namespace/name` from the service-name
 * label); slices without the label, a name or a namespace are ignored, as kube-proxy does. */
export function slicesByService(slices: readonly EndpointSlice[]): Map<string, EndpointSlice[]> {
  const out = new Map<string, EndpointSlice[]>();
  for (const slice of slices) {
    const service = slice.metadata.labels?.[SERVICE_NAME_LABEL];
    if (!service || !slice.metadata.name || !slice.metadata.namespace) continue;
    if (slice.addressType === "FQDN") continue; // kube-proxy tracks IPv4 and IPv6 only
    const key = `${slice.metadata.namespace}/${service}`;
    const list = out.get(key);
    if (list) list.push(slice);
    else out.set(key, [slice]);
  }
  return out;
}

/** Merges the slices of one Service into endpoints per service port (name, protocol). */
export function mergeServiceEndpoints(slices: readonly EndpointSlice[]): {
  ports: ServicePortEndpoints[];
  findings: MergeFinding[];
} {
  const byPort = new Map<string, { name: string; protocol: Protocol; byKey: Map<string, ProxyEndpoint> }>();
  const findings: MergeFinding[] = [];
  const ordered = [...slices].sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""));
  for (const slice of ordered) {
    const sliceName = `${slice.metadata.namespace}/${slice.metadata.name}`;
    for (const port of slice.ports ?? []) {
      if (port.name === undefined || port.name === null) {
        findings.push({
          code: "endpointslice_port_unnamed",
          slice: sliceName,
          message: `EndpointSlice ${sliceName} has a port without a name; kube-proxy skips it (use name: "" for an unnamed port)`,
        });
        continue;
      }
      if (!port.port) {
        findings.push({
          code: "endpointslice_port_missing_number",
          slice: sliceName,
          message: `EndpointSlice ${sliceName} port "${port.name}" has no port number; kube-proxy skips it`,
        });
        continue;
      }
      const protocol = port.protocol ?? "TCP";
      const portKey = `${port.name}\u0000${protocol}`;
      let entry = byPort.get(portKey);
      if (!entry) {
        entry = { name: port.name, protocol, byKey: new Map() };
        byPort.set(portKey, entry);
      }
      for (const ep of slice.endpoints ?? []) {
        const first = ep.addresses[0];
        if (first === undefined) continue;
        const address = canonicalIp(first) ?? first;
        const key = joinHostPort(address, port.port);
        const terminating = ep.conditions.terminating ?? false;
        const existing = entry.byKey.get(key);
        // A later duplicate replaces the earlier one unless it is terminating (kubernetes PR #135593).
        if (existing && terminating) continue;
        const ref = ep.targetRef;
        entry.byKey.set(key, {
          address,
          family: address.includes(":") ? "IPv6" : "IPv4",
          port: port.port,
          key,
          ready: ep.conditions.ready ?? true,
          serving: ep.conditions.serving ?? true, // kube-proxy: nil → true, not "defer to ready"
          terminating,
          nodeName: ep.nodeName ?? undefined,
          zone: ep.zone ?? undefined,
          zoneHints: (ep.hints?.forZones ?? []).map((z) => z.name),
          nodeHints: (ep.hints?.forNodes ?? []).map((n) => n.name),
          target: ref?.name ? `${ref.namespace ?? slice.metadata.namespace}/${ref.name}` : undefined,
        });
      }
    }
  }
  const ports = [...byPort.values()]
    .map((p) => ({
      name: p.name,
      protocol: p.protocol,
      endpoints: [...p.byKey.values()].sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0)),
    }))
    .sort((a, b) => a.name.localeCompare(b.name) || a.protocol.localeCompare(b.protocol));
  return { ports, findings };
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

/** Per node: distinct ready local IPs (the health check's weight) and distinct
 * non-terminating IPs (GKE's Local membership rule), over all ports. */
export function endpointsPerNode(
  ports: readonly ServicePortEndpoints[],
): Map<
  string,
  { readonly ready: number; readonly nonTerminating: number; readonly servingTerminating: number }
> {
  const ready = new Map<string, Set<string>>();
  const live = new Map<string, Set<string>>();
  const draining = new Map<string, Set<string>>();
  const addTo = (m: Map<string, Set<string>>, node: string, ip: string) => {
    const s = m.get(node);
    if (s) s.add(ip);
    else m.set(node, new Set([ip]));
  };
  for (const port of ports)
    for (const ep of port.endpoints) {
      if (!ep.nodeName) continue;
      if (!ep.terminating) addTo(live, ep.nodeName, ep.address);
      if (ep.ready && !ep.terminating) addTo(ready, ep.nodeName, ep.address);
      if (ep.serving && ep.terminating) addTo(draining, ep.nodeName, ep.address);
    }
  const nodes = new Set([...ready.keys(), ...live.keys(), ...draining.keys()]);
  const out = new Map<string, { ready: number; nonTerminating: number; servingTerminating: number }>();
  for (const n of [...nodes].sort())
    out.set(n, {
      ready: ready.get(n)?.size ?? 0,
      nonTerminating: live.get(n)?.size ?? 0,
      servingTerminating: draining.get(n)?.size ?? 0,
    });
  return out;
}
