import assert from "node:assert/strict";
import { test } from "node:test";
import { kernelTableSize } from "./kernel-table-size.ts";

test("kernel M: ≥ 25 slots per backend from the listed primes, capped, never below the backend count", () => {
  const size = kernelTableSize();
  assert.deepEqual(
    [0, 1, 10, 11, 40, 41, 100, 163, 164, 4000, 4094].map(size),
    [251, 251, 251, 509, 1021, 2039, 4093, 4093, 4093, 4093, 8191],
  );
  assert.equal(kernelTableSize(16381)(200), 8191);
  assert.throws(() => kernelTableSize(1000), RangeError);
});
