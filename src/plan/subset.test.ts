import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { nameHash, type SubsetCandidate, stableSubset, subsetRank } from "./subset.ts";

function nodes(zoneSizes: readonly number[]): SubsetCandidate[] {
  const out: SubsetCandidate[] = [];
  zoneSizes.forEach((n, z) => {
    for (let i = 0; i < n; i++) {
      const name = `z${z}-node-${i}`;
      out.push({ index: out.length, zone: `z${z}`, hash: nameHash(name) });
    }
  });
  return out;
}

const perZone = (cands: readonly SubsetCandidate[], chosen: readonly number[]) => {
  const counts = new Map<string, number>();
  for (const i of chosen) counts.set(cands[i]!.zone, (counts.get(cands[i]!.zone) ?? 0) + 1);
  return [...counts.entries()].sort().map(([, n]) => n);
};

test("zones smallest-first with integer quotas: 9/9/8 nodes and 24 wanted give 8+8+8 (spec gke-l4 §3.2)", () => {
  const c = nodes([9, 9, 8]);
  const chosen = stableSubset(c, 24, nameHash("svc/ns"));
  assert.deepEqual(perZone(c, chosen), [8, 8, 8]);
});

test("a small zone hands its unused quota on: 2/13/13 nodes and 24 wanted give 2+11+11", () => {
  const c = nodes([2, 13, 13]);
  assert.deepEqual(perZone(c, stableSubset(c, 24, nameHash("svc/ns"))), [2, 11, 11]);
});

test("12 and 13 nodes, 24 wanted: 12 + 12", () => {
  const c = nodes([12, 13]);
  assert.deepEqual(perZone(c, stableSubset(c, 24, nameHash("svc/ns"))), [12, 12]);
});

test("property: the subset has min(wanted, candidates) distinct members", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 30 }), { minLength: 1, maxLength: 5 }),
      fc.integer({ min: 1, max: 60 }),
      fc.string(),
      (sizes, wanted, svc) => {
        const c = nodes(sizes);
        const chosen = stableSubset(c, wanted, nameHash(svc));
        assert.equal(new Set(chosen).size, chosen.length);
        // the last (largest) zone takes whatever the integer quotas left over
        assert.equal(chosen.length, Math.min(wanted, c.length));
      },
    ),
  );
});

test("property: sticky — re-planning with the previous members keeps them while the quota allows", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 10, max: 40 }),
      fc.integer({ min: 1, max: 9 }),
      fc.string(),
      (n, wanted, svc) => {
        const c = nodes([n]);
        const h = nameHash(svc);
        const first = stableSubset(c, wanted, h);
        // an unrelated node joins and another (not a member) leaves
        const outsider = c.find((x) => !first.includes(x.index))!;
        const changed = [
          ...c.filter((x) => x !== outsider),
          { index: 1000, zone: "z0", hash: nameHash("newcomer") },
        ];
        const second = stableSubset(changed, wanted, h, new Set(first));
        assert.deepEqual(new Set(second), new Set(first));
      },
    ),
  );
});

test("without a previous subset the choice is still stable: unrelated nodes coming and going move at most one slot", () => {
  const c = nodes([50]);
  const h = nameHash("web/shop");
  const before = new Set(stableSubset(c, 10, h));
  const plusOne = [...c, { index: 999, zone: "z0", hash: nameHash("extra") }];
  const after = new Set(stableSubset(plusOne, 10, h));
  const moved = [...before].filter((i) => !after.has(i)).length;
  assert.ok(moved <= 1, `moved ${moved}`);
});

test("different Services get different subsets", () => {
  const c = nodes([100]);
  assert.notDeepEqual(
    stableSubset(c, 10, nameHash("a/ns")).sort(),
    stableSubset(c, 10, nameHash("b/ns")).sort(),
  );
});

/** The rules of the module header, written the slow and obvious way: every node ranked,
 * sorted by (rank, position in its zone), sticky members first. */
function referenceSubset(
  candidates: readonly SubsetCandidate[],
  wanted: number,
  serviceHash: number,
  previous: ReadonlySet<number>,
): number[] {
  const zones = new Map<string, SubsetCandidate[]>();
  for (const c of candidates) zones.set(c.zone, [...(zones.get(c.zone) ?? []), c]);
  const ordered = [...zones.entries()].sort(
    ([za, a], [zb, b]) => a.length - b.length || (za < zb ? -1 : za > zb ? 1 : 0),
  );
  const chosen: number[] = [];
  let remaining = wanted;
  let zonesLeft = ordered.length;
  for (const [, nodes] of ordered) {
    const quota = Math.floor(remaining / zonesLeft--);
    const ranked = nodes
      .map((c, position) => ({ c, position, rank: subsetRank(c.hash, serviceHash) }))
      .sort((a, b) => a.rank - b.rank || a.position - b.position);
    const kept = ranked.filter((r) => previous.has(r.c.index));
    const others = ranked.filter((r) => !previous.has(r.c.index));
    const picked = nodes.length <= quota ? ranked : [...kept, ...others].slice(0, Math.max(0, quota));
    for (const r of picked) chosen.push(r.c.index);
    remaining -= picked.length;
  }
  return chosen.sort((a, b) => a - b);
}

test("property: the fast selection picks exactly what ranking every node would (ties, sticky members, retries)", () => {
  fc.assert(
    fc.property(
      fc.array(fc.integer({ min: 0, max: 400 }), { minLength: 1, maxLength: 4 }),
      fc.integer({ min: 1, max: 300 }),
      fc.integer({ min: 0, max: 0xffffffff }),
      // a narrow hash range makes equal ranks (ties broken by position) common
      fc.oneof(fc.constant(0xffffffff), fc.constant(7)),
      fc.array(fc.integer({ min: 0, max: 1600 }), { maxLength: 40 }),
      fc.integer({ min: 0, max: 1000 }),
      (sizes, wanted, serviceHash, hashMask, previousList, seed) => {
        const c: SubsetCandidate[] = [];
        sizes.forEach((n, z) => {
          for (let i = 0; i < n; i++)
            c.push({
              index: c.length,
              zone: `z${z}`,
              hash: (nameHash(`${seed}-${z}-${i}`) & hashMask) >>> 0,
            });
        });
        const previous = new Set(previousList);
        const fast = stableSubset(c, wanted, serviceHash, previous).sort((a, b) => a - b);
        const slow =
          c.length <= wanted ? c.map((x) => x.index) : referenceSubset(c, wanted, serviceHash, previous);
        assert.deepEqual(fast, slow);
      },
    ),
    { numRuns: 300 },
  );
});
