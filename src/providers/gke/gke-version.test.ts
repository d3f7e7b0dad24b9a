import assert from "node:assert/strict";
import { test } from "node:test";
import { atLeast, compareGkeVersion, parseGkeVersion } from "./gke-version.ts";

const v = (t: string) => {
  const p = parseGkeVersion(t);
  assert.ok(p, t);
  return p;
};

test("build numbers compare numerically, not as text", () => {
  assert.ok(compareGkeVersion(v("1.32.2-gke.1652000"), v("1.32.2-gke.999999")) > 0);
  assert.ok(compareGkeVersion(v("1.32.10-gke.1"), v("1.32.9-gke.9999999")) > 0);
});

test("gate edges: one build below is before, the gate itself is after", () => {
  assert.equal(atLeast(v("1.32.2-gke.1651999"), "1.32.2-gke.1652000"), false);
  assert.equal(atLeast(v("1.32.2-gke.1652000"), "1.32.2-gke.1652000"), true);
  assert.equal(atLeast(v("1.35.9-gke.9999999"), "1.36"), false);
  assert.equal(atLeast(v("1.36.0-gke.1"), "1.36"), true);
});

test("rejects what is not a GKE version", () => {
  assert.equal(parseGkeVersion("latest"), undefined);
  assert.equal(parseGkeVersion("1.37.1-eks.1"), undefined);
  assert.deepEqual(v("v1.37").build, 0);
});
