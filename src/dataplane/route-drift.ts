/**
 * Drift of passlb's policy routing (issue 16): how the rules at passlb's preference and the
 * routes in its tables, as the kernel holds them, differ from the route list passlb last
 * installed. Pure.
 *
 * - expectedRouting: the one desired route list (PolicyRoute[], policy-routes.ts) → the
 *   canonical rule and route lines that must exist, and the tables to read;
 * - routingDrift: expected vs observed (`ip -j rule show`, `ip -j route show table T`, read
 *   by RouteApplier.read) → a short description of the first difference, or undefined.
 * Compared as sets of canonical lines, so order and fields passlb does not set (dev, metric,
 * flags, IPv6 pref) do not count. A rule at passlb's preference that it does not want, or a
 * route it does not want in one of its tables, is drift too (someone added it).
 *
 * Plugging in more kernel routing (tunnel devices and encapsulated routes for routed nodes):
 * a new kind of entry adds its lines in `expectedRouting` from the same desired list and
 * reads the same fields back in `observedRouteLine`; the controller needs no change.
 * Does not: run `ip` (policy-routes.ts), repair (the controller re-syncs the routes).
 */
import type { PolicyRoute } from "./policy-routes.ts";
import type { Fam } from "./render/nft-state.ts";

/** One row of `ip -j route show table T` (iproute2's JSON; fields passlb reads). */
export interface IpRouteRow {
  readonly dst?: string;
  readonly gateway?: string;
  readonly dev?: string;
  readonly type?: string;
}

export interface ObservedRouting {
  /** the rules at passlb's preference with a fwmark, per family */
  readonly rules: readonly { readonly family: Fam; readonly mark: number; readonly table: number }[];
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

const hexMark = (mark: number): string => `0x${(mark >>> 0).toString(16)}`;
const ruleLine = (family: Fam, mark: number, table: number): string =>
  `ipv${family} rule fwmark ${hexMark(mark)} table ${table >>> 0}`;

/** The rules and routes a route list asks for: `ip rule fwmark M lookup M` and
 * `default via <node>` in table M (policy-routes.ts routeCommands installs exactly these). */
export function expectedRouting(routes: readonly PolicyRoute[]): ExpectedRouting {
  const rules = new Set<string>();
  const lines = new Set<string>();
  const tables: { family: Fam; table: number }[] = [];
  for (const r of routes) {
    const table = r.mark >>> 0;
    rules.add(ruleLine(r.family, r.mark, table));
    lines.add(`ipv${r.family} table ${table} default via ${r.via}`);
    tables.push({ family: r.family, table });
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
  const rules = new Set(observed.rules.map((r) => ruleLine(r.family, r.mark, r.table)));
  for (const r of expected.rules) if (!rules.has(r)) return `policy rule missing (${r})`;
  for (const r of rules) if (!expected.rules.has(r)) return `unexpected policy rule (${r})`;
  const routes = new Set<string>();
  for (const t of observed.tables)
    for (const row of t.rows) routes.add(observedRouteLine(t.family, t.table, row));
  for (const r of expected.routes) if (!routes.has(r)) return `route missing (${r})`;
  for (const r of routes) if (!expected.routes.has(r)) return `unexpected route (${r})`;
  return undefined;
}
