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

export interface ZoneGroup {
  readonly zone: string;
  readonly nodes: readonly SubsetCandidate[];
  /** the same nodes' hashes and indices as typed arrays, for the ranking loop */
  readonly hashes: Uint32Array;
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
      hashes: Uint32Array.from(nodes, (n) => n.hash),
      indices: Int32Array.from(nodes, (n) => n.index),
    }))
    .sort((a, b) => a.nodes.length - b.nodes.length || (a.zone < b.zone ? -1 : a.zone > b.zone ? 1 : 0));
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
// A scratch buffer reused between calls (grown on demand); nothing in it outlives a call.
let scratch = new Float64Array(1024);

/** A node's sort key for one Service: its rank (`subsetRank`, with the Service's hash
 * already multiplied in) and its position. Small enough for V8 to inline in the loops. */
function rankKey(nodeHash: number, mixed: number, position: number): number {
  return fmix32(nodeHash ^ mixed) * POSITION_BITS + position;
}

function pickInZone(
  zone: ZoneGroup,
  quota: number,
  serviceHash: number,
  previous: ReadonlySet<number> | undefined,
  out: number[],
): void {
  const { hashes, indices } = zone;
  const n = hashes.length;
  if (n <= quota) {
    for (let p = 0; p < n; p++) out.push(indices[p]!);
    return;
  }
  if (quota <= 0) return;
  const mixed = Math.imul(serviceHash, 0x9e3779b1);
  if (!previous) {
    pickFresh(zone, quota, mixed, out);
    return;
  }
  if (scratch.length < n) scratch = new Float64Array(n * 2);
  const keys = scratch;
  let free = 0;
  // members of the previous subset first (sticky), then the others, both by rank
  const keptKeys: number[] = [];
  for (let p = 0; p < n; p++) {
    const key = rankKey(hashes[p]!, mixed, p);
    if (previous?.has(indices[p]!)) keptKeys.push(key);
    else keys[free++] = key;
  }
  keptKeys.sort((a, b) => a - b);
  const keep = Math.min(keptKeys.length, quota);
  for (let i = 0; i < keep; i++) out.push(indices[keptKeys[i]! % POSITION_BITS]!);
  const k = Math.min(quota - keep, free);
  if (k <= 0) return;
  selectSmallest(keys, free, k);
  const best = keys.slice(0, k).sort();
  for (let i = 0; i < k; i++) out.push(indices[best[i]! % POSITION_BITS]!);
}

/** The common case, no previous subset: the `quota` smallest keys through a bounded
 * max-heap, so most nodes cost one hash and one comparison. */
function pickFresh(zone: ZoneGroup, quota: number, mixed: number, out: number[]): void {
  const { hashes, indices } = zone;
  const n = hashes.length;
  if (scratch.length < quota) scratch = new Float64Array(quota * 2);
  const heap = scratch;
  let size = 0;
  for (let p = 0; p < n; p++) {
    const key = rankKey(hashes[p]!, mixed, p);
    if (size < quota) {
      // sift up
      let i = size++;
      while (i > 0) {
        const parent = (i - 1) >> 1;
        if (heap[parent]! >= key) break;
        heap[i] = heap[parent]!;
        i = parent;
      }
      heap[i] = key;
    } else if (key < heap[0]!) {
      // replace the largest, sift down
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        if (l >= size) break;
        const r = l + 1;
        const c = r < size && heap[r]! > heap[l]! ? r : l;
        if (heap[c]! <= key) break;
        heap[i] = heap[c]!;
        i = c;
      }
      heap[i] = key;
    }
  }
  const best = heap.slice(0, size).sort();
  for (let i = 0; i < size; i++) out.push(indices[best[i]! % POSITION_BITS]!);
}

/** Rearranges keys[0..length) so that its k smallest values come first (quickselect). */
function selectSmallest(keys: Float64Array, length: number, k: number): void {
  let lo = 0;
  let hi = length - 1;
  while (lo < hi) {
    const pivot = keys[(lo + hi) >>> 1]!;
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (keys[i]! < pivot) i++;
      while (keys[j]! > pivot) j--;
      if (i <= j) {
        const t = keys[i]!;
        keys[i] = keys[j]!;
        keys[j] = t;
        i++;
        j--;
      }
    }
    if (k - 1 <= j) hi = j;
    else if (k - 1 >= i) lo = i;
    else break;
  }
}
