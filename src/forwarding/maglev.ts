// Weighted Maglev lookup tables: a pure function from (backends with weights, size M, seed)
// to an array of M backend indices, plus lookup and comparison helpers.
//
// Algorithm (landscape.md §4.1, Maglev paper §3.4): each backend's preference list is
// `(offset + j·skip) mod M` with offset = h1(name) mod M and skip = h2(name) mod (M−1) + 1;
// backends take turns claiming the next still-empty slot on their own list.
// Weights (landscape.md §4.2; our variant, described in docs/maglev.md):
//   1. Quotas. Backend i is entitled to M·wᵢ/Σw slots; we apportion M by largest
//      remainder (ties to the lower-sorted name), so every count is the exact share rounded
//      down or up. A backend with weight > 0 always gets at least one slot; the few slots
//      that costs are taken from the largest quotas.
//   2. Turns by credit. Every round each backend earns its weight in credit and takes a turn
//      when its credit reaches the largest weight (then pays that back), so turn frequency is
//      proportional to weight, as in Katran's MaglevHashV2. A backend stops taking turns at
//      its quota. Credits start at half the largest weight, so after r rounds a backend has
//      had about round(r·wᵢ/max w) turns. With equal weights this is the paper's table.
// Backends are sorted by name first (code-unit order) and hashed with our own seeded murmur3
// over UTF-8 bytes, so the table depends only on the input set, not its order, the process or
// the host.
//
// Does not: render nftables maps, pick M (see maglev-size.ts), hash packets (see
// maglev-flow-hash.ts), keep connection state, or bound per-backend load at runtime.
// Invalid input (M not prime, too small, bad weights, duplicate names) is a programmer error
// and throws; the planner is expected to validate user data before calling this.

import { fillSlots } from "./maglev-fill.ts";
import { isPrime, MAX_MAGLEV_SIZE } from "./maglev-size.ts";

export type MaglevBackend = { readonly name: string; readonly weight: number };

export type MaglevInput = {
  readonly backends: readonly MaglevBackend[];
  /** Table size M: a prime ≥ the number of backends with weight > 0. */
  readonly size: number;
  /** Unsigned 32-bit hash seed; must be the same on every node. */
  readonly seed: number;
};

export type MaglevTable = {
  readonly size: number;
  readonly seed: number;
  /** Names of the backends that own slots (weight > 0), sorted. */
  readonly backends: readonly string[];
  /** `slots[k]` is an index into `backends`, or NO_BACKEND when `backends` is empty. */
  readonly slots: Int32Array;
};

/** Slot value of a table without backends. */
export const NO_BACKEND = -1;

/** Largest weight accepted: keeps M·w and Σw exact in float64 arithmetic. */
export const MAX_MAGLEV_WEIGHT = 1_000_000;

/** Build the weighted Maglev table for `input`. Throws TypeError/RangeError on invalid input. */
export function maglevTable(input: MaglevInput): MaglevTable {
  const { size, seed } = input;
  validateSizeAndSeed(size, seed);
  const active = activeBackends(input.backends);
  if (active.length > size) {
    throw new RangeError(
      `maglevTable: size ${size} is smaller than the ${active.length} backends with weight > 0`,
    );
  }
  const names = active.map((b) => b.name);
  const slots = new Int32Array(size).fill(NO_BACKEND);
  if (active.length > 0) fillSlots(slots, active, seed);
  return { size, seed, backends: names, slots };
}

/** The backend name for a 32-bit flow hash, or undefined when the table has no backends. */
export function lookupBackend(table: MaglevTable, hash32: number): string | undefined {
  const index = table.slots[(hash32 >>> 0) % table.size]!;
  return index === NO_BACKEND ? undefined : table.backends[index];
}

export type SlotShare = { readonly name: string; readonly slots: number; readonly share: number };

/** Slots owned by each backend, in `table.backends` order, with share = slots / M. */
export function slotShares(table: MaglevTable): SlotShare[] {
  const counts = new Int32Array(table.backends.length);
  for (const index of table.slots) if (index !== NO_BACKEND) counts[index]!++;
  return table.backends.map((name, i) => ({ name, slots: counts[i]!, share: counts[i]! / table.size }));
}

/**
 * Fraction of slots (0..1) whose backend name differs between two tables of the same size.
 * Tables of different sizes map hashes to slots differently, so they cannot be compared
 * slot by slot: that throws RangeError.
 */
export function slotsMoved(before: MaglevTable, after: MaglevTable): number {
  if (before.size !== after.size) {
    throw new RangeError(`slotsMoved: tables differ in size (${before.size} vs ${after.size})`);
  }
  const indexAfter = new Map(after.backends.map((name, i) => [name, i]));
  // translate[i + 1]: the index in `after` of before's backend i; -2 (matches no slot) if gone.
  const translate = new Int32Array(before.backends.length + 1);
  translate[0] = NO_BACKEND;
  before.backends.forEach((name, i) => {
    translate[i + 1] = indexAfter.get(name) ?? -2;
  });
  let moved = 0;
  for (let k = 0; k < before.size; k++) {
    if (translate[before.slots[k]! + 1] !== after.slots[k]) moved++;
  }
  return moved / before.size;
}

function validateSizeAndSeed(size: number, seed: number): void {
  if (!Number.isSafeInteger(size) || size > MAX_MAGLEV_SIZE || !isPrime(size)) {
    throw new RangeError(`maglevTable: size must be a prime ≤ ${MAX_MAGLEV_SIZE}, got ${size}`);
  }
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff) {
    throw new RangeError(`maglevTable: seed must be an unsigned 32-bit integer, got ${seed}`);
  }
}

function activeBackends(backends: readonly MaglevBackend[]): MaglevBackend[] {
  const seen = new Set<string>();
  for (const { name, weight } of backends) {
    if (typeof name !== "string") throw new TypeError(`maglevTable: backend name must be a string`);
    if (seen.has(name)) throw new TypeError(`maglevTable: duplicate backend name ${JSON.stringify(name)}`);
    seen.add(name);
    if (!Number.isInteger(weight) || weight < 0 || weight > MAX_MAGLEV_WEIGHT) {
      throw new RangeError(
        `maglevTable: weight of ${JSON.stringify(name)} must be an integer 0..${MAX_MAGLEV_WEIGHT}, got ${weight}`,
      );
    }
  }
  return backends
    .filter((b) => b.weight > 0)
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
