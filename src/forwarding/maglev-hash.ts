// Seeded 32-bit hashing for the Maglev data plane: MurmurHash3, x86 32-bit variant
// (Austin Appleby's public-domain design), over bytes, plus a helper for the UTF-8 bytes of
// a backend name.
//
// Why our own: every node must derive the same table from the same input (landscape.md §4.1,
// "Determinism matters"), so the hash has to be a fixed, specified function of bytes and a
// seed — not a runtime's string hash and not Math.random. MurmurHash3_x86_32 is small, well
// known and has published test vectors (checked in maglev.test.ts).
//
// Does not: provide cryptographic strength or resistance to chosen-input collisions. A
// client that can pick its source port can pick its backend with any hash this cheap; that
// is accepted for L4 load balancing (the paper uses a non-cryptographic hash too).

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

const utf8 = new TextEncoder();

/** MurmurHash3_x86_32 of `bytes` with a 32-bit `seed`; returns an unsigned 32-bit integer. */
export function murmur3(bytes: Uint8Array, seed: number, length = bytes.length): number {
  const whole = length & ~3;
  let h = seed | 0;
  let i = 0;
  for (; i < whole; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24);
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  const tail = length & 3;
  if (tail > 0) {
    let k = 0;
    if (tail === 3) k ^= bytes[i + 2]! << 16;
    if (tail >= 2) k ^= bytes[i + 1]! << 8;
    k ^= bytes[i]!;
    k = Math.imul(k, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    h ^= k;
  }
  h ^= length;
  return finalMix32(h);
}

/** MurmurHash3's finaliser: spreads every input bit over the output. Unsigned result. */
export function finalMix32(value: number): number {
  let h = value | 0;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** The UTF-8 bytes of `text` (lone surrogates become U+FFFD, as TextEncoder does). */
export function utf8Bytes(text: string): Uint8Array {
  return utf8.encode(text);
}

/** murmur3 over the UTF-8 bytes of `text`. */
export function hashString(text: string, seed: number): number {
  return murmur3(utf8.encode(text), seed);
}
