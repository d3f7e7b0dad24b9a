/**
 * Test helper: an observed nft table (read back from the kernel or the fake) holds exactly
 * the desired state — same sets and elements, same chains with the same rule counts and
 * hashes, same named counters.
 */
import assert from "node:assert/strict";
import type { NftState } from "../src/lb-host/nftables/render/nft-state.ts";

/** Observed and desired states agree on every element, chain hash and rule count. */
export function assertSameTable(observed: NftState | undefined, desired: NftState): void {
  assert.ok(observed, "the table is missing");
  assert.deepEqual([...observed.sets.keys()].sort(), [...desired.sets.keys()].sort());
  for (const [name, s] of desired.sets)
    assert.deepEqual(
      new Map([...observed.sets.get(name)!.elements].sort()),
      new Map([...s.elements].sort()),
      name,
    );
  assert.deepEqual(
    [...observed.chains.values()].map((c) => [c.name, c.ruleCount, c.hash, c.base]).sort(),
    [...desired.chains.values()].map((c) => [c.name, c.ruleCount, c.hash, c.base]).sort(),
  );
  assert.deepEqual([...(observed.counters ?? [])].sort(), [...(desired.counters ?? [])].sort(), "counters");
}
