/**
 * One Service's LoadBalancerPlan from its prepared inputs: listeners, backends (who is in,
 * who is out, and why), health checks, weights, affinity and source ranges. Rules:
 *   - backends (DESIGN.md "Semantics"; specs/gke-l4.md §2–3): Cluster → every eligible
 *     node, a stable subset above `clusterBackendLimit`; Local → nodes hosting at least one
 *     non-terminating endpoint (readiness is the health check's business, as in GKE's
 *     LocalL4EndpointsCalculator), at most `localBackendLimit`; when no node has one,
 *     nodes with serving-but-terminating endpoints, rather than dropping traffic;
 *   - weights: `networking.gke.io/weighted-load-balancing: pods-per-node` under Local →
 *     ready local endpoints; ignored (with a warning) under Cluster, as GKE does;
 *   - zonal affinity: `spec.trafficDistribution` PreferClose / PreferSameZone / PreferSameNode;
 *   - source ranges: `spec.loadBalancerSourceRanges`, else the
 *     `service.beta.kubernetes.io/load-balancer-source-ranges` annotation.
 */

import { endpointsPerNode, mergeServiceEndpoints } from "../endpoints/merge.ts";
import type { EndpointSlice, PasslbConfigSpec, Service } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { SOURCE_RANGES_ANNOTATION } from "../k8s/validate.ts";
import { formatCidr, parseCidr } from "../net/ip.ts";
import { clusterHealthCheck, localHealthCheck } from "./health-checks.ts";
import type { VipAssignment } from "./ipam.ts";
import type { Backend, HealthCheck, Listener, LoadBalancerPlan, PlanIssue } from "./load-balancer-plan.ts";
import type { NodeTable } from "./node-table.ts";
import { nameHash, type SubsetCandidate, stableSubset } from "./subset.ts";

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

export function planService(input: ServicePlanInput): LoadBalancerPlan {
  const { service: svc, nodes, config } = input;
  const key = objectKey(svc.metadata);
  const subject = `Service ${key}`;
  const issues: PlanIssue[] = [...input.vips.issues];
  const issue = (code: string, severity: PlanIssue["severity"], message: string) =>
    issues.push({ code, severity, subject, message });

  const etp = svc.spec.externalTrafficPolicy ?? "Cluster";
  const families = input.vips.families;
  const listeners: Listener[] = svc.spec.ports.map((p) => ({
    name: p.name ?? "",
    protocol: p.protocol,
    port: p.port,
    nodePort: p.nodePort ? p.nodePort : null,
    targetPort: p.targetPort ?? p.port,
  }));

  const merged = mergeServiceEndpoints(input.slices);
  for (const f of merged.findings) issue(f.code, "warning", f.message);
  const perNode = endpointsPerNode(merged.ports);
  const anyReady = [...perNode.values()].some((n) => n.ready > 0);

  const weightedAsked = svc.metadata.annotations?.[WEIGHTED_ANNOTATION] === "pods-per-node";
  const weighted = weightedAsked && etp === "Local";
  if (weightedAsked && etp !== "Local")
    issue(
      "weighted_ignored_cluster_policy",
      "warning",
      `${WEIGHTED_ANNOTATION}: pods-per-node only applies with externalTrafficPolicy: Local (GKE ignores it too); all nodes get equal weight`,
    );
  else if (svc.metadata.annotations?.[WEIGHTED_ANNOTATION] !== undefined && !weightedAsked)
    issue(
      "weighted_unknown_value",
      "warning",
      `${WEIGHTED_ANNOTATION} must be "pods-per-node"; the annotation is ignored`,
    );

  // Candidates: eligible nodes that have an address in one of the Service's families.
  const hasFamily = (i: number) => families.some((f) => nodes.facts[i]!.addresses[f] !== undefined);
  const included = new Map<number, Backend>();
  const excludedKind = new Map<number, "not_in_subset" | "no_local_endpoints" | "no_address_for_family">();
  const serviceHash = nameHash(`${svc.metadata.name}/${svc.metadata.namespace}`);
  const previous = new Set<number>();
  for (const name of input.previousMembers ?? []) {
    const i = nodes.index.get(name);
    if (i !== undefined) previous.add(i);
  }

  if (etp === "Cluster") {
    const candidates: SubsetCandidate[] = [];
    nodes.facts.forEach((f, i) => {
      if (!f.eligible) return;
      if (!hasFamily(i)) excludedKind.set(i, "no_address_for_family");
      else candidates.push({ index: i, zone: f.zone, hash: nodes.hashes[i]! });
    });
    const limit = config.clusterBackendLimit;
    const chosen = stableSubset(candidates, limit, serviceHash, previous);
    const subsetting = candidates.length > limit;
    if (subsetting) {
      issue(
        "cluster_subset",
        "info",
        `${candidates.length} eligible nodes exceed clusterBackendLimit ${limit}: a stable per-Service subset of ${chosen.length} carries traffic (split across zones smallest-first, sticky across re-plans)`,
      );
      const chosenSet = new Set(chosen);
      for (const c of candidates) if (!chosenSet.has(c.index)) excludedKind.set(c.index, "not_in_subset");
      for (const i of chosen) {
        const b = { ...nodes.shared(i, "eligible", families), reason: "in_subset" as const };
        const entry = {
          ...b,
          explanation: `in this Service's stable subset of ${chosen.length} of ${candidates.length} eligible nodes`,
        };
        included.set(i, entry);
      }
    } else for (const i of chosen) included.set(i, nodes.shared(i, "eligible", families));
    if (candidates.length === 0)
      issue(
        "no_eligible_nodes",
        "error",
        "no eligible node with an address in the Service's families: traffic has nowhere to go",
      );
    else if (!anyReady && ![...perNode.values()].some((n) => n.servingTerminating > 0))
      issue(
        "no_ready_endpoints",
        "warning",
        "the Service has no ready endpoint: nodes accept connections and then reject them",
      );
  } else {
    const live: SubsetCandidate[] = [];
    const draining: SubsetCandidate[] = [];
    nodes.facts.forEach((f, i) => {
      if (!f.eligible) return;
      const counts = perNode.get(f.name);
      if (!counts || (counts.nonTerminating === 0 && counts.servingTerminating === 0)) {
        excludedKind.set(i, "no_local_endpoints");
        return;
      }
      if (!hasFamily(i)) excludedKind.set(i, "no_address_for_family");
      else
        (counts.nonTerminating > 0 ? live : draining).push({
          index: i,
          zone: f.zone,
          hash: nodes.hashes[i]!,
        });
    });
    const fallback = live.length === 0 && draining.length > 0;
    const pool = fallback ? draining : live;
    if (fallback)
      issue(
        "terminating_fallback",
        "warning",
        "no node has a non-terminating endpoint: nodes with serving, terminating endpoints carry traffic rather than dropping it",
      );
    for (const c of fallback ? live : draining) excludedKind.set(c.index, "no_local_endpoints");
    const limit = config.localBackendLimit;
    const chosen = new Set(stableSubset(pool, limit, serviceHash, previous));
    if (pool.length > limit)
      issue(
        "local_backend_limit",
        "warning",
        `${pool.length} nodes host endpoints, above localBackendLimit ${limit}: ${limit} are used`,
      );
    for (const c of pool) {
      const f = nodes.facts[c.index]!;
      const counts = perNode.get(f.name)!;
      const base = nodes.shared(c.index, "eligible", families);
      const inLimit = chosen.has(c.index);
      const entry: Backend = {
        ...base,
        included: inLimit,
        reason: !inLimit
          ? "over_local_limit"
          : fallback
            ? "only_terminating_endpoints"
            : "has_local_endpoints",
        weight: !inLimit ? 0 : weighted ? counts.ready : 1,
        localReadyEndpoints: counts.ready,
        explanation: !inLimit
          ? `hosts endpoints, but localBackendLimit ${limit} is reached`
          : fallback
            ? `hosts ${counts.servingTerminating} serving but terminating endpoint(s); used because no node has a non-terminating one`
            : `hosts ${counts.nonTerminating} non-terminating endpoint(s), ${counts.ready} ready` +
              (weighted ? `; weight ${counts.ready} (pods-per-node)` : "") +
              (f.ready ? "" : "; node not Ready, kept as a member: the health check decides (KEP-3458)"),
      };
      if (inLimit) included.set(c.index, entry);
      else excludedKind.set(c.index, "no_local_endpoints");
    }
    if (!anyReady)
      issue(
        "no_ready_endpoints",
        "warning",
        "externalTrafficPolicy Local and no ready endpoint: every node fails the health check (GKE shows 0/N healthy)",
      );
  }

  const healthChecks: HealthCheck[] = [];
  if (listeners.length > 0) {
    if (etp === "Local") {
      const hcnp = svc.spec.healthCheckNodePort || input.healthCheckNodePort;
      if (hcnp) healthChecks.push(localHealthCheck(listeners, hcnp, weighted));
    } else healthChecks.push(clusterHealthCheck(listeners));
  }
  if (etp === "Local" && !svc.spec.healthCheckNodePort && input.healthCheckNodePort)
    issue(
      "health_check_node_port_allocated",
      "info",
      `spec.healthCheckNodePort is unset: ${input.healthCheckNodePort} was chosen from the node port range (the API server would allocate one)`,
    );

  const dist = svc.spec.trafficDistribution;
  const zonalAffinity = dist === "PreferClose" || dist === "PreferSameZone" || dist === "PreferSameNode";
  if (zonalAffinity && config.zones.length === 0)
    issue(
      "zonal_affinity_without_client_zones",
      "warning",
      `trafficDistribution: ${dist} asks for zonal affinity, but PasslbConfig maps no client CIDRs to zones: clients go to every zone`,
    );

  const sessionAffinity =
    svc.spec.sessionAffinity === "ClientIP"
      ? {
          type: "ClientIP" as const,
          timeoutSeconds: svc.spec.sessionAffinityConfig?.clientIP?.timeoutSeconds ?? 10800,
        }
      : { type: "None" as const, timeoutSeconds: null };

  const rangesText =
    svc.spec.loadBalancerSourceRanges && svc.spec.loadBalancerSourceRanges.length > 0
      ? svc.spec.loadBalancerSourceRanges
      : (svc.metadata.annotations?.[SOURCE_RANGES_ANNOTATION]?.split(",") ?? []);
  const sourceRanges = rangesText.flatMap((r) => {
    const c = parseCidr(r.trim(), true);
    return c ? [formatCidr(c)] : [];
  });
  if (
    sourceRanges.length > 0 &&
    !families.some((f) => sourceRanges.some((r) => r.includes(":") === (f === "IPv6")))
  )
    issue(
      "source_ranges_family_mismatch",
      "warning",
      "loadBalancerSourceRanges has no range of the Service's families: every client is dropped",
    );

  const order = nodes.facts.map((_, i) => i);
  const kindOf = excludedKind;
  const backends = (): Backend[] =>
    order.map(
      (i) =>
        included.get(i) ??
        nodes.ineligible[i] ??
        nodes.shared(i, kindOf.get(i) ?? "no_local_endpoints", families),
    );

  const plan = {
    service: key,
    uid: svc.metadata.uid,
    externalTrafficPolicy: etp,
    ipFamilies: families,
    vips: input.vips.vips,
    listeners,
    backends: [] as readonly Backend[],
    members: [] as readonly Backend[],
    healthChecks,
    weighted,
    zonalAffinity,
    sessionAffinity,
    sourceRanges,
    ipMode: input.ipMode,
    issues,
  };
  // Every node appears in `backends`; it is built on first read, since most consumers
  // need only the members (`members`) and 10,000 Services × 5,000 nodes add up.
  let cached: Backend[] | undefined;
  Object.defineProperty(plan, "backends", { enumerable: true, get: () => (cached ??= backends()) });
  const members = [...included.entries()].sort((a, b) => a[0] - b[0]).map(([, b]) => b);
  Object.defineProperty(plan, "members", { enumerable: false, value: members });
  return plan as LoadBalancerPlan;
}
