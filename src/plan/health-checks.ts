/**
 * The health checks a Service's backends are judged by. Defaults are GKE's
 * (ingress-gce pkg/l4/healthchecks, cloud-provider-gcp `gce_loadbalancer_external.go` `makeHTTPHealthCheck`):
 * externalTrafficPolicy Cluster → HTTP :10256/healthz answered by kube-proxy (interval 8 s, timeout 1 s,
 * healthy 1, unhealthy 3); Local → HTTP :healthCheckNodePort/healthz (3 s, 1 s, 1, 2).
 * Under Local the healthCheckNodePort check gates every listener, as both GKE and AKS do
 * (cloud-provider-azure `pkg/provider/azure_loadbalancer_healthprobe.go`); per-listener probes for
 * AKS-written Services come from `azure-listener-checks.ts`.
 */
import { type HealthCheck, type Listener, listenerKey } from "./load-balancer-plan.ts";

export const KUBE_PROXY_HEALTHZ_PORT = 10256;

export function clusterHealthCheck(listeners: readonly Listener[]): HealthCheck {
  return {
    id: "node-healthz",
    protocol: "HTTP",
    port: KUBE_PROXY_HEALTHZ_PORT,
    path: "/healthz",
    intervalSeconds: 8,
    timeoutSeconds: 1,
    healthyThreshold: 1,
    unhealthyThreshold: 3,
    listeners: listeners.map(listenerKey),
    readsWeight: false,
    origin: "GKE default for externalTrafficPolicy: Cluster: kube-proxy's node health on :10256/healthz",
  };
}

export function localHealthCheck(
  listeners: readonly Listener[],
  healthCheckNodePort: number,
  weighted: boolean,
): HealthCheck {
  return {
    id: "local",
    protocol: "HTTP",
    port: healthCheckNodePort,
    path: "/healthz",
    intervalSeconds: 3,
    timeoutSeconds: 1,
    healthyThreshold: 1,
    unhealthyThreshold: 2,
    listeners: listeners.map(listenerKey),
    readsWeight: weighted,
    origin:
      "GKE default for externalTrafficPolicy: Local: healthy iff the node has a ready local endpoint" +
      (weighted ? "; the X-Load-Balancing-Endpoint-Weight header sets the node's weight" : ""),
  };
}
