import assert from "node:assert/strict";
import { test } from "node:test";
import { maglevTable } from "../../../forwarding/maglev.ts";
import { KERNEL_TABLE_SIZES, kernelTableSize } from "./kernel-table-size.ts";

test("kernel M: ≥ 12 slots per backend from the listed primes, capped, never below the backend count", () => {
  const size = kernelTableSize();
  assert.deepEqual(
    [0, 1, 10, 11, 20, 21, 42, 43, 169, 170, 4000, 4094].map(size),
    [127, 127, 127, 251, 251, 509, 509, 1021, 2039, 4093, 4093, 8191],
  );
  assert.equal(kernelTableSize(16381)(680), 8191);
  assert.equal(kernelTableSize(16381)(700), 16381);
  assert.equal(kernelTableSize(127)(50), 127);
  assert.throws(() => kernelTableSize(1000), RangeError);
});

test("kernel M: every weighted backend's share is within 1 % of its weighted share at the chosen M", () => {
  const size = kernelTableSize();
  for (const n of [1, 2, 3, 7, 10, 11, 20, 40, 100])
    for (let seed = 1; seed <= 5; seed++) {
      const backends = Array.from({ length: n }, (_, i) => ({
        name: `n${i}`,
        weight: 1 + ((i * 5 + seed) % 4),
      }));
      const total = backends.reduce((a, b) => a + b.weight, 0);
      const M = size(n);
      assert.ok(KERNEL_TABLE_SIZES.includes(M));
      const t = maglevTable({ backends, size: M, seed });
      const count = new Array<number>(t.backends.length).fill(0);
      for (const s of t.slots) count[s] = (count[s] ?? 0) + 1;
      t.backends.forEach((name, i) => {
        const want = backends.find((b) => b.name === name)!.weight / total;
        assert.ok(
          Math.abs(count[i]! / M - want) < 0.01,
          `N=${n} M=${M} ${name}: ${count[i]! / M} vs ${want}`,
        );
      });
    }
});
