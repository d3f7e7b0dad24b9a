/**
 * Delivery to the node, unchanged (docs/dataplane-nftables.md): a packet whose mark names a
 * node is routed by policy routing — `ip rule fwmark <mark> lookup <mark>` (reached through
 * a two-level tree of `goto` rules, wantedRules) and, in that table, the node's path (encap.ts):
 *   - `route` (same segment): `default via NODE`;
 *   - `encap` (routed network, issue 21): one route per VIP of the family through the tunnel
 *     device, `VIP encap ip dst NODE dev plbvg0 …` (or `via NODE dev plbgue4 onlink` for GUE),
 *     and nothing else — the outer packet keeps the mark and is routed by this table too
 *     (docs/dataplane-nftables.md "Routed networks"), so a default here would loop it into the tunnel.
 * The mark doubles as the table id (nft-state.ts), so the routes follow from the
 * `nexthops4/6` maps (and, for encap, the `dispatch4/6` VIPs) alone.
 *
 * One desired structure: `PolicyRoute[]` (policyRoutesOf) — a mark, its node and, for encap,
 * the VIPs and route text. `kernelRoutesOf` flattens it to the exact (table, destination,
 * route text) rows the kernel must hold; routeCommands and a drift check compare against
 * those rows (`parseRoutes` reads `ip route show table all` into the same (table, dst) form).
 *
 * Pure: policyRoutesOf, kernelRoutesOf, routeCommands, parseRules, parseRoutes. The `ip`
 * driver that reads the kernel's rules and routes and runs the batches is
 * src/drivers/ip-routes.ts (its fake: src/drivers/fake-ip-routes.ts).
 * Does not: touch rules at other preferences or tables outside the mark range, enable
 * forwarding or change rp_filter (the host's setup; docs/dataplane-nftables.md says which).
 */

import { type Fam, MARK_BASE, MARK_INDEX_LIMIT, type NftState } from "../nftables/render/nft-state.ts";
import { encapRouteSpec, type Forward, nodePath, ROUTE_FORWARD } from "./encap.ts";
import type { IpRouteRow, ObservedRouting } from "./route-drift.ts";

export interface PolicyRoute {
  readonly family: Fam;
  readonly mark: number;
  /** the node's address */
  readonly via: string;
  /** present when the node is reached through the tunnel: its VIPs (host addresses of the
   * family, sorted) and the route text after each destination */
  readonly encap?: { readonly vips: readonly string[]; readonly spec: string };
}

/** One route the kernel must hold in one of our tables. `dst` as `ip -j route show` prints
 * it: `default`, or a host address without `/32` / `/128`. */
export interface KernelRoute {
  readonly family: Fam;
  readonly table: number;
  readonly dst: string;
  /** after the destination, as passed to `ip route replace DST …` */
  readonly spec: string;
}

export interface RouteApplier {
  sync(routes: readonly PolicyRoute[]): Promise<void>;
  /** The rules at passlb's preference and the routes of these tables, as the kernel holds
   * them (the drift check). Throws PasslbError `route_failed`. */
  read(tables: readonly { readonly family: Fam; readonly table: number }[]): Promise<ObservedRouting>;
}

/** Rule preference of passlb's policy rules: before `main` (32766), after `local` (0). */
export const RULE_PREF = 3100;

export function policyRoutesOf(state: NftState, forward: Forward = ROUTE_FORWARD): PolicyRoute[] {
  const out: PolicyRoute[] = [];
  for (const family of [4, 6] as const) {
    const hops = state.sets.get(`nexthops${family}`)?.elements;
    if (!hops) continue;
    let vips: string[] | undefined;
    for (const [mark, via] of hops) {
      const route: PolicyRoute = { family, mark: Number(mark) >>> 0, via };
      if (forward.mode === "encap" && nodePath(forward, via) === "encap") {
        vips ??= vipsOf(state, family);
        out.push({ ...route, encap: { vips, spec: encapRouteSpec(forward.encap, family, via) } });
      } else out.push(route);
    }
  }
  return out;
}

/** The VIPs of a family, read from the dispatch map's keys (`VIP . proto . port`). */
export function vipsOf(state: NftState, family: Fam): string[] {
  const vips = new Set<string>();
  for (const key of state.sets.get(`dispatch${family}`)?.elements.keys() ?? []) {
    const vip = key.split(" . ")[0];
    if (vip) vips.add(vip);
  }
  return [...vips].sort();
}

/** The rows the kernel must hold for these routes (the structure a drift check compares). */
export function kernelRoutesOf(routes: readonly PolicyRoute[]): KernelRoute[] {
  const out: KernelRoute[] = [];
  for (const r of routes) {
    if (!r.encap) out.push({ family: r.family, table: r.mark, dst: "default", spec: `via ${r.via}` });
    else
      for (const vip of r.encap.vips)
        out.push({ family: r.family, table: r.mark, dst: vip, spec: r.encap.spec });
  }
  return out;
}

/**
 * A rule of passlb's as a canonical line, also the arguments of `ip rule add` / `ip rule del`:
 * `pref 3103 fwmark 0x5a000001 table 1509949441`, `pref 3101 fwmark 0x5a000000/0xffffffc0
 * goto 3103`, `pref 3100 not fwmark 0x5a000000/0xff000000 goto 3199`, `pref 3199 nop`.
 */
export type ExistingRule = string;

/** A route found in one of our tables, with what the drift check compares (route-drift.ts). */
export interface ExistingRoute extends IpRouteRow {
  readonly table: number;
  readonly dst: string;
}

/**
 * passlb's rules take the preferences `pref` … `pref + RULE_SPAN − 1` (3100–3199), all before
 * the `local` rule an announcing LB host moves to 3200 (vip-addresses.ts).
 *
 * The kernel walks policy rules one by one for every routed packet (net/core/fib_rules.c
 * `fib_rules_lookup`), so one `fwmark M lookup M` rule per node made every packet through
 * the LB host — a VIP packet looking for its node's rule and, worse, every unmarked packet
 * (the replies the LB host routes back, anything else it routes) — walk all of them: with
 * 1,000 nodes, `fib_rules_lookup` was the top kernel symbol of a connection's path
 * (docs/benchmarks.md "Lab scale"). The rules are therefore a two-level tree of `goto`s:
 *   - `skip` (pref): a packet without a mark in passlb's range jumps to `end` (one rule);
 *   - `level1` (pref + 1): one rule per group of 2^RULE_GROUP_BITS marks,
 *     `fwmark <group>/<mask> goto <the group's pref>`;
 *   - `miss` (pref + 2): a mark of the range in no group jumps to `overflow` (when marks
 *     beyond the groups' room exist) or to `end`;
 *   - `group0` + g (pref + 3 …): group g's node rules, `fwmark M lookup M`;
 *   - `overflow` (pref + 98): the node rules of marks past the last group (flat: correct,
 *     only slower), `end` (pref + 99): a `nop`, the target of the jumps.
 * A marked packet so meets at most 1 + groups + 1 + 2^RULE_GROUP_BITS rules, an unmarked one
 * 2. Marks are given lowest index first (node-marks.ts), so the groups fill in order.
 */
export const RULE_SPAN = 100;
export const RULE_GROUP_BITS = 6;

export interface RulePrefs {
  readonly skip: number;
  readonly level1: number;
  readonly miss: number;
  readonly group0: number;
  readonly overflow: number;
  readonly end: number;
}

export function rulePrefs(pref = RULE_PREF): RulePrefs {
  return {
    skip: pref,
    level1: pref + 1,
    miss: pref + 2,
    group0: pref + 3,
    overflow: pref + RULE_SPAN - 2,
    end: pref + RULE_SPAN - 1,
  };
}

const hex = (n: number): string => `0x${(n >>> 0).toString(16)}`;
const RANGE_MASK = 0xff000000;
const MARK_INDEX_MASK = MARK_INDEX_LIMIT - 1;
const GROUP_MASK = ~((1 << RULE_GROUP_BITS) - 1) >>> 0;

/** The rules a family's routes need (canonical lines, see ExistingRule), in the order they
 * are added: jump targets before the jumps. None when the family has no route. */
export function wantedRules(family: Fam, routes: readonly PolicyRoute[], pref = RULE_PREF): ExistingRule[] {
  const marks = [...new Set(routes.filter((r) => r.family === family).map((r) => r.mark >>> 0))].sort(
    (a, b) => a - b,
  );
  if (marks.length === 0) return [];
  const p = rulePrefs(pref);
  const room = p.overflow - p.group0;
  const groups = new Map<number, number[]>();
  const overflow: number[] = [];
  for (const m of marks) {
    const g = (m & (MARK_INDEX_MASK >>> 0)) >>> RULE_GROUP_BITS;
    if (g < room) groups.set(g, [...(groups.get(g) ?? []), m]);
    else overflow.push(m);
  }
  const nodeRule = (at: number, m: number) => `pref ${at} fwmark ${hex(m)} table ${m >>> 0}`;
  return [
    `pref ${p.end} nop`,
    ...overflow.map((m) => nodeRule(p.overflow, m)),
    ...[...groups].flatMap(([g, ms]) => ms.map((m) => nodeRule(p.group0 + g, m))),
    ...[...groups].map(
      ([g, ms]) =>
        `pref ${p.level1} fwmark ${hex(ms[0]! & GROUP_MASK)}/${hex(GROUP_MASK)} goto ${p.group0 + g}`,
    ),
    `pref ${p.miss} goto ${overflow.length > 0 ? p.overflow : p.end}`,
    `pref ${p.skip} not fwmark ${hex(MARK_BASE)}/${hex(RANGE_MASK)} goto ${p.end}`,
  ];
}

/** The table a node rule looks up (undefined for the jumps and the nop). */
function ruleTable(line: ExistingRule): number | undefined {
  const m = / table (\d+)$/.exec(line);
  return m ? Number(m[1]) >>> 0 : undefined;
}

export function routeCommands(
  family: Fam,
  existing: readonly ExistingRule[],
  wanted: readonly PolicyRoute[],
  pref = RULE_PREF,
  existingRoutes: readonly ExistingRoute[] = [],
): string[] {
  const want = wanted.filter((r) => r.family === family);
  const wantMarks = new Set(want.map((r) => r.mark >>> 0));
  const wantRules = wantedRules(family, want, pref);
  const wantSet = new Set(wantRules);
  const have = new Set<string>();
  const unwanted: ExistingRule[] = [];
  for (const line of existing) {
    if (wantSet.has(line) && !have.has(line)) have.add(line);
    else unwanted.push(line); // not wanted, or a second copy
  }
  const out: string[] = [];
  const rows = kernelRoutesOf(want);
  // routes left over in a wanted table (a VIP gone, a node moved between paths) go first:
  // the packets of that node then meet only routes that are meant
  const keep = new Set(rows.map((k) => `${k.table} ${k.dst}`));
  for (const r of existingRoutes)
    if (wantMarks.has(r.table) && !keep.has(`${r.table} ${r.dst}`))
      out.push(`route del ${r.dst} table ${r.table}`);
  for (const k of rows) out.push(`route replace ${k.dst} ${k.spec} table ${k.table}`);
  // Jumps that go first: the kernel does not compare a `goto` target when it looks for an
  // existing rule (net/core/fib_rules.c rule_exists), so `pref 3102 goto 3199` cannot be
  // added while `pref 3102 goto 3198` is there. Node rules go after the new ones are in:
  // a node's rule moving between groups is never missing.
  const jumps = unwanted.filter((l) => ruleTable(l) === undefined);
  for (const line of jumps) out.push(`rule del ${line}`);
  for (const line of wantRules) if (!have.has(line)) out.push(`rule add ${line}`);
  const flushed = new Set<number>();
  for (const line of unwanted) {
    if (ruleTable(line) === undefined) continue;
    out.push(`rule del ${line}`);
    const table = ruleTable(line);
    if (table !== undefined && !wantMarks.has(table) && !flushed.has(table)) {
      flushed.add(table);
      out.push(`route flush table ${table}`);
    }
  }
  return out;
}

/** Parses `ip -j rule show` into passlb's rules: those in its preferences (`pref` …
 * `pref + RULE_SPAN − 1`) made only of what passlb writes (a fwmark in its range, a jump, a
 * `nop`, a numeric table); anything else there is someone else's and is left alone. */
export function parseRules(json: string, pref = RULE_PREF): ExistingRule[] {
  const rows = JSON.parse(json === "" ? "[]" : json) as Record<string, unknown>[];
  const out: ExistingRule[] = [];
  for (const r of rows) {
    const priority = r.priority;
    if (typeof priority !== "number" || priority < pref || priority >= pref + RULE_SPAN) continue;
    const line = ruleLineOf(r);
    if (line !== undefined) out.push(line);
  }
  return out;
}

const RULE_KEYS = new Set(["priority", "src", "not", "fwmark", "fwmask", "goto", "nop", "table"]);

function ruleLineOf(r: Record<string, unknown>): ExistingRule | undefined {
  if (Object.keys(r).some((k) => !RULE_KEYS.has(k)) || (r.src !== undefined && r.src !== "all"))
    return undefined;
  const words = [`pref ${r.priority}`];
  if ("not" in r) words.push("not");
  if (r.fwmark !== undefined) {
    const mark = Number(r.fwmark) >>> 0;
    const mask = r.fwmask === undefined ? 0xffffffff : Number(r.fwmask) >>> 0;
    if ((mark & RANGE_MASK) >>> 0 !== MARK_BASE) return undefined;
    words.push(`fwmark ${hex(mark)}${mask === 0xffffffff ? "" : `/${hex(mask)}`}`);
  }
  if (typeof r.goto === "number") words.push(`goto ${r.goto}`);
  else if ("nop" in r) words.push("nop");
  else if (typeof r.table === "string" && /^\d+$/.test(r.table)) words.push(`table ${Number(r.table) >>> 0}`);
  else return undefined;
  return words.join(" ");
}

const ROUTE_TYPES = new Set([
  "unicast",
  "local",
  "broadcast",
  "multicast",
  "throw",
  "unreachable",
  "prohibit",
  "blackhole",
  "nat",
  "anycast",
]);

/**
 * Parses `ip route show table all` (text) into the routes of tables in the node-mark range.
 * Text, not `-j`: iproute2's JSON prints a lightweight-tunnel route's encap destination
 * under the same `dst` key as the route's own destination (two `dst` keys in one object;
 * a JSON parser keeps the last), so the route's destination is lost there.
 */
export function parseRoutes(text: string): ExistingRoute[] {
  const out: ExistingRoute[] = [];
  for (const line of text.split("\n")) {
    const words = line.trim().split(/\s+/);
    const t = words.indexOf("table");
    if (t < 0) continue;
    const table = Number(words[t + 1]) >>> 0;
    if (!/^[0-9]+$/.test(words[t + 1] ?? "") || (table & 0xff000000) >>> 0 !== MARK_BASE) continue;
    const typed = ROUTE_TYPES.has(words[0] ?? "");
    const dst = typed ? words[1] : words[0];
    // the words after `via` and `dev` (an encap route's `dst NODE` follows `encap`)
    const after = (w: string) => {
      const i = words.indexOf(w);
      return i < 0 ? undefined : words[i + 1];
    };
    const gateway = after("via");
    const dev = after("dev");
    if (dst)
      out.push({
        table,
        dst,
        ...(typed && { type: words[0] }),
        ...(gateway !== undefined && { gateway }),
        ...(dev !== undefined && { dev }),
      });
  }
  return out;
}

/** Same routes in the same order. */
export function sameRoutes(a: readonly PolicyRoute[] | undefined, b: readonly PolicyRoute[]): boolean {
  if (!a || a.length !== b.length) return false;
  return a.every((r, i) => {
    const o = b[i]!;
    if (r.mark !== o.mark || r.via !== o.via || r.family !== o.family) return false;
    if (!r.encap || !o.encap) return r.encap === o.encap;
    return r.encap.spec === o.encap.spec && r.encap.vips.join() === o.encap.vips.join();
  });
}

/** Both lists, one route per mark (b's wins; the VIPs of both when both encapsulate the
 * same way): what must exist while moving from a to b. */
export function unionRoutes(a: readonly PolicyRoute[], b: readonly PolicyRoute[]): PolicyRoute[] {
  const byMark = new Map<number, PolicyRoute>();
  for (const r of a) byMark.set(r.mark, r);
  for (const r of b) {
    const before = byMark.get(r.mark);
    if (r.encap && before?.encap && before.encap.spec === r.encap.spec && before.via === r.via) {
      const vips = [...new Set([...before.encap.vips, ...r.encap.vips])].sort();
      byMark.set(r.mark, { ...r, encap: { vips, spec: r.encap.spec } });
    } else byMark.set(r.mark, r);
  }
  return [...byMark.values()];
}
