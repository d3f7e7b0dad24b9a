/**
 * The three node predicates GKE's L4 paths use (docs/providers-gke.md), each returning the
 * reason a node is left out, or undefined when it is in:
 * - `ccmStableNodeReason`: cloud-provider's stable node set (target pools, CCM ILB groups);
 *   unready nodes stay (KEP-3458); the exclude label is parsed as a bool from k8s 1.34.
 * - `candidateNodeReason(node, false)`: ingress-gce CandidateNodesFilter (RBS instance groups,
 *   NetLB NEG zone linking): Ready must be True.
 * - `candidateNodeReason(node, true)`: CandidateAndUnreadyNodesFilter (all GCE_VM_IP NEG
 *   membership): unready nodes stay, drain-labelled nodes go.
 * Plus `negNodeReason`: what the NEG zone getter needs (providerID zone, podCIDR).
 * Multi-subnet clusters are not modelled: every node is in the default subnet.
 */
import type { Node } from "../../k8s/objects.ts";
import {
  EXCLUDE_LB_LABEL,
  LEGACY_ZONE_LABEL,
  nodeFacts,
  TO_BE_DELETED_TAINT,
  ZONE_LABEL,
} from "../../plan/node-facts.ts";

export const EXCLUDE_BALANCER_ALPHA_LABEL = "alpha.service-controller.kubernetes.io/exclude-balancer";
export const MASTER_ROLE_LABEL = "node-role.kubernetes.io/master";
export const GKE_OPERATION_LABEL = "operation.gke.io/type";

export interface ProviderId {
  readonly project: string;
  readonly zone: string;
  readonly instance: string;
}

/** `gce://project/zone/name` (spec §2: anything else cannot be placed in a NEG). */
export function parseProviderId(providerId: string | undefined): ProviderId | undefined {
  const m = /^gce:\/\/([^/]*)\/([^/]*)\/([^/]+)$/.exec(providerId ?? "");
  if (!m) return undefined;
  return { project: m[1]!, zone: m[2]!, instance: m[3]! };
}

/** The zone an instance group or target pool member is in: the providerID's, else the zone label. */
export function nodeZone(node: Node): string {
  const labels = node.metadata.labels ?? {};
  return parseProviderId(node.spec.providerID)?.zone || labels[ZONE_LABEL] || labels[LEGACY_ZONE_LABEL] || "";
}

const hasTaint = (node: Node, key: string) => (node.spec.taints ?? []).some((t) => t.key === key);

/**
 * The stable node set is node-facts.ts's eligibility rule (Kubernetes ≥ 1.34); before 1.34
 * the exclude label excluded on presence. `k8sMinor`: GKE 1.34.x runs Kubernetes 1.34.
 */
export function ccmStableNodeReason(node: Node, k8sMinor: number): string | undefined {
  if (
    k8sMinor < 34 &&
    !node.metadata.deletionTimestamp &&
    node.metadata.labels?.[EXCLUDE_LB_LABEL] !== undefined
  )
    return `labelled ${EXCLUDE_LB_LABEL} (presence excludes before Kubernetes 1.34)`;
  return nodeFacts(node).exclusion?.detail;
}

export function candidateNodeReason(node: Node, includeUnready: boolean): string | undefined {
  const labels = node.metadata.labels ?? {};
  if (hasTaint(node, TO_BE_DELETED_TAINT)) return `it has the ${TO_BE_DELETED_TAINT} taint`;
  if (labels[MASTER_ROLE_LABEL] !== undefined) return `it has the label ${MASTER_ROLE_LABEL}`;
  for (const label of [EXCLUDE_BALANCER_ALPHA_LABEL, EXCLUDE_LB_LABEL])
    if (labels[label] !== undefined)
      return `it has the label ${label} (ingress-gce: presence excludes, any value)`;
  if ((node.status.conditions ?? []).length === 0) return "it reports no status conditions";
  if (!includeUnready && !nodeFacts(node).ready) return "it is not Ready";
  if (includeUnready && labels[GKE_OPERATION_LABEL] === "drain")
    return `it has the label ${GKE_OPERATION_LABEL}=drain (GKE upgrade or resize drain)`;
  return undefined;
}

export function negNodeReason(node: Node): string | undefined {
  if (!node.spec.providerID) return "it has no spec.providerID";
  const id = parseProviderId(node.spec.providerID);
  if (!id) return `its providerID "${node.spec.providerID}" is not gce://project/zone/name`;
  if (!id.zone) return "its providerID has an empty zone";
  if (!node.spec.podCIDR) return "it has no spec.podCIDR";
  return undefined;
}
