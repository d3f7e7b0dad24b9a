/**
 * The Maglev table size M for tables that live in the kernel as nft maps. Pure.
 *
 * Every slot is one map element: ≈ 108 bytes of kernel slab and ≈ 10–15 µs of nft time
 * each (measured, docs/dataplane-nftables.md), so the kernel wants a smaller M than
 * userspace. The paper asks for M > 100·N because its fill leaves shares uneven
 * (landscape.md §4.1); our weighted fill gives every backend its exact quota rounded up
 * or down (maglev.ts), so the spread between backends is at most one slot, ≤ N/M of a
 * share. We take the smallest listed prime M ≥ 25·N (≤ 4 % spread; 251 for up to 10
 * backends, 4 093 for 100), capped at `max` (default 4 093 ≈ 430 KiB per distinct table);
 * with more backends than `max`, the smallest listed size that holds them.
 */
import { MAGLEV_SIZES, nextPrime } from "../maglev-size.ts";

export const DEFAULT_KERNEL_TABLE_MAX = 4093;
/** slots per backend we aim for: spread ≤ 1/25 = 4 % */
export const KERNEL_SLOTS_PER_BACKEND = 25;

export function kernelTableSize(max: number = DEFAULT_KERNEL_TABLE_MAX): (backends: number) => number {
  const sizes: readonly number[] = MAGLEV_SIZES;
  if (!sizes.includes(max)) throw new RangeError(`must be one of ${sizes.join(", ")}, got ${max}`);
  return (backends) => {
    if (!Number.isSafeInteger(backends) || backends < 0)
      throw new RangeError(`bad backend count ${backends}`);
    const wanted = sizes.find((s) => s >= KERNEL_SLOTS_PER_BACKEND * backends) ?? Number.POSITIVE_INFINITY;
    if (wanted <= max) return wanted;
    if (backends <= max) return max;
    return sizes.find((s) => s >= backends) ?? nextPrime(backends);
  };
}
