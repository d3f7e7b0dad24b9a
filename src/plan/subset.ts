/**
 * Stable node subsets for externalTrafficPolicy Cluster above the backend limit — GKE's
 * idea (ingress-gce `pkg/neg/syncers/subsets.go` `getSubsetPerZone`, `pickSubsetsMinRemovals`) with a cheaper
 * hash:
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

export interface ZoneGroup {
  readonly zone: string;
  readonly nodes: readonly SubsetCandidate[];
  /** the same nodes' hashes (their bits read as int32) and indices, for the ranking loop */
  readonly hashes: Int32Array;
  readonly indices: Int32Array;
}

/** Candidates by zone, ordered by ascending size, ties by zone name (GKE's ByNodeCount). */
export function groupByZone(candidates: readonly SubsetCandidate[]): ZoneGroup[] {
  const zones = new Map<string, SubsetCandidate[]>();
  for (const c of candidates) {
    const list = zones.get(c.zone);
    if (list) list.push(c);
    else zones.set(c.zone, [c]);
  }
  return [...zones.entries()]
    .map(([zone, nodes]) => ({
      zone,
      nodes,
      hashes: Int32Array.from(nodes, (n) => n.hash | 0),
      indices: Int32Array.from(nodes, (n) => n.index),
    }))
    .sort((a, b) => a.nodes.length - b.nodes.length || (a.zone < b.zone ? -1 : a.zone > b.zone ? 1 : 0));
}

/**
 * Picks `wanted` of the candidates. Returns the chosen indices, in no particular order
 * (a set: callers sort or look up). `previous` holds the indices of the current members
 * (sticky).
 */
export function stableSubset(
  candidates: readonly SubsetCandidate[],
  wanted: number,
  serviceHash: number,
  previous?: ReadonlySet<number>,
): number[] {
  if (candidates.length <= wanted) return candidates.map((c) => c.index);
  return stableSubsetOfZones(groupByZone(candidates), wanted, serviceHash, previous);
}

/** `stableSubset` over candidates already grouped by `groupByZone` (callers that plan many
 * Services over the same nodes group once). */
export function stableSubsetOfZones(
  zones: readonly ZoneGroup[],
  wanted: number,
  serviceHash: number,
  previous?: ReadonlySet<number>,
): number[] {
  const chosen: number[] = [];
  let remaining = wanted;
  let zonesLeft = zones.length;
  const sticky = previous !== undefined && previous.size > 0 ? previous : undefined;
  for (const zone of zones) {
    const quota = Math.floor(remaining / zonesLeft);
    zonesLeft--;
    const before = chosen.length;
    pickInZone(zone, quota, serviceHash, sticky, chosen);
    remaining -= chosen.length - before;
  }
  return chosen;
}

// Sort keys pack (rank, position): rank · 2^21 + position stays below 2^53, so a plain
// number comparison orders by rank and breaks ties by position, with no objects allocated.
const POSITION_BITS = 2 ** 21;
const TWO_32 = 2 ** 32;
// Scratch buffers reused between calls (grown together, on demand); nothing in them
// outlives a call. `scratch`: sort keys; `positionBuffer`: their positions;
// `selectBuffer`: kthSmallest's working copy.
let scratch = new Float64Array(1024);
let positionBuffer = new Int32Array(1024);
let selectBuffer = new Float64Array(1024);

function pickInZone(
  zone: ZoneGroup,
  quota: number,
  serviceHash: number,
  previous: ReadonlySet<number> | undefined,
  out: number[],
): void {
  const { hashes, indices } = zone;
  const n = indices.length;
  if (n <= quota) {
    for (let p = 0; p < n; p++) out.push(indices[p]!);
    return;
  }
  if (quota <= 0) return;
  const mixed = Math.imul(serviceHash, 0x9e3779b1);
  if (!previous) {
    pickSmallest(zone, quota, mixed, undefined, out);
    return;
  }
  // members of the previous subset first (sticky), then the others, both by rank
  const keptKeys: number[] = [];
  for (let p = 0; p < n; p++)
    if (previous.has(indices[p]!)) keptKeys.push(sortKey(flippedRank(hashes[p]!, mixed), p));
  keptKeys.sort((a, b) => a - b);
  const keep = Math.min(keptKeys.length, quota);
  for (let i = 0; i < keep; i++) out.push(indices[keptKeys[i]! % POSITION_BITS]!);
  if (quota - keep > 0) pickSmallest(zone, quota - keep, mixed, previous, out);
}

/**
 * Appends the indices of the `k` nodes with the smallest sort keys (rank, then position),
 * in position order, leaving out the nodes in `exclude`. Ranks are uniform 32-bit hashes,
 * so a threshold a little above the expected k-th smallest rank lets through a few more
 * than k nodes: one hash and one integer comparison per node, then a selection among
 * those few. When fewer than k pass (rare), the threshold doubles and the zone is
 * scanned again; the answer is exact either way.
 */
function pickSmallest(
  zone: ZoneGroup,
  k: number,
  mixed: number,
  exclude: ReadonlySet<number> | undefined,
  out: number[],
): void {
  const { hashes, indices } = zone;
  const n = indices.length;
  if (scratch.length < n) {
    scratch = new Float64Array(n * 2);
    selectBuffer = new Float64Array(n * 2);
    positionBuffer = new Int32Array(n * 2);
  }
  const keys = scratch;
  const positions = positionBuffer;
  let expected = k + 3 * Math.sqrt(k) + 4;
  let count = 0;
  for (;;) {
    // the largest flipped rank that passes, as an int32; INT32_MAX lets every node through
    const everyone = expected >= n;
    const limit = everyone ? 0x7fffffff : (Math.floor((expected / n) * TWO_32) - 2 ** 31) | 0;
    count = 0;
    for (let p = 0; p < n; p++) {
      const rank = flippedRank(hashes[p]!, mixed);
      if (rank > limit) continue;
      if (exclude?.has(indices[p]!)) continue;
      positions[count] = p;
      keys[count++] = sortKey(rank, p);
    }
    if (count >= k || everyone) break;
    expected *= 2;
  }
  const cut = count <= k ? Number.POSITIVE_INFINITY : kthSmallest(keys, count, k);
  for (let i = 0; i < count; i++) if (keys[i]! <= cut) out.push(indices[positions[i]!]!);
}

/** The k-th smallest (1-based) of keys[0..length), distinct values (quickselect on a copy). */
function kthSmallest(keys: Float64Array, length: number, k: number): number {
  const a = selectBuffer;
  for (let i = 0; i < length; i++) a[i] = keys[i]!;
  let lo = 0;
  let hi = length - 1;
  const target = k - 1;
  while (lo < hi) {
    const pivot = a[(lo + hi) >>> 1]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (a[i]! < pivot) i++;
      while (a[j]! > pivot) j--;
      if (i <= j) {
        const t = a[i]!;
        a[i] = a[j]!;
        a[j] = t;
        i++;
        j--;
      }
    }
    if (target <= j) hi = j;
    else if (target >= i) lo = i;
    else break;
  }
  return a[target]!;
}

/** `subsetRank` with the sign bit flipped, as an int32: `<` on it is rank order. Kept
 * in int32 arithmetic (no unsigned results) so the loops above stay in integer registers. */
function flippedRank(signedNodeHash: number, mixed: number): number {
  let h = signedNodeHash ^ mixed;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h ^ -0x80000000;
}

/** The packed sort key of a node: its unsigned rank (from the flipped one) and position. */
function sortKey(flipped: number, position: number): number {
  return ((flipped ^ -0x80000000) >>> 0) * POSITION_BITS + position;
}
