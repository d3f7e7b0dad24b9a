import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { markFor } from "../nftables/render/nft-state.ts";
import {
  type ExistingRule,
  type PolicyRoute,
  parseRules,
  RULE_PREF,
  routeCommands,
  rulePrefs,
  wantedRules,
} from "./policy-routes.ts";

/**
 * The kernel's policy-rule walk over canonical rule lines, as net/core/fib_rules.c
 * `fib_rules_lookup` does it: rules in preference order (insertion order within one); a
 * matching `goto` continues at the first rule of its target preference, a `nop` does
 * nothing, a matching lookup ends the walk (our tables always hold a route). `not` inverts
 * the selector; `fwmark M/MASK` matches when (mark ^ M) & MASK is 0. Returns the table (or
 * "past" when the walk left passlb's rules) and how many rules it evaluated.
 */
function walk(rules: readonly ExistingRule[], mark: number): { table: number | "past"; evaluated: number } {
  const parsed = rules
    .map((line, order) => {
      const m =
        /^pref (\d+)( not)?(?: fwmark (0x[0-9a-f]+)(?:\/(0x[0-9a-f]+))?)? (?:goto (\d+)|table (\d+)|nop)$/.exec(
          line,
        );
      if (!m) throw new Error(`walk: cannot read ${line}`);
      return {
        pref: Number(m[1]),
        order,
        not: m[2] !== undefined,
        mark: m[3] === undefined ? undefined : Number(m[3]) >>> 0,
        mask: m[4] === undefined ? 0xffffffff : Number(m[4]) >>> 0,
        goto: m[5] === undefined ? undefined : Number(m[5]),
        table: m[6] === undefined ? undefined : Number(m[6]),
      };
    })
    .sort((a, b) => a.pref - b.pref || a.order - b.order);
  let evaluated = 0;
  for (let i = 0; i < parsed.length; i++) {
    const r = parsed[i]!;
    evaluated++;
    const selected = r.mark === undefined ? true : ((mark ^ r.mark) & r.mask) >>> 0 === 0;
    if (selected === r.not) continue;
    if (r.goto !== undefined) {
      const j = parsed.findIndex((x) => x.pref === r.goto);
      if (j < 0) continue; // an unresolved goto is skipped
      i = j - 1;
    } else if (r.table !== undefined) return { table: r.table, evaluated };
  }
  return { table: "past", evaluated };
}

const routesOf = (family: 4 | 6, indexes: readonly number[]): PolicyRoute[] =>
  indexes.map((i) => ({
    family,
    mark: markFor(family, i),
    via: family === 4 ? "198.51.100.11" : "fd00::11",
  }));

test("rule tree: 1,000 node marks, every one reaches its table in ≤ 1 + groups + 1 + 64 rules; unmarked in 2", () => {
  const indexes = Array.from({ length: 1000 }, (_, i) => i + 1);
  for (const family of [4, 6] as const) {
    const rules = wantedRules(family, routesOf(family, indexes));
    const groups = Math.ceil(1001 / 64);
    assert.equal(rules.filter((l) => l.startsWith(`pref ${RULE_PREF + 1} `)).length, groups);
    let worst = 0;
    for (const i of indexes) {
      const mark = markFor(family, i);
      const r = walk(rules, mark);
      assert.equal(r.table, mark, `mark ${i}`);
      worst = Math.max(worst, r.evaluated);
    }
    assert.ok(worst <= 1 + groups + 1 + 64, `worst ${worst}`);
    // an unmarked packet, or one with someone else's mark: the skip rule, then the end's nop
    assert.deepEqual(walk(rules, 0), { table: "past", evaluated: 2 });
    assert.deepEqual(walk(rules, 0x4000), { table: "past", evaluated: 2 });
    // a mark of passlb's range that no node has: past the rules, not into another node's table
    assert.equal(walk(rules, markFor(family, 5000)).table, "past");
  }
});

test("rule tree: marks past the groups' room go to the overflow preference, still found", () => {
  const p = rulePrefs();
  const room = (p.overflow - p.group0) * 64;
  const indexes = [1, room - 1, room, room + 1, 0x7fffff];
  const rules = wantedRules(4, routesOf(4, indexes));
  assert.ok(rules.includes(`pref ${p.miss} goto ${p.overflow}`));
  assert.equal(rules.filter((l) => l.startsWith(`pref ${p.overflow} `)).length, 3);
  for (const i of indexes) assert.equal(walk(rules, markFor(4, i)).table, markFor(4, i));
  assert.ok(wantedRules(4, routesOf(4, [1, room - 1])).includes(`pref ${p.miss} goto ${p.end}`));
  assert.deepEqual(wantedRules(4, routesOf(6, [1])), [], "no rules for a family without routes");
});

test("rule tree (property): any set of marks, each reaches its own table; others do not reach one", () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.integer({ min: 1, max: 0x7fffff }), { minLength: 1, maxLength: 60 }),
      (idx) => {
        const rules = wantedRules(6, routesOf(6, idx));
        for (const i of idx) assert.equal(walk(rules, markFor(6, i)).table, markFor(6, i));
        const absent = (idx.reduce((a, b) => Math.max(a, b), 0) % 0x7fffff) + 1;
        if (!idx.includes(absent)) assert.equal(walk(rules, markFor(6, absent)).table, "past");
      },
    ),
    { numRuns: 200 },
  );
});

test("routeCommands: from the flat rules of earlier versions, new rules before old ones go; tables stay", () => {
  const routes = routesOf(4, [1, 2, 70]);
  const flat = routes.map((r) => `pref ${RULE_PREF} fwmark 0x${r.mark.toString(16)} table ${r.mark}`);
  const lines = routeCommands(4, flat, routes);
  const firstDel = lines.findIndex((l) => l.startsWith("rule del"));
  const lastAdd = lines.findLastIndex((l) => l.startsWith("rule add"));
  assert.ok(lastAdd < firstDel, lines.join("\n"));
  assert.equal(lines.filter((l) => l.startsWith("rule del")).length, 3);
  assert.ok(!lines.some((l) => l.startsWith("route flush")), "the tables are still wanted");
  // already the tree: nothing to do for the rules
  const again = routeCommands(4, wantedRules(4, routes), routes);
  assert.ok(!again.some((l) => l.startsWith("rule ")));
});

test("routeCommands: a node gone takes its rule and table; a changed jump goes before its new form", () => {
  const p = rulePrefs();
  const room = (p.overflow - p.group0) * 64;
  const before = routesOf(4, [1, room + 5]);
  const after = routesOf(4, [1]);
  const lines = routeCommands(4, wantedRules(4, before), after);
  const gone = markFor(4, room + 5);
  assert.ok(lines.includes(`rule del pref ${p.overflow} fwmark 0x${gone.toString(16)} table ${gone}`));
  assert.ok(lines.includes(`route flush table ${gone}`));
  const del = lines.indexOf(`rule del pref ${p.miss} goto ${p.overflow}`);
  const add = lines.indexOf(`rule add pref ${p.miss} goto ${p.end}`);
  assert.ok(del >= 0 && add > del, lines.join("\n"));
});

test("parseRules: passlb's rules in its preferences as canonical lines; anyone else's left alone", () => {
  const json = JSON.stringify([
    { priority: 0, src: "all", table: "local" },
    { priority: 3100, not: null, src: "all", fwmark: "0x5a000000", fwmask: "0xff000000", goto: 3199 },
    { priority: 3103, src: "all", fwmark: "0x5a000001", table: "1509949441" },
    { priority: 3150, src: "all", fwmark: "0x1", table: "100" },
    { priority: 3150, src: "10.0.0.0/8", table: "100" },
    { priority: 3160, src: "all", iif: "eth0", goto: 3199 },
    { priority: 3199, src: "all", nop: null },
    { priority: 3200, src: "all", table: "local" },
  ]);
  assert.deepEqual(parseRules(json), [
    "pref 3100 not fwmark 0x5a000000/0xff000000 goto 3199",
    "pref 3103 fwmark 0x5a000001 table 1509949441",
    "pref 3199 nop",
  ]);
});
