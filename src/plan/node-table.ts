/**
 * The nodes of a snapshot, prepared once for planning many Services: facts, a display
 * order (zone, then name), name hashes for subsetting, and the Backend entries that are
 * the same for every Service (an ineligible node, a node outside a subset, a node with no
 * local endpoint), shared so that 10,000 plans over 5,000 nodes stay small.
 */
import type { Node } from "../k8s/objects.ts";
import type { IpFamily } from "../net/ip.ts";
import type { Backend } from "./load-balancer-plan.ts";
import { type NodeFacts, nodeFacts } from "./node-facts.ts";
import { groupByZone, nameHash, type SubsetCandidate, type ZoneGroup } from "./subset.ts";

export interface NodeTable {
  /** sorted by zone, then name */
  readonly facts: readonly NodeFacts[];
  readonly index: ReadonlyMap<string, number>;
  readonly hashes: Uint32Array;
  /** Backend for node i when it is not eligible at all; undefined for eligible nodes */
  readonly ineligible: readonly (Backend | undefined)[];
  readonly shared: (i: number, kind: SharedBackendKind, families: readonly IpFamily[]) => Backend;
  /** `shared` for every node at once, for the kinds planning needs per member */
  readonly sharedAll: (kind: "in_subset" | "eligible", families: readonly IpFamily[]) => readonly Backend[];
  /** bit 1: the node has an IPv4 address, bit 2: IPv6 */
  readonly familyMask: Uint8Array;
  /** `familyMask` for eligible nodes, 0 for the others: one typed-array read per check */
  readonly usableMask: Uint8Array;
  /** eligible nodes with an address in one of the families: externalTrafficPolicy
   * Cluster's candidates, grouped by zone for subsetting, and their Backend entries */
  readonly clusterCandidates: (families: readonly IpFamily[]) => ClusterCandidates;
}

export interface ClusterCandidates {
  readonly candidates: readonly SubsetCandidate[];
  readonly zones: readonly ZoneGroup[];
  /** the members when no subset is needed: every candidate, `eligible` */
  readonly all: readonly Backend[];
}

export type SharedBackendKind =
  | "eligible"
  | "in_subset"
  | "not_in_subset"
  | "no_local_endpoints"
  | "no_address_for_family";

export function nodeTable(nodes: readonly Node[]): NodeTable {
  const facts = nodes
    .map((n) => uniformShape(nodeFacts(n)))
    .sort((a, b) =>
      a.zone < b.zone ? -1 : a.zone > b.zone ? 1 : a.name < b.name ? -1 : a.name > b.name ? 1 : 0,
    );
  const index = new Map(facts.map((f, i) => [f.name, i]));
  const hashes = Uint32Array.from(facts, (f) => nameHash(f.name));
  const ineligible = facts.map((f): Backend | undefined =>
    f.exclusion
      ? base(f, {
          included: false,
          reason: f.exclusion.reason,
          explanation: `not eligible for load-balancer traffic: ${f.exclusion.detail}`,
        })
      : undefined,
  );
  // One slot per (kind, node); `no_address_for_family` also depends on the families.
  // Slot arrays are filled with undefined up front so they stay packed (a sparse array
  // would fall back to a slow dictionary representation).
  const slotsFor = () => new Array<Backend | undefined>(facts.length).fill(undefined);
  const plain: Record<Exclude<SharedBackendKind, "no_address_for_family">, (Backend | undefined)[]> = {
    eligible: slotsFor(),
    in_subset: slotsFor(),
    not_in_subset: slotsFor(),
    no_local_endpoints: slotsFor(),
  };
  const noAddress = new Map<string, (Backend | undefined)[]>();
  const shared = (i: number, kind: SharedBackendKind, families: readonly IpFamily[]): Backend => {
    let slots: (Backend | undefined)[];
    if (kind === "no_address_for_family") {
      const key = families.join(",");
      slots = noAddress.get(key) ?? slotsFor();
      noAddress.set(key, slots);
    } else slots = plain[kind];
    const hit = slots[i];
    if (hit) return hit;
    const f = facts[i]!;
    const made = base(f, sharedEntry(f, kind, families));
    slots[i] = made;
    return made;
  };
  const all = new Map<string, Backend[]>();
  const sharedAll = (kind: "in_subset" | "eligible", families: readonly IpFamily[]): readonly Backend[] => {
    const key = `${kind}|${families.join(",")}`;
    let list = all.get(key);
    if (!list) {
      list = facts.map((_, i) => shared(i, kind, families));
      all.set(key, list);
    }
    return list;
  };
  const familyMask = Uint8Array.from(facts, (f) => (f.addresses.IPv4 ? 1 : 0) | (f.addresses.IPv6 ? 2 : 0));
  const byFamilies = new Map<string, ClusterCandidates>();
  const clusterCandidates = (families: readonly IpFamily[]): ClusterCandidates => {
    const key = families.join(",");
    const hit = byFamilies.get(key);
    if (hit) return hit;
    const candidates: SubsetCandidate[] = [];
    facts.forEach((f, i) => {
      if (f.eligible && families.some((fam) => f.addresses[fam] !== undefined))
        candidates.push({ index: i, zone: f.zone, hash: hashes[i]! });
    });
    const made = {
      candidates,
      zones: groupByZone(candidates),
      all: candidates.map((c) => shared(c.index, "eligible", families)),
    };
    byFamilies.set(key, made);
    return made;
  };
  const usableMask = Uint8Array.from(facts, (f, i) => (f.eligible ? familyMask[i]! : 0));
  return { facts, index, hashes, ineligible, shared, sharedAll, familyMask, usableMask, clusterCandidates };
}

/** The same facts as one of two object literals (with and without `exclusion`, keys in
 * nodeFacts' order): objects built by spreading end up with many hidden classes, and every
 * per-member read of them then goes through a megamorphic lookup. */
function uniformShape(f: NodeFacts): NodeFacts {
  const { name, zone, addresses, ready, eligible, exclusion } = f;
  return exclusion
    ? { name, zone, addresses, ready, eligible, exclusion }
    : { name, zone, addresses, ready, eligible };
}

function readiness(f: NodeFacts): string {
  return f.ready ? "Ready" : "not Ready, but kept as a member: the health check decides (KEP-3458)";
}

function sharedEntry(
  f: NodeFacts,
  kind: SharedBackendKind,
  families: readonly IpFamily[],
): Pick<Backend, "included" | "reason" | "explanation"> {
  switch (kind) {
    case "eligible":
      return {
        included: true,
        reason: "eligible",
        explanation: `eligible node (${readiness(f)}); externalTrafficPolicy Cluster uses every eligible node`,
      };
    case "in_subset":
      return {
        included: true,
        reason: "in_subset",
        explanation: `in this Service's stable subset of the eligible nodes (${readiness(f)}); above clusterBackendLimit eligible nodes, each Cluster Service uses its own subset`,
      };
    case "not_in_subset":
      return {
        included: false,
        reason: "not_in_subset",
        explanation:
          "eligible, but outside this Service's stable subset: above clusterBackendLimit eligible nodes, Cluster Services use a per-Service subset",
      };
    case "no_local_endpoints":
      return {
        included: false,
        reason: "no_local_endpoints",
        explanation:
          "externalTrafficPolicy Local: no non-terminating endpoint of this Service runs on this node",
      };
    case "no_address_for_family":
      return {
        included: false,
        reason: "no_address_for_family",
        explanation: `the node has no ${families.join(" or ")} InternalIP/ExternalIP address to deliver the Service's traffic to`,
      };
  }
}

function base(f: NodeFacts, rest: Pick<Backend, "included" | "reason" | "explanation">): Backend {
  return {
    node: f.name,
    zone: f.zone,
    addresses: f.addresses,
    weight: rest.included ? 1 : 0,
    ready: f.ready,
    localReadyEndpoints: null,
    ...rest,
  };
}
