/**
 * The Maglev table size M for tables that live in the kernel as nft maps. Pure.
 *
 * Every slot is one map element (≈ 87 bytes of kernel slab each, measured: docs/
 * dataplane-nftables.md) and costs nft ≈ 7–14 µs to load, so the kernel wants a smaller M
 * than userspace: the paper's M > 100·N (maglev-size.ts) is capped at `max` (default
 * 4 093 ≈ 350 KiB per distinct table). Our Maglev fill gives every backend its exact quota
 * rounded up or down (maglev.ts), so below 100·N the shares still differ by at most one
 * slot: ≤ N/M relative (2.4 % for 100 nodes at 4 093). Above `max` backends the smallest
 * listed size that holds them is used.
 */
import { MAGLEV_SIZES, maglevSizeFor, nextPrime } from "../maglev-size.ts";

export const DEFAULT_KERNEL_TABLE_MAX = 4093;

export function kernelTableSize(max: number = DEFAULT_KERNEL_TABLE_MAX): (backends: number) => number {
  const sizes: readonly number[] = MAGLEV_SIZES;
  if (!sizes.includes(max)) throw new RangeError(`must be one of ${sizes.join(", ")}, got ${max}`);
  return (backends) => {
    const wanted = maglevSizeFor(backends);
    if (wanted <= max) return wanted;
    if (backends <= max) return max;
    return sizes.find((s) => s >= backends) ?? nextPrime(backends);
  };
}
