/**
 * What a node's userspace proxy serves, from a Snapshot: per nodePort of every Service
 * that has one, the pods a new connection may go to. The node's health answers are not
 * here: src/health/state-agent-model.ts computes them for the real health servers.
 *
 * Rules (kube-proxy: kubernetes pkg/proxy/topology.go, pkg/proxy/healthcheck; docs/dataplane-userspace.md):
 *   - endpoints are the merged slices of the Service (endpoints/merge.ts), split by
 *     kube-proxy's categorisation (endpoints/categorize.ts) for this node and its zone;
 *   - externalTrafficPolicy Local: only this node's ready endpoints (or, when none, its
 *     serving-terminating ones); the client address is kept;
 *   - Cluster (the default): any ready endpoint in the cluster; the node stands in for the
 *     client (kube-proxy masquerades external traffic under Cluster).
 * Pure: a Snapshot and a node name in, data out.
 */
import { categorizeEndpoints } from "../../endpoints/categorize.ts";
import { mergeServiceEndpoints, slicesByService } from "../../endpoints/merge.ts";
import { objectKey, type Snapshot } from "../../k8s/snapshot.ts";
import { LEGACY_ZONE_LABEL, ZONE_LABEL } from "../../plan/node-facts.ts";

export interface PodTarget {
  readonly address: string;
  readonly port: number;
  /** `namespace/name` of the pod, when the slice names it */
  readonly pod: string | undefined;
  readonly node: string | undefined;
}

export interface NodePortRoute {
  readonly service: string;
  readonly protocol: "TCP" | "UDP";
  readonly nodePort: number;
  readonly policy: "Local" | "Cluster";
  readonly clientIpAffinity: boolean;
  /** sorted by address:port */
  readonly targets: readonly PodTarget[];
}

export interface NodeRoutes {
  readonly node: string;
  readonly zone: string | undefined;
  readonly routes: readonly NodePortRoute[];
}

export function nodePortRoutes(snapshot: Snapshot, node: string): NodeRoutes {
  const n = snapshot.nodes.find((x) => x.metadata.name === node);
  const labels = n?.metadata.labels ?? {};
  const zone = labels[ZONE_LABEL] ?? labels[LEGACY_ZONE_LABEL];
  const bySvc = slicesByService(snapshot.endpointSlices);
  const routes: NodePortRoute[] = [];
  for (const svc of snapshot.services) {
    const type = svc.spec.type;
    if (type !== "NodePort" && type !== "LoadBalancer") continue;
    const key = objectKey(svc.metadata);
    const { ports } = mergeServiceEndpoints(bySvc.get(key) ?? []);
    const policy = svc.spec.externalTrafficPolicy ?? "Cluster";
    for (const sp of svc.spec.ports) {
      if (!sp.nodePort || sp.protocol === "SCTP") continue;
      const merged = ports.find((p) => p.name === (sp.name ?? "") && p.protocol === sp.protocol);
      const c = categorizeEndpoints({ endpoints: merged?.endpoints ?? [], nodeName: node, zone });
      const chosen = policy === "Local" ? c.localEndpoints : c.clusterEndpoints;
      routes.push({
        service: key,
        protocol: sp.protocol,
        nodePort: sp.nodePort,
        policy,
        clientIpAffinity: svc.spec.sessionAffinity === "ClientIP",
        targets: chosen.map((e) => ({ address: e.address, port: e.port, pod: e.target, node: e.nodeName })),
      });
    }
  }
  routes.sort((a, b) => a.nodePort - b.nodePort || (a.protocol < b.protocol ? -1 : 1));
  return { node, zone, routes };
}
