import assert from "node:assert/strict";
import { test } from "node:test";
import { generationOf } from "../nftables/nft-generation.ts";
import { parseRoutes, parseRules } from "./policy-routes.ts";
import { expectedRouting, routingDrift } from "./route-drift.ts";

const a = { family: 4 as const, mark: 0x5a000001, via: "198.51.100.11" };
const b = { family: 6 as const, mark: 0x5a800001, via: "fd00:198:51:100::11" };

// iproute2 6.1 output, captured in a namespace after `ip -batch` of wantedRules' lines
// (`ip -j -4 rule show`, `ip -4 route show table all`)
const RULES4 =
  '[{"priority":0,"src":"all","table":"local"},{"priority":3100,"not":null,"src":"all","fwmark":"0x5a000000","fwmask":"0xff000000","goto":3199},{"priority":3101,"src":"all","fwmark":"0x5a000000","fwmask":"0xffffffc0","goto":3103},{"priority":3102,"src":"all","goto":3199},{"priority":3103,"src":"all","fwmark":"0x5a000001","table":"1509949441"},{"priority":3199,"src":"all","nop":null},{"priority":32766,"src":"all","table":"main"},{"priority":32767,"src":"all","table":"default"}]';
const RULES6 =
  '[{"priority":0,"src":"all","table":"local"},{"priority":3100,"not":null,"src":"all","fwmark":"0x5a000000","fwmask":"0xff000000","goto":3199},{"priority":3101,"src":"all","fwmark":"0x5a800000","fwmask":"0xffffffc0","goto":3103},{"priority":3102,"src":"all","goto":3199},{"priority":3103,"src":"all","fwmark":"0x5a800001","table":"1518338049"},{"priority":3199,"src":"all","nop":null},{"priority":32766,"src":"all","table":"main"}]';
const ROUTES4 = "default via 198.51.100.11 dev plbv0 table 1509949441 \n";
const ROUTES6 = "default via fd00:198:51:100::11 dev plbv0 table 1518338049 metric 1024 pref medium\n";
const rowsOf = (text: string, table: number) =>
  parseRoutes(text)
    .filter((r) => r.table === table)
    .map(({ table: _, ...row }) => row);

function observed(rules4 = RULES4, rules6 = RULES6, routes4 = ROUTES4, routes6 = ROUTES6) {
  return {
    rules: [
      ...parseRules(rules4).map((line) => ({ family: 4 as const, line })),
      ...parseRules(rules6).map((line) => ({ family: 6 as const, line })),
    ],
    tables: [
      { family: 4 as const, table: a.mark, rows: rowsOf(routes4, a.mark) },
      { family: 6 as const, table: b.mark, rows: rowsOf(routes6, b.mark) },
    ],
  };
}

test("route drift: the kernel as installed is no drift; fields passlb does not set do not count", () => {
  const want = expectedRouting([a, b]);
  assert.deepEqual(want.tables, [
    { family: 4, table: a.mark },
    { family: 6, table: b.mark },
  ]);
  assert.equal(routingDrift(want, observed()), undefined);
});

test("route drift: a deleted rule, a flushed table, a changed next hop, an added rule or route", () => {
  const want = expectedRouting([a, b]);
  const noRule = RULES4.replace(/,\{"priority":3103[^}]*\}/, "");
  assert.equal(
    routingDrift(want, observed(noRule)),
    "policy rule missing (ipv4 rule pref 3103 fwmark 0x5a000001 table 1509949441)",
  );
  // a jump of the tree gone is drift too: that group's packets would miss their rule
  const noJump = RULES4.replace(/,\{"priority":3101[^}]*\}/, "");
  assert.equal(
    routingDrift(want, observed(noJump)),
    "policy rule missing (ipv4 rule pref 3101 fwmark 0x5a000000/0xffffffc0 goto 3103)",
  );
  assert.equal(
    routingDrift(want, observed(RULES4, RULES6, "")),
    "route missing (ipv4 table 1509949441 default via 198.51.100.11)",
  );
  assert.match(
    routingDrift(want, observed(RULES4, RULES6, ROUTES4.replace("100.11", "100.99"))) ?? "",
    /^route missing/,
  );
  const extraRule = RULES4.replace(
    '{"priority":32766',
    '{"priority":3103,"src":"all","fwmark":"0x5a000002","table":"1509949442"},{"priority":32766',
  );
  assert.equal(
    routingDrift(want, observed(extraRule)),
    "unexpected policy rule (ipv4 rule pref 3103 fwmark 0x5a000002 table 1509949442)",
  );
  // someone else's rule inside passlb's preferences (a mark outside its range) is not passlb's
  const foreign = RULES4.replace(
    '{"priority":32766',
    '{"priority":3150,"src":"all","fwmark":"0x1","table":"100"},{"priority":32766',
  );
  assert.equal(routingDrift(want, observed(foreign)), undefined);
  const extraRoute = `${ROUTES4}192.0.2.0/24 dev plbv0 table 1509949441 scope link \n`;
  assert.equal(
    routingDrift(want, observed(RULES4, RULES6, extraRoute)),
    "unexpected route (ipv4 table 1509949441 192.0.2.0/24 dev plbv0)",
  );
  // a rule pointing at the wrong table is both missing and unexpected: the first is named
  assert.match(
    routingDrift(want, observed(RULES4.replace('"table":"1509949441"', '"table":"254"'))) ?? "",
    /missing/,
  );
});

test("nft monitor: generation lines (nft 1.0.6 text), other lines ignored", () => {
  assert.equal(generationOf("# new generation 12 by process 4567 (nft)"), 12);
  assert.equal(generationOf("add element inet passlb m1 { 3 : 0x5a000001 }"), undefined);
  assert.equal(generationOf("# new generation"), undefined);
});
