/**
 * The pure parts of the wire checks (docs/vip-announce.md "Checked from the wire"): the
 * tools' real output (test/fixtures/wire/, captured from arping, ndisc6 and tcpdump) parsed,
 * the verdict per VIP, foreign VRRP speakers, `--vrid-range`.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { currentSpeakers, noteAdvert, parseVridRange, parseVrrpLine } from "./vrrp-adverts.ts";
import { parseArping, parseNdisc6 } from "./wire-answers.ts";
import { l2Verdict } from "./wire-verdict.ts";

const fixture = (name: string) =>
  readFileSync(new URL(`../../test/fixtures/wire/${name}`, import.meta.url), "utf8");
const B = "5e:b5:dc:86:86:80"; // the host at 192.0.2.3 in the captures
const C = "86:df:f1:ec:47:3e"; // the host at 192.0.2.4

test("arping and ndisc6 output: every answering MAC, none, or the tool's error", () => {
  assert.deepEqual(parseArping(fixture("arping-one.txt")), { asked: true, macs: [B], replies: 1 });
  assert.deepEqual(parseArping(fixture("arping-two.txt")).macs, [C, B]);
  assert.deepEqual(parseArping(fixture("arping-none.txt")), { asked: true, macs: [], replies: 0 });
  assert.deepEqual(parseArping(fixture("arping-holder.txt")).macs, [C]);
  const bad = parseArping(fixture("arping-error.txt"));
  assert.equal(bad.asked, false);
  assert.match(bad.error ?? "", /Device eth9 not available/);
  assert.deepEqual(parseNdisc6(fixture("ndisc6-one.txt")).macs, [B]);
  assert.deepEqual(parseNdisc6(fixture("ndisc6-two.txt")).macs, [C, B]);
  assert.deepEqual(parseNdisc6(fixture("ndisc6-none.txt")), { asked: true, macs: [], replies: 0 });
  assert.deepEqual(parseNdisc6(fixture("ndisc6-holder.txt")).macs, []);
  assert.equal(parseNdisc6(fixture("ndisc6-error.txt")).asked, false);
  assert.equal(parseArping("").asked, false);
});

test("verdict: one LB host's MAC agrees; two answers, a foreign MAC or silence are problems", () => {
  const hostMacs = new Map([[B, "lb-b"]]);
  const self = { host: "lb-a", mac: "36:B1:4F:B3:02:A5" };
  const v = (file: string, selfHolds = false, preferred = "lb-b") =>
    l2Verdict({
      vip: "203.0.113.1",
      answers: parseArping(fixture(file)),
      self,
      selfHolds,
      hostMacs,
      preferred,
    });
  // a non-holder asks: the holder answers alone
  assert.equal(v("arping-one.txt")?.problem, null);
  assert.equal(v("arping-one.txt")?.heldBy, "lb-b");
  // the preferred host cannot serve it: a failover, not a problem, but said
  assert.match(v("arping-one.txt", false, "lb-a")?.message ?? "", /ranking prefers lb-a/);
  // a second device answers: named by MAC, the LB host's by host
  const dup = v("arping-two.txt");
  assert.equal(dup?.problem, "duplicate_answer");
  assert.equal(dup?.message, `203.0.113.1: 2 answers: ${C} (unknown device), ${B} (lb-b)`);
  // the holder asks: its own kernel's answer counts from the address on its interface, and
  // any wire answer is a second one
  assert.equal(v("arping-none.txt", true)?.problem, null);
  assert.equal(v("arping-none.txt", true)?.heldBy, "lb-a");
  const fromHolder = v("arping-holder.txt", true);
  assert.equal(fromHolder?.problem, "duplicate_answer");
  assert.deepEqual(fromHolder?.answers, [{ mac: "36:b1:4f:b3:02:a5", host: "lb-a" }, { mac: C }]);
  // one MAC that is no LB host's
  const foreign = l2Verdict({
    vip: "203.0.113.1",
    answers: parseArping(fixture("arping-holder.txt")),
    self,
    selfHolds: false,
    hostMacs,
  });
  assert.equal(foreign?.problem, "foreign_mac");
  assert.match(foreign?.message ?? "", new RegExp(`answered by ${C}, which is no LB host's`));
  assert.equal(v("arping-none.txt")?.problem, "no_answer");
  // a tool that could not ask is no verdict (its error is reported apart)
  assert.equal(v("arping-error.txt"), undefined);
});

test("tcpdump's VRRP lines: adverts parsed; a foreign speaker on our VRIDs noted, ours and others' VRIDs not", () => {
  const lines = fixture("tcpdump-vrrp-foreign.txt").split("\n");
  const adverts = lines.map(parseVrrpLine).filter((a) => a !== undefined);
  assert.deepEqual(adverts[0], {
    mac: C,
    family: "IPv4",
    source: "192.0.2.4",
    destination: "224.0.0.18",
    version: 3,
    vrid: 3,
    priority: 100,
  });
  assert.equal(adverts[1]?.family, "IPv6");
  assert.equal(adverts[1]?.source, "fe80::84df:f1ff:feec:473e");
  assert.equal(parseVrrpLine("listening on eth0, link-type EN10MB (Ethernet)"), undefined);
  const context = (now: number, first = 1, last = 10) => ({
    interface: "eth0",
    ours: new Set(["192.0.2.2", "192.0.2.3"]),
    range: { first, last },
    now,
  });
  let speakers = noteAdvert([], adverts[0]!, context(1000));
  speakers = noteAdvert(speakers, adverts[0]!, context(1500));
  assert.equal(speakers.length, 1);
  assert.equal(speakers[0]?.adverts, 2);
  assert.equal(speakers[0]?.lastSeen, 1500);
  // VRID 3 outside our range is the site's business
  assert.deepEqual(noteAdvert([], adverts[0]!, context(1000, 100, 200)), []);
  // our own host's adverts are never foreign
  assert.deepEqual(noteAdvert([], { ...adverts[0]!, source: "192.0.2.3" }, context(1000)), []);
  assert.equal(currentSpeakers(speakers, 11_000, 10_000).length, 1);
  assert.equal(currentSpeakers(speakers, 11_501, 10_000).length, 0);
});

test("--vrid-range: A-B within 1..255, errors name the flag", () => {
  assert.deepEqual(parseVridRange("1-255"), { first: 1, last: 255 });
  assert.deepEqual(parseVridRange("42"), { first: 42, last: 42 });
  for (const bad of ["0-10", "10-256", "20-10", "a-b", "1-", ""])
    assert.match(parseVridRange(bad) as string, /^--vrid-range: ".*" is not A-B with 1 ≤ A ≤ B ≤ 255/);
});
