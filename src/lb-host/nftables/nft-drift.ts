/**
 * Drift: how the table the kernel holds differs from the one passlb last applied. Pure.
 * Compares object names, each chain's rule count and hash (carried in its last rule's
 * comment, nft-state.ts) and, with `elements` (the controller always asks since issue 16: a
 * flushed map breaks every new connection), every element of every set and map but the
 * flow maps, whose elements the packet path writes (flow-map.ts): for those, that they exist.
 * Any difference makes the controller schedule a full sync (issue 6: detect and converge).
 * Does not: list the table (drivers/nft.ts), decide when to look (lb-controller.ts, gated
 * by the kernel's generation, nft-generation.ts), or compare routes (route-drift.ts).
 */
import type { NftState } from "./render/nft-state.ts";

/** A short description of how `observed` differs from `expected`, or undefined. */
export function driftBetween(
  expected: NftState,
  observed: NftState | undefined,
  elements: boolean,
): string | undefined {
  if (!observed) return "table missing";
  for (const name of expected.sets.keys()) if (!observed.sets.has(name)) return `set ${name} missing`;
  for (const name of observed.sets.keys()) if (!expected.sets.has(name)) return `unexpected set ${name}`;
  for (const name of expected.counters ?? [])
    if (!observed.counters?.has(name)) return `counter ${name} missing`;
  for (const name of observed.counters ?? [])
    if (!expected.counters?.has(name)) return `unexpected counter ${name}`;
  for (const [name, c] of expected.chains) {
    const o = observed.chains.get(name);
    if (!o) return `chain ${name} missing`;
    if (o.ruleCount !== c.ruleCount || o.hash !== c.hash) return `chain ${name} rules changed`;
  }
  for (const name of observed.chains.keys())
    if (!expected.chains.has(name)) return `unexpected chain ${name}`;
  if (elements)
    for (const [name, s] of expected.sets) {
      if (s.dynamic) continue;
      const o = observed.sets.get(name)!;
      if (o.elements.size !== s.elements.size)
        return `set ${name} has ${o.elements.size} elements, not ${s.elements.size}`;
      for (const [k, v] of s.elements) if (o.elements.get(k) !== v) return `set ${name} element ${k} differs`;
    }
  return undefined;
}
