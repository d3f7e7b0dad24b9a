import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { defaultQuorum, type PeerHeard, peerLiveness } from "./peer-liveness.ts";
import { vipOwners, vipsOf } from "./vip-owners.ts";

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

const heard = (entries: [string, PeerHeard][]) => new Map(entries);

test("a peer is live until deadAfterMs without a heartbeat, or at once after a goodbye", () => {
  const base = { self: "a", hosts: ["a", "b", "c"], deadAfterMs: 1000, linkUp: true };
  const h = heard([
    ["b", { at: 1000, bye: false }],
    ["c", { at: 1500, bye: false }],
  ]);
  assert.deepEqual(peerLiveness({ ...base, heard: h, now: 1999 }).live, ["a", "b", "c"]);
  assert.deepEqual(peerLiveness({ ...base, heard: h, now: 2000 }).live, ["a", "c"]);
  const bye = heard([
    ["b", { at: 1990, bye: true }],
    ["c", { at: 1500, bye: false }],
  ]);
  assert.deepEqual(peerLiveness({ ...base, heard: bye, now: 2000 }).live, ["a", "c"]);
});

test("a host in a minority, with its link down, or leaving may hold nothing", () => {
  const base = { self: "a", hosts: ["a", "b", "c"], deadAfterMs: 1000, now: 5000 };
  const none = heard([]);
  const minority = peerLiveness({ ...base, heard: none, linkUp: true });
  assert.equal(minority.mayHold, false);
  assert.equal(minority.reason, "no_quorum");
  assert.deepEqual(minority.live, []);
  const withB = heard([["b", { at: 4900, bye: false }]]);
  assert.equal(peerLiveness({ ...base, heard: withB, linkUp: true }).mayHold, true);
  const down = peerLiveness({ ...base, heard: withB, linkUp: false });
  assert.deepEqual([down.mayHold, down.reason, down.live], [false, "link_down", ["b"]]);
  const leaving = peerLiveness({ ...base, heard: withB, linkUp: true, leaving: true });
  assert.deepEqual([leaving.mayHold, leaving.reason, leaving.live], [false, "leaving", ["b"]]);
});

test("quorum: a strict majority from three hosts up, one for one or two", () => {
  assert.deepEqual([1, 2, 3, 4, 5, 6].map(defaultQuorum), [1, 1, 2, 3, 3, 4]);
  // two hosts: the survivor of a failure keeps serving
  const alone = peerLiveness({
    self: "a",
    hosts: ["a", "b"],
    heard: heard([]),
    now: 10_000,
    deadAfterMs: 1000,
    linkUp: true,
  });
  assert.deepEqual([alone.mayHold, alone.live], [true, ["a"]]);
});

test("every host that sees the same live set agrees on the owners (no VIP held twice)", () => {
  fc.assert(
    fc.property(hosts, vips, (hs, vs) => {
      const views = hs.map((self) => {
        const h = new Map(hs.filter((x) => x !== self).map((x) => [x, { at: 0, bye: false }] as const));
        const l = peerLiveness({ self, hosts: hs, heard: h, now: 10, deadAfterMs: 1000, linkUp: true });
        return vipOwners(l.live, vs);
      });
      const held = hs.flatMap((self, i) => vipsOf(views[i]!, self));
      assert.equal(held.length, vs.length);
      assert.equal(new Set(held).size, vs.length);
    }),
  );
});
