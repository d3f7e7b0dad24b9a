// Choosing the Maglev table size M: primality helpers and the fixed list of sizes we use.
//
// Facts behind the choices (landscape.md §2.1, §2.3, §4.1):
// - M must be prime so that every skip in 1..M−1 is co-prime with M and each backend's
//   preference list visits every slot exactly once (Maglev paper §3.4).
// - For shares within about 1 % of each other the paper asks for M > 100·N (§5.3).
// - Cilium defaults to 16 381 because each Service's table is a BPF array of M × 4 bytes;
//   the same pressure applies to us once a table becomes an nft map of M elements.
//
// Userspace cost of one table here: M × 4 bytes of Int32Array slots (64 KiB at 16 381,
// 256 KiB at 65 537, 512 KiB at 131 071) plus the backend name list; see docs/maglev.md.
//
// Does not: pick a size by itself for a running Service. Changing M reshuffles nearly every
// slot (landscape.md §2.3, Cilium's note on changing the table size), so callers should pass
// a floor and only ever grow a Service's M; `maglevSizeFor` takes that floor as an argument.

/** Sizes we build tables with: Cilium's supported primes, with the paper's 65 537 for 65 521. */
export const MAGLEV_SIZES = [251, 509, 1021, 2039, 4093, 8191, 16381, 32749, 65537, 131071] as const;

/** Default M: 16 381 slots (64 KiB of slots; ≤ 1 % imbalance up to 163 backends). */
export const DEFAULT_MAGLEV_SIZE = 16381;

/** Largest M the builder accepts (2^24): far above any size in MAGLEV_SIZES. */
export const MAX_MAGLEV_SIZE = 16_777_216;

/** True when `n` is a prime integer. Trial division by 6k ± 1; fine up to MAX_MAGLEV_SIZE. */
export function isPrime(n: number): boolean {
  if (!Number.isSafeInteger(n) || n < 2) return false;
  if (n < 4) return true;
  if (n % 2 === 0 || n % 3 === 0) return false;
  for (let d = 5; d * d <= n; d += 6) {
    if (n % d === 0 || n % (d + 2) === 0) return false;
  }
  return true;
}

/** The smallest prime ≥ `n` (2 for anything below 2). */
export function nextPrime(n: number): number {
  if (!Number.isFinite(n)) throw new RangeError(`nextPrime: expected a finite number, got ${n}`);
  let candidate = Math.max(2, Math.ceil(n));
  while (!isPrime(candidate)) candidate++;
  return candidate;
}

/**
 * The smallest size from MAGLEV_SIZES that is ≥ `floor` and > 100 × `backendCount`, so that
 * shares stay within 1 % (Maglev paper §5.3). `floor` must itself be a listed size; pass the
 * Service's current M to never shrink it. Capped at the largest listed size (131 071, i.e.
 * within 1 % up to 1 310 backends); past that, balance degrades gracefully (each backend
 * still gets ⌊M/N⌋ or ⌈M/N⌉ slots). Only with more backends than the cap does it fall back
 * to the smallest prime ≥ backendCount, which is valid but coarse.
 */
export function maglevSizeFor(backendCount: number, floor: number = MAGLEV_SIZES[0]): number {
  if (!Number.isSafeInteger(backendCount) || backendCount < 0) {
    throw new RangeError(`maglevSizeFor: backendCount must be a non-negative integer, got ${backendCount}`);
  }
  const sizes: readonly number[] = MAGLEV_SIZES;
  if (!sizes.includes(floor)) {
    throw new RangeError(`maglevSizeFor: floor must be one of ${sizes.join(", ")}, got ${floor}`);
  }
  const cap = sizes[sizes.length - 1]!;
  if (backendCount > cap) return nextPrime(backendCount);
  for (const size of sizes) {
    if (size >= floor && size > 100 * backendCount) return size;
  }
  return cap;
}
