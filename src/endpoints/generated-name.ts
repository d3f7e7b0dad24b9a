/**
 * Deterministic stand-in for the API server's `generateName` (k8s.io/apiserver
 * pkg/storage/names SimpleNameGenerator: the base cut to 58 characters plus 5 characters from
 * "bcdfghjklmnpqrstvwxz2456789"). Upstream picks the 5 characters at random; standalone mode
 * and tests need the same name every run, so here they come from an FNV-1a hash of the
 * namespace, the base and a counter. Used only where passlb itself plays the API server.
 */
import type { EndpointSlice } from "../k8s/objects.ts";

const ALPHABET = "bcdfghjklmnpqrstvwxz2456789";
const MAX_BASE = 58;

function fnv1a(text: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/** `base` (cut to 58 characters) plus a 5-character suffix derived from `seed`. */
export function generatedName(base: string, seed: string): string {
  let h = fnv1a(seed);
  let suffix = "";
  for (let i = 0; i < 5; i++) {
    suffix += ALPHABET[h % ALPHABET.length];
    h = Math.floor(h / ALPHABET.length); // 27^5 < 2^32: five independent digits
  }
  return base.slice(0, MAX_BASE) + suffix;
}

/** A name generator for created slices: the first free `generatedName(generateName, ns/generateName#n)`. */
export function deterministicSliceNames(): (slice: EndpointSlice, taken: ReadonlySet<string>) => string {
  return (slice, taken) => {
    const base = slice.metadata.generateName ?? slice.metadata.name ?? "";
    for (let n = 0; ; n++) {
      const name = generatedName(base, `${slice.metadata.namespace ?? "default"}/${base}#${n}`);
      if (!taken.has(name)) return name;
    }
  };
}
