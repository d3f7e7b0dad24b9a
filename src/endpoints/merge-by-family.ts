/**
 * kube-proxy merges per IP family: it runs one proxier per family, and each one's
 * EndpointsChangeTracker / EndpointSliceCache takes only the slices whose `addressType` is
 * its own family (kubernetes pkg/proxy/endpointschangetracker.go `EndpointSliceUpdate`:
 * `endpointSlice.AddressType != ect.addressType` → "Ignoring unsupported EndpointSlice";
 * docs/endpointslices.md "`merge`: what a node's proxy uses"), so
 * endpoints, topology choices and the healthCheckNodePort count of one family never see
 * the other's. This module splits a Service's slices by family and merges each part with
 * `merge.ts`; it adds no rule of its own beyond that split and the way the planner folds the
 * families' node counts into its single backend list (below).
 */
import type { EndpointSlice } from "../k8s/objects.ts";
import type { IpFamily } from "../net/ip.ts";
import {
  endpointCountsByNode,
  type MergeFinding,
  mergeServiceEndpoints,
  type NodeEndpointCounts,
  type ServicePortEndpoints,
} from "./merge.ts";

export const IP_FAMILIES: readonly IpFamily[] = ["IPv4", "IPv6"];

/** The slices of one family (FQDN and other address types belong to none). */
export function slicesOfFamily(slices: readonly EndpointSlice[], family: IpFamily): EndpointSlice[] {
  return slices.filter((s) => s.addressType === family);
}

export interface FamilyMerge {
  readonly family: IpFamily;
  readonly ports: ServicePortEndpoints[];
  readonly findings: MergeFinding[];
}

/** One merge per family that has at least one slice, in the order of `families`. */
export function mergeServiceEndpointsByFamily(
  slices: readonly EndpointSlice[],
  families: readonly IpFamily[] = IP_FAMILIES,
): FamilyMerge[] {
  const out: FamilyMerge[] = [];
  for (const family of families) {
    const mine = slicesOfFamily(slices, family);
    if (mine.length === 0) continue;
    out.push({ family, ...mergeServiceEndpoints(mine) });
  }
  return out;
}

/**
 * `endpointCountsByNode` per family, folded into one count per node for a plan that has
 * one backend list for all its families: each field is the largest of the families'
 * counts, never their sum. A dual-stack pod is one endpoint to each family's proxier and
 * one to its health check (weight 1, not 2); a node counts as hosting an endpoint when one
 * of the Service's families has one there. Only slices of `families` (the Service's) count.
 */
export function endpointCountsByNodePerFamily(
  slices: readonly EndpointSlice[],
  families: readonly IpFamily[],
  perNodeWanted = true,
): ReturnType<typeof endpointCountsByNode> {
  const parts = families.map((f) => slicesOfFamily(slices, f)).filter((p) => p.length > 0);
  if (parts.length <= 1) return endpointCountsByNode(parts[0] ?? [], perNodeWanted);
  const results = parts.map((p) => endpointCountsByNode(p, perNodeWanted));
  const perNode = new Map<string, NodeEndpointCounts>();
  for (const r of results)
    for (const [node, c] of r.perNode) {
      const had = perNode.get(node);
      perNode.set(
        node,
        had
          ? {
              ready: Math.max(had.ready, c.ready),
              nonTerminating: Math.max(had.nonTerminating, c.nonTerminating),
              servingTerminating: Math.max(had.servingTerminating, c.servingTerminating),
            }
          : c,
      );
    }
  return {
    perNode,
    anyReady: results.some((r) => r.anyReady),
    anyServingTerminating: results.some((r) => r.anyServingTerminating),
    findings: results.flatMap((r) => r.findings),
  };
}
