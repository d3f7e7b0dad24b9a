/**
 * The health check each GKE path creates (docs/providers-gke.md): eTP Cluster probes kube-proxy's
 * `:10256/healthz` through a shared check, eTP Local probes `/healthz` on the Service's
 * healthCheckNodePort through a per-Service check. Resource type, scope, parameters and names
 * per path follow the §4.2 table (cloud-provider-gcp makeHTTPHealthCheck /
 * newInternalLBHealthCheck; ingress-gce pkg/l4/healthchecks). Never the service port.
 * Not modelled: hand-raised values that the controllers keep (no cloud state offline).
 */
import type { Service } from "../../k8s/objects.ts";
import type { GkePath, HealthCheck } from "./gke-types.ts";

export const KUBE_PROXY_HEALTH_PORT = 10256;

export interface HealthCheckNames {
  readonly clusterId: string;
  readonly legacy: string;
  readonly sharedL4: string;
  readonly backend: string;
}

export function planHealthCheck(
  path: GkePath,
  service: Service,
  names: HealthCheckNames,
): HealthCheck | null {
  if (path === "none") return null;
  const shared = service.spec.externalTrafficPolicy !== "Local";
  const port = shared ? KUBE_PROXY_HEALTH_PORT : (service.spec.healthCheckNodePort ?? 0);
  const ccm = path === "target-pool" || path === "ccm-ilb";
  // CCM: 8/1/1/3 for both; ingress-gce: 8/1/1/3 shared, 3/1/1/2 local.
  const [interval, unhealthy] = ccm || shared ? [8, 3] : [3, 2];
  const common = {
    type: "HTTP" as const,
    shared,
    checkIntervalSec: interval,
    timeoutSec: 1,
    healthyThreshold: 1,
    unhealthyThreshold: unhealthy,
    port,
    requestPath: "/healthz",
  };
  if (path === "target-pool")
    return {
      name: shared ? `k8s-${names.clusterId}-node` : names.legacy,
      resource: "httpHealthChecks",
      scope: "GLOBAL",
      ...common,
    };
  if (path === "ccm-ilb")
    return {
      name: shared ? `k8s-${names.clusterId}-node` : names.legacy,
      resource: "healthChecks",
      scope: "GLOBAL",
      ...common,
    };
  const name = shared ? names.sharedL4 : names.backend;
  if (path === "subsetting-ilb") return { name, resource: "healthChecks", scope: "GLOBAL", ...common };
  return { name, resource: "regionHealthChecks", scope: "REGIONAL", ...common };
}
