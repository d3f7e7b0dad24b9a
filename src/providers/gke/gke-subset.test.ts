import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import {
  pickSubset,
  subsetHash,
  subsetPerZone,
  subsetSalt,
  wantedIlbCluster,
  wantedNetlbCluster,
} from "./gke-subset.ts";

const names = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
const sizes = (shares: ReturnType<typeof subsetPerZone>) => shares.map((s) => s.members.length);

test("ILB Cluster wants 24 for 1,2,3,4,6 zones and 25 for 5 (spec §3.1)", () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6, 7].map(wantedIlbCluster), [24, 24, 24, 24, 25, 24, 25]);
});

test("NetLB Cluster: max(min(250, max(E, 3P)), U) (spec §3.1, §3.4)", () => {
  assert.equal(wantedNetlbCluster(251, 1, 0), 250);
  assert.equal(wantedNetlbCluster(5, 3, 0), 9);
  assert.equal(wantedNetlbCluster(5, 3, 12), 12);
  assert.equal(wantedNetlbCluster(0, 0, 0), 0);
});

test("the salt is name/namespace and the hash is lowercase hex SHA-256 of node:salt", () => {
  assert.equal(subsetSalt("ns", "svc"), "svc/ns");
  assert.match(subsetHash("n1", "svc/ns"), /^[0-9a-f]{64}$/);
});

test("per-zone split: 9/9/8 nodes and 24 give 8+8+8; 12/13 give 12+12 (spec §3.2)", () => {
  const z = new Map([
    ["a", names("a", 9)],
    ["b", names("b", 9)],
    ["c", names("c", 8)],
  ]);
  assert.deepEqual(sizes(subsetPerZone(z, 24, "s/ns")), [8, 8, 8]);
  const y = new Map([
    ["a", names("a", 12)],
    ["b", names("b", 13)],
  ]);
  assert.deepEqual(sizes(subsetPerZone(y, 24, "s/ns")), [12, 12]);
});

test("small zones hand their unused share to larger zones", () => {
  const z = new Map([
    ["a", names("a", 2)],
    ["b", names("b", 30)],
  ]);
  assert.deepEqual(sizes(subsetPerZone(z, 24, "s/ns")), [2, 22]);
});

test("a fresh subset takes the lowest hashes", () => {
  const c = names("n", 10);
  const expected = [...c].sort((a, b) => (subsetHash(a, "x") < subsetHash(b, "x") ? -1 : 1)).slice(0, 3);
  assert.deepEqual(pickSubset(c, 3, "x"), expected);
});

test("current members are kept first (sticky) and cut in name order when over quota", () => {
  const c = names("n", 10);
  const fresh = pickSubset(c, 3, "x");
  const outsider = c.find((n) => !fresh.includes(n))!;
  const sticky = pickSubset(c, 3, "x", [outsider, "gone-node"]);
  assert.ok(sticky.includes(outsider));
  assert.equal(sticky.length, 3);
  assert.deepEqual(pickSubset(c, 2, "x", ["n-9", "n-1", "n-5"]), ["n-1", "n-5"]);
});

test("property: the subset is stable when unrelated nodes come and go", () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/), { minLength: 1, maxLength: 60 }),
      fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9-]{0,12}$/), { maxLength: 20 }),
      fc.integer({ min: 1, max: 30 }),
      (base, extra, quota) => {
        const before = pickSubset(base, quota, "svc/ns");
        // A later sync sees the chosen members as current; nodes outside the subset leave, others join.
        const unrelated = base.filter((n) => !before.includes(n)).slice(1);
        const joined = extra.filter((n) => !base.includes(n));
        const after = pickSubset([...before, ...unrelated, ...joined], quota, "svc/ns", before);
        // Every member survives while it is a candidate and the quota is unchanged.
        assert.ok(before.every((n) => after.includes(n)));
        assert.equal(after.length, Math.min(quota, before.length + unrelated.length + joined.length));
      },
    ),
    { numRuns: 300 },
  );
});

test("property: without current state, unrelated joiners only displace members they out-hash", () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.stringMatching(/^[a-z][a-z0-9]{0,8}$/), { minLength: 1, maxLength: 40 }),
      fc.integer({ min: 1, max: 20 }),
      (nodes, quota) => {
        const before = pickSubset(nodes, quota, "svc/ns");
        const leavers = nodes.filter((n) => !before.includes(n));
        const after = pickSubset(
          nodes.filter((n) => !leavers.includes(n)),
          quota,
          "svc/ns",
        );
        assert.deepEqual([...after].sort(), [...before].sort());
      },
    ),
    { numRuns: 300 },
  );
});
