/**
 * One Service's LoadBalancerPlan from its prepared inputs, in named steps, each returning its
 * value and its issues: listeners → endpoint counts → weighting → members → health checks →
 * affinity → source ranges → assemble. The rules (docs/plan.md "The rules"):
 *   - backends: service-members.ts (Cluster → every eligible node, a stable subset; Local →
 *     nodes hosting endpoints, terminating ones as a fallback);
 *   - weights: `networking.gke.io/weighted-load-balancing: pods-per-node` under Local →
 *     ready local endpoints; ignored (with a warning) under Cluster, as GKE does;
 *   - zonal affinity: `spec.trafficDistribution` PreferClose / PreferSameZone / PreferSameNode;
 *   - source ranges: `spec.loadBalancerSourceRanges`, else the
 *     `service.beta.kubernetes.io/load-balancer-source-ranges` annotation.
 */

import { endpointCountsByNodePerFamily, IP_FAMILIES } from "../endpoints/merge-by-family.ts";
import type { EndpointSlice, PasslbConfigSpec, Service } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { SOURCE_RANGES_ANNOTATION } from "../k8s/validate.ts";
import { formatCidr, type IpFamily, parseCidr } from "../net/ip.ts";
import { azureListenerChecks, hasAzureProbeAnnotations, noLbRulePorts } from "./azure-listener-checks.ts";
import { clusterHealthCheck, localHealthCheck } from "./health-checks.ts";
import type { VipAssignment } from "./ipam.ts";
import {
  type HealthCheck,
  type Listener,
  type LoadBalancerPlan,
  listenerKey,
  type PlanIssue,
  type SessionAffinity,
} from "./load-balancer-plan.ts";
import { nodePortsMessage, portsWithoutNodePort } from "./node-ports.ts";
import type { NodeTable } from "./node-table.ts";
import { NO_ISSUES, type PlanStep, type StepIssue, step } from "./plan-step.ts";
import { type EndpointCounts, planMembers } from "./service-members.ts";
import { nameHash } from "./subset.ts";

export const WEIGHTED_ANNOTATION = "networking.gke.io/weighted-load-balancing";

export interface ServicePlanInput {
  readonly service: Service;
  readonly slices: readonly EndpointSlice[];
  readonly nodes: NodeTable;
  readonly vips: VipAssignment;
  readonly config: PasslbConfigSpec;
  /** healthCheckNodePort to use when the Service has none (allocated by the planner) */
  readonly healthCheckNodePort: number | undefined;
  /** node names included by the previous plan (subsets are sticky) */
  readonly previousMembers: ReadonlySet<string> | undefined;
  readonly ipMode: "VIP" | "Proxy";
}

type Etp = "Cluster" | "Local";

export function planService(input: ServicePlanInput): LoadBalancerPlan {
  const { service: svc, config } = input;
  const etp: Etp = svc.spec.externalTrafficPolicy ?? "Cluster";
  const families = input.vips.families;
  const listeners = planListeners(svc, input.ipMode);
  const counts = countEndpoints(input.slices, families, etp);
  const weighted = planWeighting(svc, etp);
  const members = planMembers({
    nodes: input.nodes,
    families,
    etp,
    counts: counts.value,
    weighted: weighted.value,
    clusterBackendLimit: config.clusterBackendLimit,
    localBackendLimit: config.localBackendLimit,
    serviceHash: () => nameHash(`${svc.metadata.name}/${svc.metadata.namespace}`),
    previousMembers: input.previousMembers,
  });
  const healthChecks = planHealthChecks(svc, etp, listeners.value, input.healthCheckNodePort, weighted.value);
  const affinity = planAffinity(svc, config);
  const sourceRanges = planSourceRanges(svc, families);

  // assemble: issues in step order, after address management's
  const key = objectKey(svc.metadata);
  const issues: PlanIssue[] = [...input.vips.issues];
  let subject: string | undefined; // made on the first issue: many Services have none
  for (const s of [listeners, counts, weighted, members, healthChecks, affinity, sourceRanges])
    for (const i of s.issues) {
      subject ??= `Service ${key}`;
      issues.push({ code: i.code, severity: i.severity, subject, message: i.message });
    }
  // Every node appears in `backends`; it is built on first read, since most consumers
  // need only the members (`members`) and 10,000 Services × 5,000 nodes add up.
  let cached: ReturnType<typeof members.value.backends> | undefined;
  const keys = input.vips.request?.keys ?? [];
  return {
    service: key,
    uid: svc.metadata.uid,
    externalTrafficPolicy: etp,
    ipFamilies: families,
    vips: input.vips.vips,
    ...(keys.length > 0 && { foreignKeys: keys }),
    listeners: listeners.value,
    get backends() {
      cached ??= members.value.backends();
      return cached;
    },
    members: members.value.members,
    healthChecks: healthChecks.value,
    weighted: weighted.value,
    zonalAffinity: affinity.value.zonalAffinity,
    sessionAffinity: affinity.value.sessionAffinity,
    sourceRanges: sourceRanges.value,
    ipMode: input.ipMode,
    issues,
  };
}

/** The Service's ports, less those an Azure `port_<n>_no_lb_rule` annotation drops. */
function planListeners(svc: Service, ipMode: "VIP" | "Proxy"): PlanStep<Listener[]> {
  const issues: StepIssue[] = [];
  const dropped = noLbRulePorts(svc);
  for (const port of dropped)
    issues.push({
      code: "listener_skipped_no_lb_rule",
      severity: "info",
      message: `port ${port}: service.beta.kubernetes.io/port_${port}_no_lb_rule is true, so passlb does not listen on it (as AKS)`,
    });
  const listeners: Listener[] = svc.spec.ports
    .filter((p) => !dropped.has(p.port))
    .map((p) => ({
      name: p.name ?? "",
      protocol: p.protocol,
      port: p.port,
      nodePort: p.nodePort ? p.nodePort : null,
      targetPort: p.targetPort ?? p.port,
    }));
  const noNodePort = portsWithoutNodePort(svc, ipMode);
  if (noNodePort.length > 0)
    issues.push({ code: "node_ports_required", severity: "warning", message: nodePortsMessage(noNodePort) });
  return step(listeners, issues.length > 0 ? issues : NO_ISSUES);
}

/**
 * Per-node counts decide Local membership; Cluster needs only whether any endpoint is ready.
 * Per family, as kube-proxy's per-family proxiers count (merge-by-family.ts): only the
 * Service's families, and a dual-stack pod is one endpoint, not two.
 */
function countEndpoints(
  slices: readonly EndpointSlice[],
  families: readonly IpFamily[],
  etp: Etp,
): PlanStep<EndpointCounts> {
  const { perNode, anyReady, anyServingTerminating, findings } = endpointCountsByNodePerFamily(
    slices,
    families.length > 0 ? families : IP_FAMILIES,
    etp === "Local",
  );
  const issues = findings.map((f): StepIssue => ({ code: f.code, severity: "warning", message: f.message }));
  return step({ perNode, anyReady, anyServingTerminating }, issues.length > 0 ? issues : NO_ISSUES);
}

/** Whether members are weighted by their ready local endpoints (GKE's pods-per-node). */
function planWeighting(svc: Service, etp: Etp): PlanStep<boolean> {
  const value = svc.metadata.annotations?.[WEIGHTED_ANNOTATION];
  const asked = value === "pods-per-node";
  if (asked && etp !== "Local")
    return step(false, [
      {
        code: "weighted_ignored_cluster_policy",
        severity: "warning",
        message: `${WEIGHTED_ANNOTATION}: pods-per-node only applies with externalTrafficPolicy: Local (GKE ignores it too); all nodes get equal weight`,
      },
    ]);
  if (value !== undefined && !asked)
    return step(false, [
      {
        code: "weighted_unknown_value",
        severity: "warning",
        message: `${WEIGHTED_ANNOTATION} must be "pods-per-node"; the annotation is ignored`,
      },
    ]);
  return step(asked);
}

/** Local: the healthCheckNodePort check; Cluster: Azure probe annotations, else the node check. */
function planHealthChecks(
  svc: Service,
  etp: Etp,
  listeners: readonly Listener[],
  allocatedPort: number | undefined,
  weighted: boolean,
): PlanStep<HealthCheck[]> {
  const checks: HealthCheck[] = [];
  const issues: StepIssue[] = [];
  const azure = hasAzureProbeAnnotations(svc);
  if (listeners.length > 0) {
    if (etp === "Local") {
      const hcnp = svc.spec.healthCheckNodePort || allocatedPort;
      if (hcnp) checks.push(localHealthCheck(listeners, hcnp, weighted));
      if (azure)
        issues.push({
          code: "azure_probes_ignored_local",
          severity: "info",
          message:
            "Azure probe annotations are ignored under externalTrafficPolicy Local: the healthCheckNodePort check gates every listener",
        });
    } else if (azure) {
      const a = azureListenerChecks(svc, listeners);
      issues.push(...a.issues);
      checks.push(...a.checks);
      const rest = listeners.filter((l) => a.fallback.includes(listenerKey(l)));
      if (rest.length > 0) checks.push(clusterHealthCheck(rest));
    } else checks.push(clusterHealthCheck(listeners));
  }
  if (etp === "Local" && !svc.spec.healthCheckNodePort && allocatedPort)
    issues.push({
      code: "health_check_node_port_allocated",
      severity: "info",
      message: `spec.healthCheckNodePort is unset: ${allocatedPort} was chosen from the node port range (the API server would allocate one)`,
    });
  return step(checks, issues.length > 0 ? issues : NO_ISSUES);
}

interface Affinity {
  readonly zonalAffinity: boolean;
  readonly sessionAffinity: SessionAffinity;
}

/** Zonal affinity from `spec.trafficDistribution`; client-IP affinity from `spec.sessionAffinity`. */
function planAffinity(svc: Service, config: PasslbConfigSpec): PlanStep<Affinity> {
  const dist = svc.spec.trafficDistribution;
  const zonalAffinity = dist === "PreferClose" || dist === "PreferSameZone" || dist === "PreferSameNode";
  const sessionAffinity: SessionAffinity =
    svc.spec.sessionAffinity === "ClientIP"
      ? {
          type: "ClientIP",
          timeoutSeconds: svc.spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? 10800,
        }
      : { type: "None", timeoutSeconds: null };
  if (zonalAffinity && config.zones.length === 0)
    return step({ zonalAffinity, sessionAffinity }, [
      {
        code: "zonal_affinity_without_client_zones",
        severity: "warning",
        message: `trafficDistribution: ${dist} asks for zonal affinity, but PasslbConfig maps no client CIDRs to zones: clients go to every zone`,
      },
    ]);
  return step({ zonalAffinity, sessionAffinity });
}

/** Canonical CIDRs from `spec.loadBalancerSourceRanges`, else the annotation; unparsable ones are skipped. */
function planSourceRanges(svc: Service, families: readonly IpFamily[]): PlanStep<string[]> {
  const rangesText =
    svc.spec.loadBalancerSourceRanges && svc.spec.loadBalancerSourceRanges.length > 0
      ? svc.spec.loadBalancerSourceRanges
      : (svc.metadata.annotations?.[SOURCE_RANGES_ANNOTATION]?.split(",") ?? []);
  const ranges = rangesText.flatMap((r) => {
    const c = parseCidr(r.trim(), true);
    return c ? [formatCidr(c)] : [];
  });
  if (ranges.length > 0 && !families.some((f) => ranges.some((r) => r.includes(":") === (f === "IPv6"))))
    return step(ranges, [
      {
        code: "source_ranges_family_mismatch",
        severity: "warning",
        message: "loadBalancerSourceRanges has no range of the Service's families: every client is dropped",
      },
    ]);
  return step(ranges);
}
