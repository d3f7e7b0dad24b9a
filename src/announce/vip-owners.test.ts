import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { vipOwners, vipRanking, vipsOf } from "./vip-owners.ts";

const host = fc.stringMatching(/^[a-z][a-z0-9-]{0,6}$/);
const vip = fc.oneof(
  fc.integer({ min: 0, max: 255 }).map((n) => `203.0.113.${n}`),
  fc.integer({ min: 0, max: 0xffff }).map((n) => `fd00:10::${n.toString(16)}`),
);
const hosts = fc.uniqueArray(host, { minLength: 1, maxLength: 8 });
const vips = fc.uniqueArray(vip, { minLength: 0, maxLength: 40 });

test("every VIP has exactly one owner, and it is a member", () => {
  fc.assert(
    fc.property(hosts, vips, (hs, vs) => {
      const owners = vipOwners(hs, vs);
      assert.equal(owners.size, vs.length);
      for (const v of vs) assert.ok(hs.includes(owners.get(v)!));
      // the hosts' shares partition the VIPs
      const shares = hs.flatMap((h) => vipsOf(owners, h));
      assert.deepEqual([...shares].sort(), [...vs].sort());
    }),
  );
});

test("the owners do not depend on the order members and VIPs are listed in", () => {
  fc.assert(
    fc.property(hosts, vips, (hs, vs) => {
      const a = vipOwners(hs, vs);
      const b = vipOwners([...hs].reverse(), [...vs].reverse());
      for (const v of vs) assert.equal(a.get(v), b.get(v));
    }),
  );
});

test("removing a host moves only its VIPs; adding one moves VIPs only to it", () => {
  fc.assert(
    fc.property(
      hosts.filter((h) => h.length >= 2),
      vips,
      fc.nat(),
      (hs, vs, pick) => {
        const gone = hs[pick % hs.length]!;
        const before = vipOwners(hs, vs);
        const after = vipOwners(
          hs.filter((h) => h !== gone),
          vs,
        );
        for (const v of vs) {
          if (before.get(v) !== gone) assert.equal(after.get(v), before.get(v), `${v} moved`);
          else assert.notEqual(after.get(v), gone);
        }
        // and the reverse: the host coming back takes exactly what it had
        const back = vipOwners(hs, vs);
        for (const v of vs) assert.equal(back.get(v), before.get(v));
      },
    ),
  );
});

test("VIPs spread over the hosts, not all on one", () => {
  const vs = Array.from({ length: 240 }, (_, i) => `203.0.113.${i}`);
  const hs = ["lb-1", "lb-2", "lb-3"];
  const owners = vipOwners(hs, vs);
  for (const h of hs) {
    const share = vipsOf(owners, h).length / vs.length;
    assert.ok(share > 0.2 && share < 0.47, `${h} holds ${share}`);
  }
  // even two hosts and a few VIPs: with 8 VIPs both hosts hold some
  const two = vipOwners(["lb-1", "lb-2"], vs.slice(0, 8));
  assert.equal(new Set(two.values()).size, 2);
});

test("no member: no owner", () => {
  assert.equal(vipOwners([], ["203.0.113.1"]).size, 0);
});

test("the ranking starts with the owner and drops a leaving host without reordering the rest", () => {
  fc.assert(
    fc.property(
      hosts.filter((h) => h.length >= 2),
      vip,
      fc.nat(),
      (hs, v, pick) => {
        const ranking = vipRanking(hs, v);
        assert.equal(ranking[0], vipOwners(hs, [v]).get(v));
        const gone = hs[pick % hs.length]!;
        assert.deepEqual(
          vipRanking(
            hs.filter((h) => h !== gone),
            v,
          ),
          ranking.filter((h) => h !== gone),
        );
      },
    ),
  );
});
