/**
 * The members step of planService: which nodes carry a Service's traffic, with what weight,
 * and why each other node is left out. Cluster → every eligible node with an address in the
 * Service's families, a stable subset above `clusterBackendLimit`; Local → nodes hosting at
 * least one non-terminating endpoint (readiness is the health check's business, as in GKE's
 * LocalL4EndpointsCalculator, kubernetes/ingress-gce `pkg/neg/syncers/endpoints_calculator.go`),
 * at most `localBackendLimit`; when no node has one, nodes with serving-but-terminating
 * endpoints, rather than dropping traffic (docs/plan.md "The rules").
 */

import type { NodeEndpointCounts } from "../endpoints/merge.ts";
import type { IpFamily } from "../net/ip.ts";
import type { Backend } from "./load-balancer-plan.ts";
import type { NodeTable } from "./node-table.ts";
import { NO_ISSUES, type PlanStep, type StepIssue, step } from "./plan-step.ts";
import { localExplanation, subsetMessage } from "./shared-texts.ts";
import { type SubsetCandidate, stableSubset, stableSubsetOfZones } from "./subset.ts";

const NO_PREVIOUS: ReadonlySet<number> = new Set();

export interface EndpointCounts {
  readonly perNode: ReadonlyMap<string, NodeEndpointCounts>;
  readonly anyReady: boolean;
  readonly anyServingTerminating: boolean;
}

export interface MembersInput {
  readonly nodes: NodeTable;
  readonly families: readonly IpFamily[];
  readonly etp: "Cluster" | "Local";
  readonly counts: EndpointCounts;
  readonly weighted: boolean;
  readonly clusterBackendLimit: number;
  readonly localBackendLimit: number;
  /** the Service's subset hash, computed only when a subset is needed */
  readonly serviceHash: () => number;
  /** node names included by the previous plan (subsets are sticky) */
  readonly previousMembers: ReadonlySet<string> | undefined;
}

export interface Members {
  /** the included backends, in node-table order */
  readonly members: Backend[];
  /** every node, included or not, in node-table order: built when called */
  readonly backends: () => Backend[];
}

/**
 * Entries that are the same for every Service come from the node table; only
 * Service-specific ones (Local members) are made here. Nodes left out are derived when
 * `backends` is called, so no per-node state is kept per Service.
 */
export function planMembers(input: MembersInput): PlanStep<Members> {
  const { nodes, families } = input;
  const wantedMask = familyMask(families);
  const chosen = input.etp === "Cluster" ? clusterMembers(input) : localMembers(input, wantedMask);
  const { subset, specific } = chosen.value;
  const backendOf = (i: number, memberSet: ReadonlySet<number> | undefined): Backend => {
    const ineligible = nodes.ineligible[i];
    if (ineligible) return ineligible;
    if ((nodes.familyMask[i]! & wantedMask) === 0) return nodes.shared(i, "no_address_for_family", families);
    if (input.etp === "Local") return specific.get(i) ?? nodes.shared(i, "no_local_endpoints", families);
    if (!memberSet) return nodes.shared(i, "eligible", families);
    return nodes.shared(i, memberSet.has(i) ? "in_subset" : "not_in_subset", families);
  };
  const backends = (): Backend[] => {
    const memberSet = subset ? new Set(subset) : undefined;
    return nodes.facts.map((_, i) => backendOf(i, memberSet));
  };
  return step({ members: chosen.value.members, backends }, chosen.issues);
}

interface Chosen {
  readonly members: Backend[];
  /** Cluster above the limit: the chosen node indices, ascending */
  readonly subset: Int32Array | undefined;
  /** Local: members and nodes with endpoints that were still left out, by node index */
  readonly specific: ReadonlyMap<number, Backend>;
}

const NO_SPECIFIC: ReadonlyMap<number, Backend> = new Map();

function familyMask(families: readonly IpFamily[]): number {
  return (families.includes("IPv4") ? 1 : 0) | (families.includes("IPv6") ? 2 : 0);
}

function previousIndices(
  nodes: NodeTable,
  previousMembers: ReadonlySet<string> | undefined,
): ReadonlySet<number> {
  if (!previousMembers) return NO_PREVIOUS;
  const found = new Set<number>();
  for (const name of previousMembers) {
    const i = nodes.index.get(name);
    if (i !== undefined) found.add(i);
  }
  return found;
}

function clusterMembers(input: MembersInput): PlanStep<Chosen> {
  const { nodes, families, counts } = input;
  const issues: StepIssue[] = [];
  const cluster = nodes.clusterCandidates(families);
  const limit = input.clusterBackendLimit;
  let members: Backend[];
  let subset: Int32Array | undefined;
  if (cluster.candidates.length > limit) {
    const previous = previousIndices(nodes, input.previousMembers);
    subset = Int32Array.from(stableSubsetOfZones(cluster.zones, limit, input.serviceHash(), previous)).sort();
    const inSubset = nodes.sharedAll("in_subset", families);
    members = [];
    for (let k = 0; k < subset.length; k++) members.push(inSubset[subset[k]!]!);
    issues.push({
      code: "cluster_subset",
      severity: "info",
      message: subsetMessage(cluster.candidates.length, limit, subset.length),
    });
  } else members = cluster.all as Backend[];
  if (cluster.candidates.length === 0)
    issues.push({
      code: "no_eligible_nodes",
      severity: "error",
      message: "no eligible node with an address in the Service's families: traffic has nowhere to go",
    });
  else if (!counts.anyReady && !counts.anyServingTerminating)
    issues.push({
      code: "no_ready_endpoints",
      severity: "warning",
      message: "the Service has no ready endpoint: nodes accept connections and then reject them",
    });
  return step({ members, subset, specific: NO_SPECIFIC }, issues.length > 0 ? issues : NO_ISSUES);
}

/** Local: the nodes (and their counts) hosting non-terminating, else serving-terminating
 * endpoints, in the order the merge met them */
function localPool(input: MembersInput, wantedMask: number) {
  const { nodes } = input;
  const live: number[] = [];
  const liveCounts: NodeEndpointCounts[] = [];
  const draining: number[] = [];
  const drainingCounts: NodeEndpointCounts[] = [];
  for (const [name, counts] of input.counts.perNode) {
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
  return { fallback, pool: fallback ? draining : live, poolCounts: fallback ? drainingCounts : liveCounts };
}

function localMembers(input: MembersInput, wantedMask: number): PlanStep<Chosen> {
  const { nodes, weighted } = input;
  const issues: StepIssue[] = [];
  const { fallback, pool, poolCounts } = localPool(input, wantedMask);
  if (fallback)
    issues.push({
      code: "terminating_fallback",
      severity: "warning",
      message:
        "no node has a non-terminating endpoint: nodes with serving, terminating endpoints carry traffic rather than dropping it",
    });
  const limit = input.localBackendLimit;
  // all of them while under the limit (the usual case): no subset to compute
  const chosen =
    pool.length > limit
      ? new Set(
          stableSubset(
            pool.map(
              (i): SubsetCandidate => ({ index: i, zone: nodes.facts[i]!.zone, hash: nodes.hashes[i]! }),
            ),
            limit,
            input.serviceHash(),
            previousIndices(nodes, input.previousMembers),
          ),
        )
      : undefined;
  if (pool.length > limit)
    issues.push({
      code: "local_backend_limit",
      severity: "warning",
      message: `${pool.length} nodes host endpoints, above localBackendLimit ${limit}: ${limit} are used`,
    });
  const specific = new Map<number, Backend>();
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
      reason: !inLimit ? "over_local_limit" : fallback ? "only_terminating_endpoints" : "has_local_endpoints",
      explanation,
    });
  }
  const members: Backend[] = [];
  for (const index of Int32Array.from(pool).sort()) {
    const b = specific.get(index)!;
    if (b.included) members.push(b);
  }
  if (!input.counts.anyReady)
    issues.push({
      code: "no_ready_endpoints",
      severity: "warning",
      message:
        "externalTrafficPolicy Local and no ready endpoint: every node fails the health check (GKE shows 0/N healthy)",
    });
  return step({ members, subset: undefined, specific }, issues.length > 0 ? issues : NO_ISSUES);
}
