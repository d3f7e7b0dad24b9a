/**
 * Which endpoints a node's proxy routes to for one service port: kube-proxy's
 * `CategorizeEndpoints` (kubernetes pkg/proxy/topology.go).
 * Cluster traffic uses ready endpoints (topology-filtered), falling back to serving and
 * terminating ones; Local traffic uses this node's ready ones, falling back to its serving
 * and terminating ones.
 */
import type { ProxyEndpoint } from "./merge.ts";

export interface CategorizeInput {
  readonly endpoints: readonly ProxyEndpoint[];
  readonly nodeName: string;
  readonly zone: string | undefined;
  /** the PreferSameTrafficDistribution gate (on by default since Kubernetes 1.35) */
  readonly preferSameNodeHints?: boolean;
}

export interface Categorized {
  readonly clusterEndpoints: readonly ProxyEndpoint[];
  readonly localEndpoints: readonly ProxyEndpoint[];
  readonly hasAnyEndpoints: boolean;
  /** whether the cluster set was narrowed by topology hints */
  readonly topologyFiltered: boolean;
}

export function categorizeEndpoints(input: CategorizeInput): Categorized {
  const { endpoints, nodeName, zone } = input;
  const ready = endpoints.filter((e) => e.ready);
  let cluster = ready;
  let topologyFiltered = false;
  if (ready.length > 0) {
    const allNodeHinted = ready.every((e) => e.nodeHints.length > 0);
    const allZoneHinted = ready.every((e) => e.zoneHints.length > 0);
    if (
      (input.preferSameNodeHints ?? true) &&
      allNodeHinted &&
      ready.some((e) => e.nodeHints.includes(nodeName))
    ) {
      cluster = ready.filter((e) => e.nodeHints.includes(nodeName));
      topologyFiltered = true;
    } else if (zone !== undefined && allZoneHinted && ready.some((e) => e.zoneHints.includes(zone))) {
      cluster = ready.filter((e) => e.zoneHints.includes(zone));
      topologyFiltered = true;
    }
  } else {
    cluster = endpoints.filter((e) => e.serving && e.terminating);
  }
  const local = endpoints.filter((e) => e.nodeName === nodeName);
  const localReady = local.filter((e) => e.ready);
  const localEndpoints = localReady.length > 0 ? localReady : local.filter((e) => e.serving && e.terminating);
  const hasAnyEndpoints = endpoints.some((e) => e.ready || (e.serving && e.terminating));
  return { clusterEndpoints: cluster, localEndpoints, hasAnyEndpoints, topologyFiltered };
}
