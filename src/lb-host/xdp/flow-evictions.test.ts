import assert from "node:assert/strict";
import { test } from "node:test";
import { FlowEvictions } from "./flow-evictions.ts";

test("flow evictions: inserts the table did not grow by", () => {
  const e = new FlowEvictions();
  assert.equal(e.read(100, 100), 0, "first reading is the base");
  assert.equal(e.read(150, 150), 0, "the table grew by every insert");
  assert.equal(e.read(250, 200), 50, "50 of 100 inserts replaced an evicted entry");
  assert.equal(e.read(300, 200), 100, "a full table: every insert evicts");
});

test("flow evictions: skew between counters and dump cancels over the run, never decreases", () => {
  const e = new FlowEvictions();
  e.read(0, 0);
  // the dump ran after 10 more inserts than the counters saw: looks like −10
  assert.equal(e.read(100, 110), 0);
  // next reading the skew is gone: the true count, not 10 too many
  assert.equal(e.read(200, 200), 0);
  assert.equal(e.read(300, 290), 10);
  assert.equal(e.read(300, 295), 10, "a total never goes down");
});

test("flow evictions: counters that went backwards (maps created again) start a new base", () => {
  const e = new FlowEvictions();
  e.read(0, 0);
  assert.equal(e.read(500, 400), 100);
  assert.equal(e.read(20, 20), 100, "kept, counted on from the new base");
  assert.equal(e.read(80, 50), 130);
});
