import assert from "node:assert/strict";
import { test } from "node:test";
import { FlowTable } from "./flow-table.ts";

test("an entry lives idleMs after its last use, and each use renews it", () => {
  const t = new FlowTable<string>({ idleMs: 1000 });
  t.set("c1", "node-a", 0);
  assert.equal(t.get("c1", 999), "node-a"); // renews: now expires at 1999
  assert.equal(t.get("c1", 1998), "node-a");
  assert.equal(t.get("c1", 2998, false), undefined);
  assert.equal(t.get("c1", 2997, false), "node-a");
});

test("a peek without touch does not renew", () => {
  const t = new FlowTable<string>({ idleMs: 100 });
  t.set("k", "v", 0);
  assert.equal(t.get("k", 50, false), "v");
  assert.equal(t.get("k", 100, false), undefined);
});

test("sweep removes exactly the idle entries and returns them", () => {
  const t = new FlowTable<number>({ idleMs: 10 });
  t.set("a", 1, 0);
  t.set("b", 2, 5);
  t.set("c", 3, 9);
  assert.deepEqual(t.sweep(15), [
    ["a", 1],
    ["b", 2],
  ]);
  assert.equal(t.size, 1);
  assert.equal(t.get("c", 15), 3);
});

test("a full table refuses new keys but updates existing ones", () => {
  const t = new FlowTable<string>({ idleMs: 10, maxEntries: 2 });
  assert.equal(t.set("a", "x", 0), true);
  assert.equal(t.set("b", "x", 0), true);
  assert.equal(t.set("c", "x", 0), false);
  assert.equal(t.set("a", "y", 1), true);
  assert.equal(t.get("a", 1), "y");
  t.sweep(20);
  assert.equal(t.set("c", "x", 20), true);
});

test("deleteWhere drops the flows of a node that left", () => {
  const t = new FlowTable<string>({ idleMs: 10 });
  t.set("1", "n1", 0);
  t.set("2", "n2", 0);
  t.set("3", "n1", 0);
  assert.deepEqual(
    t.deleteWhere((v) => v === "n1").map(([k]) => k),
    ["1", "3"],
  );
  assert.equal(t.size, 1);
  assert.equal(t.clear().length, 1);
  assert.equal(t.size, 0);
});

test("idleMs must be positive", () => {
  assert.throws(() => new FlowTable({ idleMs: 0 }), RangeError);
});
