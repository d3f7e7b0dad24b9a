/**
 * The Maglev table size M for tables that live in the kernel as nft maps. Pure.
 *
 * Every slot is one map element: ≈ 100 bytes of kernel slab and ≈ 8–15 µs of nft time
 * each (measured, docs/dataplane-nftables.md), so the kernel wants a smaller M than
 * userspace, and a full sync of many distinct tables is bounded by their element count.
 * The paper asks for M > 100·N because its fill leaves shares uneven (landscape.md §4.1);
 * our weighted fill gives every backend its exact quota rounded up or down (maglev.ts), so
 * a backend's share is off by less than one slot, 1/M of the traffic: at M ≥ 127 that is
 * under 0.8 %, within the 1 %. We take the smallest listed prime M ≥ 12·N (127 for
 * up to 10 backends, 251 up to 20, 4 093 from 170), capped at `max` (default 4 093 ≈
 * 430 KiB per distinct table); with more backends than `max`, the smallest listed size
 * that holds them. The price of a small M is disruption: removing one of 10 backends moves
 * a median 8 % of slots beyond its own 1/N at M = 127 (5.5 % at 251; measured with
 * bench/nft-sync.bench.ts's M table) — it matters only for flows without conntrack state
 * (established flows keep their node by mark).
 */
import { MAGLEV_SIZES, nextPrime } from "../../../forwarding/maglev-size.ts";

export const DEFAULT_KERNEL_TABLE_MAX = 4093;
/** slots per backend we aim for */
export const KERNEL_SLOTS_PER_BACKEND = 12;
/** the kernel's sizes: one smaller prime than userspace's list, for Services on few nodes */
export const KERNEL_TABLE_SIZES: readonly number[] = [127, ...MAGLEV_SIZES];

export function kernelTableSize(max: number = DEFAULT_KERNEL_TABLE_MAX): (backends: number) => number {
  const sizes = KERNEL_TABLE_SIZES;
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
