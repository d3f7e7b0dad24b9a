import assert from "node:assert/strict";
import { test } from "node:test";
import { RingPool } from "./xdp-rings.ts";

const ring = (...slots: number[]) => Uint32Array.from(slots);

test("a retired block is not written again until a barrier settles it (or the grace passes)", () => {
  const pool = new RingPool(8, 4, 2000);
  const a = pool.place("A", ring(1, 1, 2, 2), 0, "g");
  const b = pool.place("B", ring(3, 3, 4, 4), 0, "h");
  assert.notEqual(a.block, b.block);
  assert.equal(pool.retire("A", 0), true);
  assert.equal(pool.retire("A", 0), false, "only once");
  assert.throws(() => pool.place("C", ring(1, 1, 2, 3), 10, "g"), /all 2 XDP ring blocks/);
  pool.settle();
  const c = pool.place("C", ring(1, 1, 2, 3), 10, "g");
  assert.equal(c.block, a.block, "A's block, free after the barrier");
  assert.deepEqual(c.writes, [3], "only the slot that differs from A");
  // without a barrier, the grace
  pool.retire("C", 100);
  assert.throws(() => pool.place("D", ring(9, 9, 9, 9), 1000, "g"));
  assert.equal(pool.place("D", ring(9, 9, 9, 9), 2100, "g").block, a.block);
});

test("the next version of a ring goes into the block its lineage held before", () => {
  const pool = new RingPool(4 * 4, 4);
  pool.place("other", ring(7, 7, 7, 7), 0, "x");
  pool.place("v1", ring(1, 2, 3, 1), 0, "g");
  pool.retire("other", 0);
  // flip: v2 into a free block (the lineage has none yet: a fresh one, written whole)
  const v2 = pool.place("v2", ring(1, 2, 1, 1), 0, "g");
  assert.equal(v2.writes.length, 4);
  pool.retire("v1", 0);
  pool.settle();
  // v3 goes to v1's block (lineage g), not to "other"'s, older and unrelated
  const v3 = pool.place("v3", ring(1, 3, 3, 1), 0, "g");
  assert.deepEqual(v3.writes, [1], "one slot differs from v1");
  pool.retire("v2", 0);
  pool.settle();
  // and content asked for again gets its old block back with nothing to write
  const again = pool.place("v2", ring(1, 2, 1, 1), 0, "g");
  assert.equal(again.block, v2.block);
  assert.deepEqual(again.writes, []);
});

test("distrust forgets what free blocks hold: the next placement writes whole", () => {
  const pool = new RingPool(8, 4);
  pool.place("A", ring(1, 2, 3, 4), 0, "g");
  pool.retire("A", 0);
  pool.settle();
  pool.distrust();
  assert.equal(pool.place("A", ring(1, 2, 3, 4), 0, "g").writes.length, 4);
});
