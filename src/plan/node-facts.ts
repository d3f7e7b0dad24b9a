/**
 * What the planner needs to know about a Node: its zone, its addresses per family, whether
 * it may carry load-balancer traffic at all, and why not. The eligibility rule is the
 * cloud-provider service controller's stable node set (k8s.io/cloud-provider
 * `controllers/service/controller.go` `stableNodeSetPredicates`): a deletionTimestamp, the
 * `ToBeDeletedByClusterAutoscaler` taint, or the `node.kubernetes.io/exclude-from-external-load-balancers`
 * label (parsed as a boolean since Kubernetes 1.34, PR #131085) take a node out. Unready nodes stay in: the
 * health check decides (KEP-3458).
 */
import type { Node } from "../k8s/objects.ts";
import { canonicalIp } from "../net/ip.ts";

export const ZONE_LABEL = "topology.kubernetes.io/zone";
export const LEGACY_ZONE_LABEL = "failure-domain.beta.kubernetes.io/zone";
export const EXCLUDE_LB_LABEL = "node.kubernetes.io/exclude-from-external-load-balancers";
export const TO_BE_DELETED_TAINT = "ToBeDeletedByClusterAutoscaler";

export type ExclusionReason = "node_deleting" | "node_to_be_deleted" | "node_excluded_by_label";

export interface NodeFacts {
  readonly name: string;
  /** "" when the node has no zone label */
  readonly zone: string;
  readonly addresses: { readonly IPv4?: string; readonly IPv6?: string };
  readonly ready: boolean;
  readonly eligible: boolean;
  readonly exclusion?: { readonly reason: ExclusionReason; readonly detail: string };
}

/** Go's strconv.ParseBool, which Kubernetes uses for the exclude label since 1.34. */
function parseGoBool(value: string): boolean | undefined {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(value)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(value)) return false;
  return undefined;
}

export function nodeFacts(node: Node): NodeFacts {
  const name = node.metadata.name ?? "";
  const labels = node.metadata.labels ?? {};
  const zone = labels[ZONE_LABEL] ?? labels[LEGACY_ZONE_LABEL] ?? "";
  const addresses: { IPv4?: string; IPv6?: string } = {};
  // InternalIP first, then ExternalIP: the address the LB segment reaches (kube-proxy's order).
  for (const type of ["InternalIP", "ExternalIP"]) {
    for (const a of node.status.addresses ?? []) {
      if (a.type !== type) continue;
      const ip = canonicalIp(a.address);
      if (!ip) continue;
      const family = ip.includes(":") ? "IPv6" : "IPv4";
      if (addresses[family] === undefined) addresses[family] = ip;
    }
  }
  const ready = (node.status.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");
  const base = { name, zone, addresses, ready };
  if (node.metadata.deletionTimestamp)
    return {
      ...base,
      eligible: false,
      exclusion: {
        reason: "node_deleting",
        detail: `being deleted since ${node.metadata.deletionTimestamp}`,
      },
    };
  if ((node.spec.taints ?? []).some((t) => t.key === TO_BE_DELETED_TAINT))
    return {
      ...base,
      eligible: false,
      exclusion: {
        reason: "node_to_be_deleted",
        detail: `tainted ${TO_BE_DELETED_TAINT} (cluster autoscaler scale-down)`,
      },
    };
  const exclude = labels[EXCLUDE_LB_LABEL];
  if (exclude !== undefined) {
    const parsed = parseGoBool(exclude);
    if (parsed !== false)
      return {
        ...base,
        eligible: false,
        exclusion: {
          reason: "node_excluded_by_label",
          detail:
            parsed === true
              ? `labelled ${EXCLUDE_LB_LABEL}=${exclude}`
              : `labelled ${EXCLUDE_LB_LABEL}=${JSON.stringify(exclude)}, which is not a boolean (Kubernetes excludes the node)`,
        },
      };
  }
  return { ...base, eligible: true };
}
