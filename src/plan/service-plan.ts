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

import type { NodeEndpointCounts } from "../endpoints/merge.ts";
import { endpointCountsByNodePerFamily, IP_FAMILIES } from "../endpoints/merge-by-family.ts";
import type { EndpointSlice, PasslbConfigSpec, Service } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { SOURCE_RANGES_ANNOTATION } from "../k8s/validate.ts";
import { formatCidr, parseCidr } from "../net/ip.ts";
import { azureListenerChecks, hasAzureProbeAnnotations, noLbRulePorts } from "./azure-listener-checks.ts";
import { clusterHealthCheck, localHealthCheck } from "./health-checks.ts";
import type { VipAssignment } from "./ipam.ts";
import type { PlanIssueCode } from "./issue-codes.ts";
import {
  type Backend,
  type HealthCheck,
  type Listener,
  type LoadBalancerPlan,
  listenerKey,
  type PlanIssue,
} from "./load-balancer-plan.ts";
import type { NodeTable } from "./node-table.ts";
import { localExplanation, subsetMessage } from "./shared-texts.ts";
import { nameHash, type SubsetCandidate, stableSubset, stableSubsetOfZones } from "./subset.ts";

export const WEIGHTED_ANNOTATION = "networking.gke.io/weighted-load-balancing";

const NO_PREVIOUS: ReadonlySet<number> = new Set();

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
  let subject: string | undefined; // made on the first issue: many Services have none
  const issues: PlanIssue[] = [...input.vips.issues];
  const issue = (code: PlanIssueCode, severity: PlanIssue["severity"], message: string) => {
    subject ??= `Service ${key}`;
    issues.push({ code, severity, subject, message });
  };

  const etp = svc.spec.externalTrafficPolicy ?? "Cluster";
  const families = input.vips.families;
  const dropped = noLbRulePorts(svc);
  for (const port of dropped)
    issue(
      "listener_skipped_no_lb_rule",
      "info",
      `port ${port}: service.beta.kubernetes.io/port_${port}_no_lb_rule is true, so passlb does not listen on it (as AKS)`,
    );
  const listeners: Listener[] = svc.spec.ports
    .filter((p) => !dropped.has(p.port))
    .map((p) => ({
      name: p.name ?? "",
      protocol: p.protocol,
      port: p.port,
      nodePort: p.nodePort ? p.nodePort : null,
      targetPort: p.targetPort ?? p.port,
    }));

  // per-node counts decide Local membership; Cluster needs only whether any endpoint is ready.
  // Per family, as kube-proxy's per-family proxiers count (merge-by-family.ts): only the
  // Service's families, and a dual-stack pod is one endpoint, not two.
  const { perNode, anyReady, anyServingTerminating, findings } = endpointCountsByNodePerFamily(
    input.slices,
    families.length > 0 ? families : IP_FAMILIES,
    etp === "Local",
  );
  for (const f of findings) issue(f.code, "warning", f.message);

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

  // Members. Entries that are the same for every Service come from the node table; only
  // Service-specific ones (Local members) are made here. Nodes left out are derived when
  // `backends` is first read, so no per-node state is kept per Service.
  const wantedMask = (families.includes("IPv4") ? 1 : 0) | (families.includes("IPv6") ? 2 : 0);
  const hasFamily = (i: number) => (nodes.familyMask[i]! & wantedMask) !== 0;
  const serviceHash = () => nameHash(`${svc.metadata.name}/${svc.metadata.namespace}`);
  let previous = NO_PREVIOUS;
  if (input.previousMembers) {
    const found = new Set<number>();
    for (const name of input.previousMembers) {
      const i = nodes.index.get(name);
      if (i !== undefined) found.add(i);
    }
    previous = found;
  }
  let members: Backend[];
  /** Local: members and nodes with endpoints that were still left out, by node index */
  const specific = new Map<number, Backend>();
  let subsetting = false;
  /** Cluster above the limit: the chosen node indices, ascending */
  let chosen: Int32Array | undefined;

  if (etp === "Cluster") {
    const cluster = nodes.clusterCandidates(families);
    const limit = config.clusterBackendLimit;
    subsetting = cluster.candidates.length > limit;
    if (subsetting) {
      chosen = Int32Array.from(stableSubsetOfZones(cluster.zones, limit, serviceHash(), previous)).sort();
      const inSubset = nodes.sharedAll("in_subset", families);
      members = [];
      for (let k = 0; k < chosen.length; k++) members.push(inSubset[chosen[k]!]!);
      issue("cluster_subset", "info", subsetMessage(cluster.candidates.length, limit, chosen.length));
    } else members = cluster.all as Backend[];
    if (cluster.candidates.length === 0)
      issue(
        "no_eligible_nodes",
        "error",
        "no eligible node with an address in the Service's families: traffic has nowhere to go",
      );
    else if (!anyReady && !anyServingTerminating)
      issue(
        "no_ready_endpoints",
        "warning",
        "the Service has no ready endpoint: nodes accept connections and then reject them",
      );
  } else {
    // node indices (and their counts) hosting non-terminating, else serving-terminating
    // endpoints, in the order the merge met them
    const live: number[] = [];
    const liveCounts: NodeEndpointCounts[] = [];
    const draining: number[] = [];
    const drainingCounts: NodeEndpointCounts[] = [];
    for (const [name, counts] of perNode) {
      const i = nodes.index.get(name);
      if (i === undefined || (nodes.usableMask[i]! & wantedMask) === 0) continue; // ineligible or no family
      if (counts.nonTerminating > 0) {
        live.push(i);
        liveCounts.push(counts);
      } else if (counts.servingTerminating > 0) {
        draining.push(i);
        drainingCounts.push(counts);
      }
    }
    const fallback = live.length === 0 && draining.length > 0;
    const pool = fallback ? draining : live;
    const poolCounts = fallback ? drainingCounts : liveCounts;
    if (fallback)
      issue(
        "terminating_fallback",
        "warning",
        "no node has a non-terminating endpoint: nodes with serving, terminating endpoints carry traffic rather than dropping it",
      );
    const limit = config.localBackendLimit;
    // all of them while under the limit (the usual case): no subset to compute
    const chosen =
      pool.length > limit
        ? new Set(
            stableSubset(
              pool.map(
                (i): SubsetCandidate => ({ index: i, zone: nodes.facts[i]!.zone, hash: nodes.hashes[i]! }),
              ),
              limit,
              serviceHash(),
              previous,
            ),
          )
        : undefined;
    if (pool.length > limit)
      issue(
        "local_backend_limit",
        "warning",
        `${pool.length} nodes host endpoints, above localBackendLimit ${limit}: ${limit} are used`,
      );
    for (let k = 0; k < pool.length; k++) {
      const index = pool[k]!;
      const f = nodes.facts[index]!;
      const counts = poolCounts[k]!;
      const inLimit = chosen === undefined || chosen.has(index);
      const explanation = !inLimit
        ? `hosts endpoints, but localBackendLimit ${limit} is reached`
        : fallback
          ? `hosts ${counts.servingTerminating} serving but terminating endpoint(s); used because no node has a non-terminating one`
          : localExplanation(counts.nonTerminating, counts.ready, weighted, f.ready);
      // same key order as the node table's shared entries, so the JSON reads alike
      specific.set(index, {
        node: f.name,
        zone: f.zone,
        addresses: f.addresses,
        weight: !inLimit ? 0 : weighted ? counts.ready : 1,
        ready: f.ready,
        localReadyEndpoints: counts.ready,
        included: inLimit,
        reason: !inLimit
          ? "over_local_limit"
          : fallback
            ? "only_terminating_endpoints"
            : "has_local_endpoints",
        explanation,
      });
    }
    members = [];
    for (const index of Int32Array.from(pool).sort()) {
      const b = specific.get(index)!;
      if (b.included) members.push(b);
    }
    if (!anyReady)
      issue(
        "no_ready_endpoints",
        "warning",
        "externalTrafficPolicy Local and no ready endpoint: every node fails the health check (GKE shows 0/N healthy)",
      );
  }

  const healthChecks: HealthCheck[] = [];
  const azure = hasAzureProbeAnnotations(svc);
  if (listeners.length > 0) {
    if (etp === "Local") {
      const hcnp = svc.spec.healthCheckNodePort || input.healthCheckNodePort;
      if (hcnp) healthChecks.push(localHealthCheck(listeners, hcnp, weighted));
      if (azure)
        issue(
          "azure_probes_ignored_local",
          "info",
          "Azure probe annotations are ignored under externalTrafficPolicy Local: the healthCheckNodePort check gates every listener",
        );
    } else if (azure) {
      const a = azureListenerChecks(svc, listeners);
      for (const i of a.issues) issue(i.code, i.severity, i.message);
      healthChecks.push(...a.checks);
      const rest = listeners.filter((l) => a.fallback.includes(listenerKey(l)));
      if (rest.length > 0) healthChecks.push(clusterHealthCheck(rest));
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

  const backendOf = (i: number, memberSet: ReadonlySet<number> | undefined): Backend => {
    const ineligible = nodes.ineligible[i];
    if (ineligible) return ineligible;
    if (!hasFamily(i)) return nodes.shared(i, "no_address_for_family", families);
    if (etp === "Local") return specific.get(i) ?? nodes.shared(i, "no_local_endpoints", families);
    if (!memberSet) return nodes.shared(i, "eligible", families);
    return nodes.shared(i, memberSet.has(i) ? "in_subset" : "not_in_subset", families);
  };
  const backends = (): Backend[] => {
    const memberSet = chosen ? new Set(chosen) : undefined;
    return nodes.facts.map((_, i) => backendOf(i, memberSet));
  };

  // Every node appears in `backends`; it is built on first read, since most consumers
  // need only the members (`members`) and 10,000 Services × 5,000 nodes add up.
  let cached: Backend[] | undefined;
  const plan = {
    service: key,
    uid: svc.metadata.uid,
    externalTrafficPolicy: etp,
    ipFamilies: families,
    vips: input.vips.vips,
    listeners,
    get backends(): readonly Backend[] {
      cached ??= backends();
      return cached;
    },
    healthChecks,
    weighted,
    zonalAffinity,
    sessionAffinity,
    sourceRanges,
    ipMode: input.ipMode,
    issues,
  };
  // `members` repeats part of `backends`: there for consumers, left out of the JSON
  Object.defineProperty(plan, "members", {
    enumerable: false,
    writable: true,
    configurable: true,
    value: members,
  });
  return plan as unknown as LoadBalancerPlan;
}
