import assert from "node:assert/strict";
import { test } from "node:test";
import { RingPool } from "./xdp-rings.ts";

const ring = (...slots: number[]) => Uint32Array.from(slots);

test("a retired block is not written again until a barrier settles it (or the grace passes)", () => {
  const pool = new RingPool(8, 4, 2000);
  const a = pool.place("A", ring(1, 1, 2, 2), 0, "g");
  const b = pool.place("B", ring(3, 3, 4, 4), 0, "h");
  assert.notEqual(a.base, b.base);
  assert.equal(pool.retire("A", 0), true);
  assert.equal(pool.retire("A", 0), false, "only once");
  assert.throws(() => pool.place("C", ring(1, 1, 2, 3), 10, "g"), /ring array \(8 slots\) is full/);
  pool.settle();
  const c = pool.place("C", ring(1, 1, 2, 3), 10, "g");
  assert.equal(c.base, a.base, "A's block, free after the barrier");
  assert.deepEqual(c.writes, [3], "only the slot that differs from A");
  // without a barrier, the grace
  pool.retire("C", 100);
  assert.throws(() => pool.place("D", ring(9, 9, 9, 9), 1000, "g"));
  assert.equal(pool.place("D", ring(9, 9, 9, 9), 2100, "g").base, a.base);
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
  assert.equal(again.base, v2.base);
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

test("rings take blocks of their own size class: many small rings beside a large one", () => {
  const pool = new RingPool(8192, 4093);
  const big = pool.place("big", new Uint32Array(4093), 0, "b");
  const small = Array.from({ length: 30 }, (_, i) =>
    pool.place(`s${i}`, new Uint32Array(127).fill(i + 1), 0, `g${i}`),
  );
  const spans = [[big.base, big.base + 4096], ...small.map((p) => [p.base, p.base + 128])].sort(
    (a, b) => a[0]! - b[0]!,
  );
  for (let i = 1; i < spans.length; i++)
    assert.ok(spans[i]![0]! >= spans[i - 1]![1]!, "blocks never overlap");
  assert.ok(pool.slotsCut <= 4096 + 30 * 128, `${pool.slotsCut} slots cut`);
  assert.throws(() => pool.place("big2", new Uint32Array(4093).fill(9), 0, "b2"), /is full/);
});

test("an adopted block is kept out of use, and reused only where it lines up as one of ours", () => {
  const pool = new RingPool(12288, 4093);
  // a previous layout: fixed blocks of 4 093 slots (the second is not 4 096-aligned)
  const a = pool.reserve(0, 4093);
  const b = pool.reserve(4093, 4093);
  const fresh = pool.place("new", new Uint32Array(4093).fill(1), 0, "g");
  assert.ok(fresh.base >= 4093 + 4096, `cut above the adopted blocks (${fresh.base})`);
  pool.retire(a, 0);
  pool.retire(b, 0);
  pool.settle();
  assert.equal(pool.place("x", new Uint32Array(4093).fill(2), 0, "x").base, 0, "the aligned one is reused");
  assert.throws(() => pool.place("y", new Uint32Array(4093).fill(3), 0, "y"), /is full/, "the other is not");
});

test("reserving a block the pool placed itself keeps its key (it is never freed under it)", () => {
  const pool = new RingPool(8192, 4093);
  const a = pool.place("A", new Uint32Array(4093).fill(1), 0, "g");
  assert.equal(pool.reserve(a.base, 4093), "A");
  pool.retire("B-none", 0);
  pool.settle();
  assert.notEqual(pool.place("C", new Uint32Array(4093).fill(2), 0, "h").base, a.base, "A's block stays A's");
});
