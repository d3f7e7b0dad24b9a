// The population step of the weighted Maglev table (see the header of maglev.ts for the
// scheme and docs/maglev.md for the reasoning): quotas by largest remainder, turns by credit,
// each turn claiming the next empty slot on the backend's preference list.
//
// Two schedulers produce the same turn order — rounds in ascending order, backends in
// index (name) order within a round — and so the same table:
// - "rounds" visits every unfinished backend every round: cheapest when weights are similar
//   (one round ≈ one turn each);
// - "heap" jumps straight to each backend's next turn with a min-heap keyed by (round,
//   index): O(M log N) whatever the weights, where "rounds" could need max w / min w idle
//   visits per turn (one weight-1000 backend among weight-1 ones: ~500× more work).
// `fillSlots` picks by an estimate of the work; maglev.test.ts checks both agree.
//
// Does not: validate input (maglev.ts does) or allocate per slot: all state is typed arrays
// of length N, and the preference lists are walked incrementally (offset + j·skip mod M).

import type { MaglevBackend } from "./maglev.ts";
import { finalMix32, murmur3, utf8Bytes } from "./maglev-hash.ts";

export type FillStrategy = "auto" | "rounds" | "heap";

const EMPTY = -1;

/** Populate `slots` (all -1, length M prime ≥ backends.length ≥ 1; weights ≥ 1, sorted by name). */
export function fillSlots(
  slots: Int32Array,
  backends: readonly MaglevBackend[],
  seed: number,
  strategy: FillStrategy = "auto",
): void {
  const size = slots.length;
  const n = backends.length;
  const skipSeed = finalMix32((seed + 0x9e3779b9) | 0);
  const next = new Uint32Array(n); // next position on each backend's preference list
  const skip = new Uint32Array(n);
  const weight = new Float64Array(n);
  let maxWeight = 0;
  for (let i = 0; i < n; i++) {
    const { name, weight: w } = backends[i]!;
    const bytes = utf8Bytes(name);
    next[i] = murmur3(bytes, seed) % size;
    skip[i] = (murmur3(bytes, skipSeed) % (size - 1)) + 1;
    weight[i] = w;
    if (w > maxWeight) maxWeight = w;
  }
  const remaining = quotas(weight, size);
  let quotaSum = 0;
  for (const q of remaining) quotaSum += q;
  if (quotaSum !== size) {
    // A bug, not bad input: a wrong total would make a slot walk spin forever or leave holes.
    throw new Error(`maglev: quotas sum to ${quotaSum}, expected ${size}`);
  }
  const credit = new Float64Array(n).fill(Math.floor(maxWeight / 2));

  const lists: Lists = { slots, next, skip };

  let chosen = strategy;
  if (chosen === "auto") {
    // The last backend to finish needs about quota·max w / w rounds of N visits each.
    let rounds = 0;
    for (let i = 0; i < n; i++) rounds = Math.max(rounds, (remaining[i]! * maxWeight) / weight[i]!);
    chosen = rounds * n <= 16 * size ? "rounds" : "heap";
  }
  if (chosen === "rounds") byRounds(lists, weight, credit, remaining, maxWeight);
  else byHeap(lists, weight, credit, remaining, maxWeight);
}

/** The table being filled and each backend's walk along its preference list. */
type Lists = {
  readonly slots: Int32Array;
  /** Next position on each backend's preference list: offset + j·skip mod M, advanced in place. */
  readonly next: Uint32Array;
  readonly skip: Uint32Array;
};

/** Backend i takes the first empty slot on its preference list. */
function claim(lists: Lists, i: number): void {
  const { slots, next, skip } = lists;
  const size = slots.length;
  const step = skip[i]!;
  let p = next[i]!;
  while (slots[p] !== EMPTY) {
    p += step;
    if (p >= size) p -= size;
  }
  slots[p] = i;
  p += step;
  next[i] = p >= size ? p - size : p;
}

function byRounds(
  lists: Lists,
  weight: Float64Array,
  credit: Float64Array,
  remaining: Int32Array,
  maxWeight: number,
): void {
  const n = weight.length;
  const live = new Int32Array(n);
  for (let i = 0; i < n; i++) live[i] = i;
  let liveCount = n;
  while (liveCount > 0) {
    let kept = 0;
    for (let l = 0; l < liveCount; l++) {
      const i = live[l]!;
      let c = credit[i]! + weight[i]!;
      if (c >= maxWeight) {
        c -= maxWeight;
        claim(lists, i);
        remaining[i]!--;
      }
      credit[i] = c;
      if (remaining[i]! > 0) live[kept++] = i;
    }
    liveCount = kept;
  }
}

function byHeap(
  lists: Lists,
  weight: Float64Array,
  credit: Float64Array,
  remaining: Int32Array,
  maxWeight: number,
): void {
  const n = weight.length;
  const round = new Float64Array(n); // round of each backend's next turn
  const schedule = (i: number, now: number): void => {
    const w = weight[i]!;
    const c = credit[i]!; // always < max w, so the wait is ≥ 1 round
    const wait = Math.ceil((maxWeight - c) / w); // small exact integers: ≤ 10^6
    credit[i] = c + wait * w - maxWeight;
    round[i] = now + wait;
  };
  const heap = new Int32Array(n);
  for (let i = 0; i < n; i++) {
    schedule(i, 0);
    heap[i] = i;
  }
  let heapSize = n;
  for (let k = (n >>> 1) - 1; k >= 0; k--) siftDown(heap, heapSize, k, round);
  while (heapSize > 0) {
    const i = heap[0]!;
    claim(lists, i);
    if (--remaining[i]! > 0) schedule(i, round[i]!);
    else heap[0] = heap[--heapSize]!;
    siftDown(heap, heapSize, 0, round);
  }
}

/** Restore the min-heap order of (round, index) below position `start`. */
function siftDown(heap: Int32Array, heapSize: number, start: number, round: Float64Array): void {
  let k = start;
  const item = heap[k]!;
  const itemRound = round[item]!;
  for (;;) {
    let child = 2 * k + 1;
    if (child >= heapSize) break;
    let best = heap[child]!;
    let bestRound = round[best]!;
    const right = child + 1;
    if (right < heapSize) {
      const other = heap[right]!;
      const otherRound = round[other]!;
      if (otherRound < bestRound || (otherRound === bestRound && other < best)) {
        child = right;
        best = other;
        bestRound = otherRound;
      }
    }
    if (itemRound < bestRound || (itemRound === bestRound && item < best)) break;
    heap[k] = best;
    k = child;
  }
  heap[k] = item;
}

/**
 * Slots per backend: M apportioned by weight with largest remainders (ties to the lower
 * index), then every backend raised to at least one slot, paid for by the largest quotas.
 */
export function quotas(weight: Float64Array, size: number): Int32Array {
  const n = weight.length;
  let total = 0;
  for (const w of weight) total += w;
  const quota = new Int32Array(n);
  const remainder = new Float64Array(n);
  let assigned = 0;
  for (let i = 0; i < n; i++) {
    const exact = size * weight[i]!; // an exact integer: size ≤ 2^24, weight ≤ 10^6
    let q = Math.floor(exact / total);
    if (q * total > exact) q--;
    if ((q + 1) * total <= exact) q++;
    quota[i] = q;
    remainder[i] = exact - q * total;
    assigned += q;
  }
  const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => remainder[b]! - remainder[a]! || a - b);
  for (let k = 0; k < size - assigned; k++) quota[order[k]!]!++;
  raiseToOne(quota);
  return quota;
}

/**
 * Give every zero quota one slot, taking as many slots from the largest quotas as a greedy
 * "take one from the current largest, lower index first" would, in O(n log M): find the
 * level L where capping every quota at L frees enough slots, cap, and hand the surplus back
 * to the highest-index capped quotas (the ones greedy would have reached last).
 */
function raiseToOne(quota: Int32Array): void {
  let zeros = 0;
  let max = 0;
  for (let i = 0; i < quota.length; i++) {
    if (quota[i] === 0) {
      quota[i] = 1;
      zeros++;
    }
    if (quota[i]! > max) max = quota[i]!;
  }
  if (zeros === 0) return;
  const freedAt = (level: number): number => {
    let freed = 0;
    for (const q of quota) if (q > level) freed += q - level;
    return freed;
  };
  let level = 1; // freedAt(1) = M + zeros − n ≥ zeros because M ≥ n
  let above = max; // freedAt(max) = 0 < zeros
  while (above - level > 1) {
    const mid = (level + above) >>> 1;
    if (freedAt(mid) >= zeros) level = mid;
    else above = mid;
  }
  let surplus = freedAt(level) - zeros;
  for (let i = quota.length - 1; i >= 0; i--) {
    if (quota[i]! > level) {
      quota[i] = surplus > 0 ? level + 1 : level;
      if (surplus > 0) surplus--;
    }
  }
}
