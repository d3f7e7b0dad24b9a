/**
 * GCE_VM_IP NEG membership (docs/providers-gke.md, ingress-gce pkg/neg/syncers/subsets.go and
 * endpoints_calculator.go): how many nodes are wanted, how that total is split across
 * zones (smallest zone first, each taking total ÷ zones-left), and which nodes a zone keeps:
 * the current members first (sticky), then the lowest SHA-256 of "<node>:<name>/<namespace>".
 * Deterministic, never random. Does not filter nodes; callers pass candidates.
 */
import { createHash } from "node:crypto";

export const ILB_CLUSTER_MAX = 25;
export const ILB_LOCAL_MAX = 250;
export const NETLB_CLUSTER_MAX = 250;
export const NETLB_LOCAL_MAX = 3000;

/** ILB eTP Cluster: 24 when the zone count divides 24, else 25 (ingress-gce b4518094c). */
export function wantedIlbCluster(zonesWithCandidates: number): number {
  return zonesWithCandidates > 0 && 24 % zonesWithCandidates === 0 ? 24 : ILB_CLUSTER_MAX;
}

/** NetLB eTP Cluster: max(min(250, max(E, 3·P)), U) (ingress-gce 23b01369c). */
export function wantedNetlbCluster(endpoints: number, zoneSubnetPairs: number, current: number): number {
  return Math.max(Math.min(NETLB_CLUSTER_MAX, Math.max(endpoints, 3 * zoneSubnetPairs)), current);
}

export function subsetHash(node: string, salt: string): string {
  return createHash("sha256").update(`${node}:${salt}`, "utf8").digest("hex");
}

/** The salt GKE uses: the Service's name, then its namespace. */
export const subsetSalt = (namespace: string, name: string) => `${name}/${namespace}`;

/**
 * One zone's members: all candidates when fewer than the quota; otherwise the current members
 * still present (in node-name order, cut to the quota), then the lowest hashes.
 */
export function pickSubset(
  candidates: readonly string[],
  quota: number,
  salt: string,
  current: readonly string[] = [],
): string[] {
  if (candidates.length < quota) return [...candidates];
  const byHash = candidates.map((name) => ({ name, hash: subsetHash(name, salt) }));
  byHash.sort((a, b) => (a.hash < b.hash ? -1 : a.hash > b.hash ? 1 : 0));
  const present = new Set(candidates);
  const kept = [...new Set(current)].filter((n) => present.has(n)).sort();
  if (kept.length >= quota) return kept.slice(0, quota);
  const out = [...kept];
  const taken = new Set(kept);
  for (const { name } of byHash) {
    if (out.length >= quota) break;
    if (!taken.has(name)) out.push(name);
  }
  return out;
}

export interface ZoneShare {
  readonly zone: string;
  readonly candidates: number;
  readonly quota: number;
  readonly members: readonly string[];
}

/**
 * Splits `total` across zones, smallest candidate count first (ties by zone name); each zone's
 * quota is what is left ÷ zones left, so small zones hand their unused share on. Result in
 * zone-name order.
 */
export function subsetPerZone(
  candidatesByZone: ReadonlyMap<string, readonly string[]>,
  total: number,
  salt: string,
  currentByZone: ReadonlyMap<string, readonly string[]> = new Map(),
): ZoneShare[] {
  const zones = [...candidatesByZone.entries()].sort(
    ([za, a], [zb, b]) => a.length - b.length || (za < zb ? -1 : za > zb ? 1 : 0),
  );
  let remaining = total;
  let zonesLeft = zones.length;
  const out: ZoneShare[] = [];
  for (const [zone, candidates] of zones) {
    const quota = Math.floor(remaining / zonesLeft);
    const members = pickSubset(candidates, quota, salt, currentByZone.get(zone) ?? []);
    out.push({ zone, candidates: candidates.length, quota, members });
    remaining -= members.length;
    zonesLeft--;
  }
  return out.sort((a, b) => (a.zone < b.zone ? -1 : a.zone > b.zone ? 1 : 0));
}
