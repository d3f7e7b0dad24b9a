/**
 * Drift of passlb's policy routing (issue 16): how the rules at passlb's preference and the
 * routes in its tables, as the kernel holds them, differ from the route list passlb last
 * installed. Pure.
 *
 * - expectedRouting: the one desired route list (PolicyRoute[], policy-routes.ts) → the
 *   canonical rule and route lines that must exist, and the tables to read;
 * - routingDrift: expected vs observed (`ip -j rule show`, `ip route show table all`, read
 *   by RouteApplier.read) → a short description of the first difference, or undefined.
 * Compared as sets of canonical lines, so order and fields passlb does not set (dev, metric,
 * flags, IPv6 pref) do not count. A rule at passlb's preference that it does not want, or a
 * route it does not want in one of its tables, is drift too (someone added it).
 *
 * Encapsulated routes (routed nodes, `--forward encap`) come from the same desired list
 * (kernelRoutesOf) and are read back in the same form; the tunnel devices themselves are
 * not compared here (a deleted device takes its routes with it, which is drift).
 * Does not: run `ip` (src/drivers/ip-routes.ts), repair (the controller re-syncs the routes).
 */

import type { Fam } from "../nftables/render/nft-state.ts";
import { kernelRoutesOf, type PolicyRoute, RULE_PREF, wantedRules } from "./policy-routes.ts";

/** One route of one of passlb's tables as `ip route show table all` prints it (the fields
 * passlb reads; text, since iproute2's JSON loses an encap route's destination). */
export interface IpRouteRow {
  readonly dst?: string;
  readonly gateway?: string;
  readonly dev?: string;
  readonly type?: string;
}

export interface ObservedRouting {
  /** passlb's rules (policy-routes.ts parseRules: canonical lines), per family */
  readonly rules: readonly { readonly family: Fam; readonly line: string }[];
  /** the rows of each table that was asked for */
  readonly tables: readonly {
    readonly family: Fam;
    readonly table: number;
    readonly rows: readonly IpRouteRow[];
  }[];
}

export interface ExpectedRouting {
  readonly rules: ReadonlySet<string>;
  readonly routes: ReadonlySet<string>;
  /** the tables whose routes must be read (every table passlb routes through) */
  readonly tables: readonly { readonly family: Fam; readonly table: number }[];
}

const ruleLine = (family: Fam, line: string): string => `ipv${family} rule ${line}`;

/** The rules and routes a route list asks for: the rule tree of policy-routes.ts
 * wantedRules (`ip rule fwmark M lookup M` per node and the jumps to it) and, in table
 * M, the rows policy-routes.ts kernelRoutesOf gives (routeCommands installs exactly these):
 * `default via <node>` on the shared segment; through a tunnel, one route per VIP, compared
 * by its next hop (`via`, GUE) or its device (lightweight-tunnel `encap ip … dev`). */
export function expectedRouting(routes: readonly PolicyRoute[], pref = RULE_PREF): ExpectedRouting {
  const rules = new Set<string>();
  const lines = new Set<string>();
  const tables: { family: Fam; table: number }[] = [];
  for (const r of routes) tables.push({ family: r.family, table: r.mark >>> 0 });
  for (const family of [4, 6] as const)
    for (const line of wantedRules(family, routes, pref)) rules.add(ruleLine(family, line));
  for (const k of kernelRoutesOf(routes)) {
    const words = k.spec.split(/\s+/);
    const after = (w: string) => {
      const i = words.indexOf(w);
      return i < 0 ? undefined : words[i + 1];
    };
    const via = after("via");
    const how = via !== undefined ? `via ${via}` : `dev ${after("dev") ?? "?"}`;
    lines.add(`ipv${k.family} table ${k.table >>> 0} ${k.dst} ${how}`);
  }
  return { rules, routes: lines, tables };
}

/** A kernel route row in the same form as expectedRouting's lines. */
export function observedRouteLine(family: Fam, table: number, row: IpRouteRow): string {
  const dst = row.dst ?? "?";
  const how = row.gateway !== undefined ? `via ${row.gateway}` : `dev ${row.dev ?? "?"}`;
  return `ipv${family} table ${table >>> 0} ${row.type && row.type !== "unicast" ? `${row.type} ` : ""}${dst} ${how}`;
}

/** The first difference between what passlb installed and what the kernel holds. */
export function routingDrift(expected: ExpectedRouting, observed: ObservedRouting): string | undefined {
  const rules = new Set(observed.rules.map((r) => ruleLine(r.family, r.line)));
  for (const r of expected.rules) if (!rules.has(r)) return `policy rule missing (${r})`;
  for (const r of rules) if (!expected.rules.has(r)) return `unexpected policy rule (${r})`;
  const routes = new Set<string>();
  for (const t of observed.tables)
    for (const row of t.rows) routes.add(observedRouteLine(t.family, t.table, row));
  for (const r of expected.routes) if (!routes.has(r)) return `route missing (${r})`;
  for (const r of routes) if (!expected.routes.has(r)) return `unexpected route (${r})`;
  return undefined;
}
