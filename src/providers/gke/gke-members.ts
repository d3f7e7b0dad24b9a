/**
 * Which nodes back a Service on each GKE path (docs/providers-gke.md): target-pool instances
 * and CCM ILB instance groups from the stable node set; RBS instance groups from
 * CandidateNodesFilter; GCE_VM_IP NEGs from CandidateAndUnreadyNodesFilter with the
 * wanted-count formulas and the sticky hash subset of gke-subset.ts. Every node gets a
 * decision with its reason. Endpoint counts are read from the EndpointSlices given.
 * Not modelled: multi-subnet NEGs (one default-subnet NEG per zone).
 */
import { endpointCountsByNode } from "../../endpoints/merge.ts";
import type { EndpointSlice, Node, Service } from "../../k8s/objects.ts";
import type { ControllerChoice } from "./gke-controller-choice.ts";
import {
  candidateNodeReason,
  ccmStableNodeReason,
  GKE_OPERATION_LABEL,
  negNodeReason,
  nodeZone,
} from "./gke-node-filters.ts";
import {
  ILB_LOCAL_MAX,
  NETLB_LOCAL_MAX,
  subsetPerZone,
  subsetSalt,
  wantedIlbCluster,
  wantedNetlbCluster,
} from "./gke-subset.ts";
import type { GkeOptions, InstanceGroup, NetworkEndpointGroup, NodeDecision } from "./gke-types.ts";

/** Prior NEG state, given on the Service: `zone-a=node1,node2;zone-b=node3`. */
export const CURRENT_NEG_MEMBERS_ANNOTATION = "passlb.io/gke-current-neg-members";
const CCM_IG_MAX = 1000;

export interface Members {
  readonly nodes: NodeDecision[];
  readonly negs: NetworkEndpointGroup[];
  readonly instanceGroups: InstanceGroup[];
  readonly targetPoolInstances: string[];
  readonly steps: string[];
  readonly memberCount: number;
}

export function parseCurrentNegMembers(text: string | undefined): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const part of (text ?? "").split(";")) {
    const [zone, list] = part.split("=", 2);
    if (!zone?.trim() || list === undefined) continue;
    out.set(
      zone.trim(),
      list
        .split(",")
        .map((n) => n.trim())
        .filter(Boolean),
    );
  }
  return out;
}

/** E of ingress-gce `wantedExternalEndpointsCount` (endpoints_calculator.go): slice endpoints with nodeName and targetRef, not terminating, counted per slice. */
export function countSliceEndpoints(slices: readonly EndpointSlice[]): number {
  let n = 0;
  for (const s of slices)
    for (const ep of s.endpoints ?? [])
      if (ep.nodeName && ep.targetRef && ep.conditions.terminating !== true) n++;
  return n;
}

function withoutLabel(node: Node, label: string): Node {
  const labels = { ...(node.metadata.labels ?? {}) };
  delete labels[label];
  return { ...node, metadata: { ...node.metadata, labels } };
}

const byName = (a: Node, b: Node) => ((a.metadata.name ?? "") < (b.metadata.name ?? "") ? -1 : 1);

/** In steps: the path decides the member kind — instance groups and target pools from the
 * node filters, or GCE_VM_IP NEGs from candidates → wanted count → per-zone subset. */
export function planMembers(
  choice: ControllerChoice,
  service: Service,
  nodes: readonly Node[],
  slices: readonly EndpointSlice[],
  options: GkeOptions,
  groupName: { neg: string; instanceGroup: string },
): Members {
  const sorted = [...nodes].sort(byName);
  if (choice.path === "target-pool" || choice.path === "ccm-ilb" || choice.path === "rbs-instance-groups")
    return instanceGroupMembers(choice.path, sorted, options, groupName.instanceGroup);
  // GCE_VM_IP NEG paths (subsetting ILB, RBS NetLB with NEGs).
  const ilb = choice.path === "subsetting-ilb";
  const local = service.spec.externalTrafficPolicy === "Local";
  const c = negCandidates(sorted, slices, ilb, local, options);
  const current = parseCurrentNegMembers(service.metadata.annotations?.[CURRENT_NEG_MEMBERS_ANNOTATION]);
  const steps: string[] = [];
  const wanted = wantedNegMembers(c, ilb, local, slices, current, steps);
  const shares = subsetPerZone(
    c.candidatesByZone,
    wanted,
    subsetSalt(service.metadata.namespace ?? "default", service.metadata.name ?? ""),
    current,
  );
  const chosen = new Set(shares.flatMap((s) => s.members));
  for (const s of shares)
    steps.push(
      `Zone ${s.zone}: ${s.candidates} candidate(s), quota ${s.quota}, ${s.members.length} member(s).`,
    );
  const decisions = c.decisions;
  for (const { name, zone } of c.pending) {
    const wasCurrent = current.get(zone)?.includes(name) ?? false;
    decisions.push(
      chosen.has(name)
        ? { name, zone, member: true, reason: wasCurrent ? "member (kept: already in the NEG)" : "member" }
        : {
            name,
            zone,
            member: false,
            reason: "left out: the zone's subset is full (lower hashes and current members first)",
          },
    );
  }
  const negs: NetworkEndpointGroup[] = shares.map((s) => ({
    name: groupName.neg,
    zone: s.zone,
    networkEndpointType: "GCE_VM_IP",
    linked: c.linkedZones.has(s.zone),
    candidates: s.candidates,
    quota: s.quota,
    endpoints: [...s.members].sort().map((instance) => ({ instance })),
  }));
  if (!ilb && negs.some((n) => !n.linked))
    steps.push(
      "NetLB links only zones with a Ready candidate node; the other zones' NEGs are not backends (§2).",
    );
  return {
    nodes: decisions.sort((a, b) => (a.name < b.name ? -1 : 1)),
    negs,
    instanceGroups: [],
    targetPoolInstances: [],
    steps,
    memberCount: chosen.size,
  };
}

/** Target pools and instance groups: the CCM's stable node set or ingress-gce's CandidateNodesFilter (§2). */
function instanceGroupMembers(
  path: "target-pool" | "ccm-ilb" | "rbs-instance-groups",
  sorted: readonly Node[],
  options: GkeOptions,
  groupName: string,
): Members {
  const decisions: NodeDecision[] = [];
  const steps: string[] = [];
  const k8sMinor = options.version.major === 1 ? options.version.minor : 99;
  const ccm = path !== "rbs-instance-groups";
  steps.push(
    ccm
      ? "Members: the cloud-provider stable node set; unready nodes stay in and the health check decides (§2)."
      : "Members: ingress-gce CandidateNodesFilter; only Ready nodes (§2).",
  );
  const byZone = new Map<string, string[]>();
  for (const node of sorted) {
    const name = node.metadata.name ?? "";
    const zone = nodeZone(node);
    const out = ccm ? ccmStableNodeReason(node, k8sMinor) : candidateNodeReason(node, false);
    if (out) decisions.push({ name, zone, member: false, reason: `left out: ${out}` });
    else if (path === "ccm-ilb" && !zone)
      decisions.push({ name, zone, member: false, reason: "left out: no zone, so no instance group" });
    else byZone.set(zone, [...(byZone.get(zone) ?? []), name]);
  }
  const groups: InstanceGroup[] = [];
  for (const [zone, names] of [...byZone.entries()].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const kept = path === "ccm-ilb" ? names.slice(0, CCM_IG_MAX) : names;
    if (kept.length < names.length)
      steps.push(`Zone ${zone}: the CCM caps its instance group at 1000 nodes.`);
    for (const name of names)
      decisions.push(
        kept.includes(name)
          ? { name, zone, member: true, reason: "member" }
          : { name, zone, member: false, reason: "left out: past the 1000-node instance-group cap" },
      );
    if (path !== "target-pool") groups.push({ name: groupName, zone, instances: kept });
  }
  const members = decisions.filter((d) => d.member);
  if (path === "target-pool" && members.length > 200)
    steps.push(
      `The CCM creates the target pool with the first 200 of ${members.length} instances and adds the rest in batches of 1000 (§2).`,
    );
  return {
    nodes: decisions.sort((a, b) => (a.name < b.name ? -1 : 1)),
    negs: [],
    instanceGroups: groups,
    targetPoolInstances:
      path === "target-pool" ? members.map((d) => `zones/${d.zone}/instances/${d.name}`).sort() : [],
    steps,
    memberCount: members.length,
  };
}

interface NegCandidates {
  /** nodes already decided (left out), in name order */
  readonly decisions: NodeDecision[];
  readonly candidatesByZone: Map<string, string[]>;
  /** zones with a node the backend service links (NetLB: a Ready candidate) */
  readonly linkedZones: Set<string>;
  /** candidates awaiting the subset, in name order */
  readonly pending: { name: string; zone: string }[];
  /** nodes hosting a non-terminating endpoint */
  readonly hosting: ReadonlyMap<string, unknown>;
}

/** CandidateAndUnreadyNodesFilter (and, under Local, the nodes hosting endpoints). */
function negCandidates(
  sorted: readonly Node[],
  slices: readonly EndpointSlice[],
  ilb: boolean,
  local: boolean,
  options: GkeOptions,
): NegCandidates {
  const decisions: NodeDecision[] = [];
  const includeDrain = local && options.flags["enable-l4-neg-local-include-drain-nodes"];
  const hosting = new Map([...endpointCountsByNode(slices).perNode].filter(([, c]) => c.nonTerminating > 0));
  const candidatesByZone = new Map<string, string[]>();
  const linkedZones = new Set<string>();
  const pending: { name: string; zone: string }[] = [];
  for (const node of sorted) {
    const name = node.metadata.name ?? "";
    const zone = nodeZone(node);
    // CandidateAndDrainingNodesFilter: with the flag, Local NEGs keep drain-labelled nodes that host pods.
    const keepDraining =
      includeDrain && node.metadata.labels?.[GKE_OPERATION_LABEL] === "drain" && hosting.has(name);
    const out =
      candidateNodeReason(keepDraining ? withoutLabel(node, GKE_OPERATION_LABEL) : node, true) ??
      negNodeReason(node);
    if (out) {
      decisions.push({ name, zone, member: false, reason: `left out: ${out}` });
      continue;
    }
    if (!candidatesByZone.has(zone)) candidatesByZone.set(zone, []);
    if (ilb || candidateNodeReason(node, false) === undefined) linkedZones.add(zone);
    if (local && !hosting.has(name)) {
      decisions.push({
        name,
        zone,
        member: false,
        reason: "left out: hosts no non-terminating endpoint (eTP Local)",
      });
      continue;
    }
    candidatesByZone.get(zone)!.push(name);
    pending.push({ name, zone });
  }
  return { decisions, candidatesByZone, linkedZones, pending, hosting };
}

/** The wanted member count (ingress-gce `wantedInternalEndpointsCount`, `wantedExternalEndpointsCount`), explained in `steps`. */
function wantedNegMembers(
  c: NegCandidates,
  ilb: boolean,
  local: boolean,
  slices: readonly EndpointSlice[],
  current: ReadonlyMap<string, readonly string[]>,
  steps: string[],
): number {
  const zoneCount = [...c.candidatesByZone.values()].length;
  if (local) {
    const wanted = ilb ? ILB_LOCAL_MAX : NETLB_LOCAL_MAX;
    steps.push(
      `eTP Local: candidates are the nodes hosting a non-terminating endpoint (readiness not checked), at most ${wanted} (${ilb ? "ILB" : "NetLB"}) (§3.1).`,
    );
    if (c.hosting.size === 0) steps.push("The Service has no such endpoints: the NEGs stay empty.");
    return wanted;
  }
  if (ilb) {
    const wanted = wantedIlbCluster(zoneCount);
    steps.push(
      `ILB eTP Cluster: ${zoneCount} zone(s) with candidates; ${wanted} wanted (24 when the zone count divides 24, else 25) (§3.1).`,
    );
    return wanted;
  }
  const currentCount = [...current.values()].reduce((n, l) => n + l.length, 0);
  const e = countSliceEndpoints(slices);
  const wanted = wantedNetlbCluster(e, zoneCount, currentCount);
  steps.push(
    `NetLB eTP Cluster: wanted = max(min(250, max(E=${e}, 3×P=${3 * zoneCount})), U=${currentCount}) = ${wanted} (§3.1).`,
  );
  return wanted;
}
