/**
 * What a node's health servers should say, computed from a Snapshot: whether the node is
 * eligible for `/healthz`, and one entry per Service that needs a healthCheckNodePort
 * server with its count of local ready endpoints.
 *
 * Rules: node eligibility is kube-proxy's, not the load balancer's: a known Node without
 * a deletionTimestamp and without the `ToBeDeletedByClusterAutoscaler` taint; an unknown
 * node is not eligible; the exclude-from-external-load-balancers label does not matter
 * here (kubernetes pkg/proxy/healthcheck/proxy_health.go). A Service needs a server iff it is type
 * LoadBalancer with externalTrafficPolicy Local and a non-zero healthCheckNodePort
 * (§4.1, `NeedsHealthCheck`). The count is distinct IPs of local, ready, non-terminating
 * endpoints over all ports, from EndpointSlices only (§4.1, kube-proxy reads no Endpoints).
 *
 * Pure. Not here: freshness (state-proxy-health.ts) and the answers (state-responses.ts).
 */

import { localReadyEndpointCount, mergeServiceEndpoints, slicesByService } from "../endpoints/merge.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { IpFamily } from "../net/ip.ts";
import type { Finding } from "../plan/load-balancer-plan.ts";
import { nodeFacts } from "../plan/node-facts.ts";

export interface ServiceHealthModel {
  readonly namespace: string;
  readonly name: string;
  /** the Service's healthCheckNodePort */
  readonly port: number;
  readonly localEndpoints: number;
}

export interface AgentHealthModel {
  readonly nodeEligible: boolean;
  /** why not, in words, when not eligible */
  readonly ineligibleReason: string | undefined;
  /** the families the node has addresses in (IPv4 when it has none): the agent keeps one
   * freshness record per family, as kube-proxy keeps one per proxier */
  readonly families: readonly IpFamily[];
  /** sorted by port, then namespace/name */
  readonly services: readonly ServiceHealthModel[];
  readonly findings: readonly Finding[];
}

export function agentHealthModel(snapshot: Snapshot, nodeName: string): AgentHealthModel {
  const node = snapshot.nodes.find((n) => n.metadata.name === nodeName);
  const facts = node ? nodeFacts(node) : undefined;
  const reason = facts?.exclusion?.reason;
  const kubeProxyIneligible = reason === "node_deleting" || reason === "node_to_be_deleted";
  const ineligibleReason = !facts
    ? `Node ${nodeName} is not in the input`
    : kubeProxyIneligible
      ? facts.exclusion?.detail
      : undefined;
  const families: IpFamily[] = [];
  if (facts?.addresses.IPv4 !== undefined) families.push("IPv4");
  if (facts?.addresses.IPv6 !== undefined) families.push("IPv6");
  if (families.length === 0) families.push("IPv4");

  const findings: Finding[] = [];
  const slices = slicesByService(snapshot.endpointSlices);
  const services: ServiceHealthModel[] = [];
  const byPort = new Map<number, string>();
  for (const svc of snapshot.services) {
    if (svc.spec.type !== "LoadBalancer" || svc.spec.externalTrafficPolicy !== "Local") continue;
    const namespace = svc.metadata.namespace ?? "default";
    const name = svc.metadata.name ?? "";
    const subject = `Service ${namespace}/${name}`;
    const port = svc.spec.healthCheckNodePort ?? 0;
    if (port === 0) {
      findings.push({
        code: "health_check_node_port_missing",
        severity: "warning",
        subject,
        message: `${subject} has externalTrafficPolicy: Local but no healthCheckNodePort (the API server allocates one; a manifest must give it), so no health server is opened for it`,
      });
      continue;
    }
    const other = byPort.get(port);
    if (other !== undefined) {
      findings.push({
        code: "health_check_node_port_conflict",
        severity: "warning",
        subject,
        message: `${subject} asks for healthCheckNodePort ${port}, already used by Service ${other}; it is not served`,
      });
      continue;
    }
    byPort.set(port, `${namespace}/${name}`);
    const merged = mergeServiceEndpoints(slices.get(`${namespace}/${name}`) ?? []);
    services.push({ namespace, name, port, localEndpoints: localReadyEndpointCount(merged.ports, nodeName) });
  }
  services.sort((a, b) => a.port - b.port);
  return {
    nodeEligible: facts !== undefined && !kubeProxyIneligible,
    ineligibleReason,
    families,
    services,
    findings,
  };
}
