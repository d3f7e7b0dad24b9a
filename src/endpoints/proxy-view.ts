/**
 * What one node's proxy would do with a Service's slices: merge and de-duplicate them
 * (`merge.ts`, kubernetes pkg/proxy/endpointslicecache.go), choose endpoints for Cluster and Local traffic
 * (`categorize.ts`, §3.3) and count what the Service's health check would report (§4.1).
 * Plain data for `passlb endpointslices merge`; no policy of its own beyond those modules.
 *
 * Per IP family, as kube-proxy does (one proxier per family, each merging only the slices
 * of its own addressType: merge-by-family.ts, kubernetes pkg/proxy/endpointschangetracker.go):
 * one entry per Service and family that has slices, each with its own ports, topology
 * choice and health check count. Without a node name nothing is local: `localEndpoints` is
 * empty and the count is 0.
 */
import type { EndpointSlice, Node, Protocol } from "../k8s/objects.ts";
import type { IpFamily } from "../net/ip.ts";
import { nodeFacts } from "../plan/node-facts.ts";
import { categorizeEndpoints } from "./categorize.ts";
import { localReadyEndpointCount, slicesByService } from "./merge.ts";
import { IP_FAMILIES, mergeServiceEndpointsByFamily } from "./merge-by-family.ts";
import type { SliceFinding } from "./slice-writes.ts";

export interface ProxyViewEndpoint {
  readonly address: string;
  readonly port: number;
  readonly ready: boolean;
  readonly serving: boolean;
  readonly terminating: boolean;
  readonly nodeName: string | null;
  readonly zone: string | null;
  readonly local: boolean;
}

export interface ProxyViewPort {
  readonly name: string;
  readonly protocol: Protocol;
  readonly endpoints: readonly ProxyViewEndpoint[];
  /** `ip:port` the node routes Cluster traffic to (terminating fallback included) */
  readonly clusterEndpoints: readonly string[];
  /** `ip:port` the node routes Local traffic to (terminating fallback included) */
  readonly localEndpoints: readonly string[];
  /** the Service's health check count on this node (distinct local ready IPs, all ports) */
  readonly localReadyEndpoints: number;
}

export interface ProxyViewService {
  readonly service: string;
  /** the proxier (IP family) this merge belongs to */
  readonly family: IpFamily;
  readonly ports: readonly ProxyViewPort[];
}

export function proxyView(
  slices: readonly EndpointSlice[],
  nodes: readonly Node[],
  nodeName: string | undefined,
  families: readonly IpFamily[] = IP_FAMILIES,
): { services: ProxyViewService[]; findings: SliceFinding[] } {
  const node = nodeName === undefined ? undefined : nodes.find((n) => n.metadata.name === nodeName);
  const zone = node ? nodeFacts(node).zone || undefined : undefined;
  const findings: SliceFinding[] = [];
  const services: ProxyViewService[] = [];
  for (const [service, list] of [...slicesByService(slices)].sort(([a], [b]) => (a < b ? -1 : 1))) {
    for (const merged of mergeServiceEndpointsByFamily(list, families)) {
      for (const f of merged.findings)
        findings.push({
          code: f.code,
          severity: "warning",
          subject: `Service ${service}`,
          message: f.message,
        });
      const localReady = nodeName === undefined ? 0 : localReadyEndpointCount(merged.ports, nodeName);
      const ports = merged.ports.map((p) => {
        const c = categorizeEndpoints({ endpoints: p.endpoints, nodeName: nodeName ?? "", zone });
        const isLocal = (n: string | undefined) => nodeName !== undefined && n === nodeName;
        return {
          name: p.name,
          protocol: p.protocol,
          endpoints: p.endpoints.map((e) => ({
            address: e.address,
            port: e.port,
            ready: e.ready,
            serving: e.serving,
            terminating: e.terminating,
            nodeName: e.nodeName ?? null,
            zone: e.zone ?? null,
            local: isLocal(e.nodeName),
          })),
          clusterEndpoints: c.clusterEndpoints.map((e) => e.key),
          localEndpoints: nodeName === undefined ? [] : c.localEndpoints.map((e) => e.key),
          localReadyEndpoints: localReady,
        };
      });
      services.push({ service, family: merged.family, ports });
    }
  }
  return { services, findings };
}
