/**
 * Stable node subsets for externalTrafficPolicy Cluster above the backend limit — GKE's
 * idea (specs/gke-l4.md §3.2–3.3) with a cheaper hash:
 *   - the wanted count is split across zones smallest-first: zones ordered by ascending
 *     candidate count (ties by name), each zone's quota = remaining ÷ zones left, so small
 *     zones hand their unused quota to larger ones;
 *   - inside a zone, nodes are ranked by a hash of (node name, Service namespace/name):
 *     every Service gets its own, stable subset (rendezvous hashing);
 *   - sticky: nodes already in the previous subset are kept first, so a re-plan only
 *     changes members when a member vanished or the quota dropped.
 * GKE ranks by SHA-256 hex (exact reproduction lives in providers/gke); passlb ranks by a
 * 32-bit mix of two precomputed name hashes, because the planner does this for every
 * Service on every pass (10,000 Services × 5,000 nodes is 50 M rankings).
 */

/** FNV-1a over UTF-16 code units, finished with murmur3's fmix32: a well-mixed 32-bit hash. */
export function nameHash(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return fmix32(h);
}

export function fmix32(x: number): number {
  let h = x >>> 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** Rank of a node for one Service: lower ranks are chosen first. */
export function subsetRank(nodeHash: number, serviceHash: number): number {
  return fmix32(nodeHash ^ Math.imul(serviceHash, 0x9e3779b1));
}

export interface SubsetCandidate {
  /** index into the caller's node table */
  readonly index: number;
  readonly zone: string;
  readonly hash: number;
}

/**
 * Picks `wanted` of the candidates. Returns the chosen indices. `previous` holds the
 * indices of the current members (sticky).
 */
export function stableSubset(
  candidates: readonly SubsetCandidate[],
  wanted: number,
  serviceHash: number,
  previous?: ReadonlySet<number>,
): number[] {
  if (candidates.length <= wanted) return candidates.map((c) => c.index);
  const zones = new Map<string, SubsetCandidate[]>();
  for (const c of candidates) {
    const list = zones.get(c.zone);
    if (list) list.push(c);
    else zones.set(c.zone, [c]);
  }
  const ordered = [...zones.entries()].sort(
    (a, b) => a[1].length - b[1].length || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0),
  );
  const chosen: number[] = [];
  let remaining = wanted;
  let zonesLeft = ordered.length;
  for (const [, nodes] of ordered) {
    const quota = Math.floor(remaining / zonesLeft);
    zonesLeft--;
    const picked = pickInZone(nodes, quota, serviceHash, previous);
    for (const i of picked) chosen.push(i);
    remaining -= picked.length;
  }
  return chosen;
}

function pickInZone(
  nodes: readonly SubsetCandidate[],
  quota: number,
  serviceHash: number,
  previous: ReadonlySet<number> | undefined,
): number[] {
  if (nodes.length <= quota) return nodes.map((n) => n.index);
  if (quota <= 0) return [];
  const kept: number[] = [];
  const ranked: { index: number; rank: number }[] = [];
  for (const n of nodes) {
    const rank = subsetRank(n.hash, serviceHash);
    if (previous?.has(n.index)) kept.push(n.index);
    else ranked.push({ index: n.index, rank });
  }
  if (kept.length >= quota) {
    // more members than the quota allows: keep the best-ranked of them
    return kept
      .map((index) => ({ index, rank: subsetRank(nodes.find((n) => n.index === index)!.hash, serviceHash) }))
      .sort(byRank)
      .slice(0, quota)
      .map((r) => r.index);
  }
  const need = quota - kept.length;
  return [...kept, ...smallest(ranked, need).map((r) => r.index)];
}

const byRank = (a: { rank: number; index: number }, b: { rank: number; index: number }) =>
  a.rank - b.rank || a.index - b.index;

/** The k smallest by rank, in rank order; quickselect, then sort the k. */
function smallest(items: { index: number; rank: number }[], k: number): { index: number; rank: number }[] {
  if (k >= items.length) return [...items].sort(byRank);
  const a = [...items];
  let lo = 0;
  let hi = a.length - 1;
  while (lo < hi) {
    const pivot = a[(lo + hi) >>> 1]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (byRank(a[i]!, pivot) < 0) i++;
      while (byRank(a[j]!, pivot) > 0) j--;
      if (i <= j) {
        const t = a[i]!;
        a[i] = a[j]!;
        a[j] = t;
        i++;
        j--;
      }
    }
    if (k - 1 <= j) hi = j;
    else if (k - 1 >= i) lo = i;
    else break;
  }
  return a.slice(0, k).sort(byRank);
}
