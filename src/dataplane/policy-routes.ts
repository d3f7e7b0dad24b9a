/**
 * Delivery to the node, unchanged (DESIGN.md "Data path"): a packet whose mark names a
 * node is routed by policy routing — `ip rule fwmark <mark> lookup <mark>` and, in that
 * table, a default route via the node's address on the shared segment. The mark doubles as
 * the table id (nft-state.ts), so the routes follow from the `nexthops4/6` maps alone.
 *
 * - policyRoutesOf (pure): the routes an NftState asks for;
 * - routeCommands (pure): `ip -batch` lines that take the rules at our preference from what
 *   exists to what is wanted (stale rules deleted and their tables flushed, missing rules
 *   added, every route replaced — idempotent);
 * - createPolicyRoutes (adapter): reads `ip -j rule show`, runs the batches; `read` lists
 *   the rules at our preference and the routes of given tables (`ip -j rule show`, one
 *   `ip -j -batch` of `route show table T`) for the drift check (route-drift.ts compares).
 * Tunnelling for routed networks is a later step. Does not: touch rules at other
 * preferences, enable forwarding or change rp_filter (the host's setup; docs say which).
 */
import { spawn } from "node:child_process";
import { PasslbError } from "../errors.ts";
import type { Fam, NftState } from "./render/nft-state.ts";
import type { IpRouteRow, ObservedRouting } from "./route-drift.ts";

export interface PolicyRoute {
  readonly family: Fam;
  readonly mark: number;
  readonly via: string;
}

export interface RouteApplier {
  sync(routes: readonly PolicyRoute[]): Promise<void>;
  /** The rules at passlb's preference and the routes of these tables, as the kernel holds
   * them (the drift check). Throws PasslbError `route_failed`. */
  read(tables: readonly { readonly family: Fam; readonly table: number }[]): Promise<ObservedRouting>;
}

/** Rule preference of passlb's policy rules: before `main` (32766), after `local` (0). */
export const RULE_PREF = 3100;

export function policyRoutesOf(state: NftState): PolicyRoute[] {
  const out: PolicyRoute[] = [];
  for (const family of [4, 6] as const)
    for (const [mark, via] of state.sets.get(`nexthops${family}`)?.elements ?? [])
      out.push({ family, mark: Number(mark) >>> 0, via });
  return out;
}

export interface ExistingRule {
  readonly mark: number;
  readonly table: number;
}

export function routeCommands(
  family: Fam,
  existing: readonly ExistingRule[],
  wanted: readonly PolicyRoute[],
  pref = RULE_PREF,
): string[] {
  const want = wanted.filter((r) => r.family === family);
  const wantMarks = new Set(want.map((r) => r.mark));
  const have = new Set<number>();
  const out: string[] = [];
  for (const r of existing) {
    if (wantMarks.has(r.mark) && r.table === r.mark && !have.has(r.mark)) {
      have.add(r.mark);
      continue;
    }
    out.push(`rule del pref ${pref} fwmark 0x${r.mark.toString(16)} table ${r.table}`);
    if (!wantMarks.has(r.table)) out.push(`route flush table ${r.table}`);
  }
  for (const r of want) {
    out.push(`route replace default via ${r.via} table ${r.mark}`);
    if (!have.has(r.mark)) out.push(`rule add pref ${pref} fwmark 0x${r.mark.toString(16)} table ${r.mark}`);
  }
  return out;
}

/** Parses `ip -j rule show` into our rules (those at `pref` with a fwmark). */
export function parseRules(json: string, pref = RULE_PREF): ExistingRule[] {
  const rows = JSON.parse(json === "" ? "[]" : json) as {
    priority?: number;
    fwmark?: string;
    table?: string;
  }[];
  return rows
    .filter((r) => r.priority === pref && r.fwmark !== undefined)
    .map((r) => ({ mark: Number(r.fwmark) >>> 0, table: Number(r.table) >>> 0 }));
}

export function createPolicyRoutes(options: { netns?: string; pref?: number } = {}): RouteApplier {
  const pref = options.pref ?? RULE_PREF;
  const run = (args: string[], input?: string) =>
    new Promise<{ code: number | null; stdout: string; stderr: string; error?: Error }>((resolve) => {
      const argv = options.netns ? ["netns", "exec", options.netns, "ip", ...args] : args;
      const child = spawn("ip", argv, { stdio: ["pipe", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      let error: Error | undefined;
      child.stdout.on("data", (b: Buffer) => {
        stdout += b.toString();
      });
      child.stderr.on("data", (b: Buffer) => {
        stderr += b.toString();
      });
      child.on("error", (e) => {
        error = e;
      });
      child.on("close", (code) =>
        resolve(error ? { code, stdout, stderr, error } : { code, stdout, stderr }),
      );
      child.stdin.on("error", () => {});
      child.stdin.end(input ?? "");
    });
  const rulesOf = async (family: Fam): Promise<ExistingRule[]> => {
    const listed = await run([`-${family}`, "-j", "rule", "show"]);
    if (listed.error || listed.code !== 0)
      throw new PasslbError("route_failed", `ip rule show failed: ${listed.error?.message ?? listed.stderr}`);
    return parseRules(listed.stdout, pref);
  };
  return {
    async read(tables) {
      const rules: { family: Fam; mark: number; table: number }[] = [];
      const out: { family: Fam; table: number; rows: IpRouteRow[] }[] = [];
      for (const family of [4, 6] as const) {
        for (const r of await rulesOf(family)) rules.push({ family, ...r });
        const mine = tables.filter((t) => t.family === family);
        if (mine.length === 0) continue;
        const input = mine.map((t) => `route show table ${t.table >>> 0}\n`).join("");
        const listed = await run([`-${family}`, "-j", "-batch", "-"], input);
        if (listed.error || listed.code !== 0)
          throw new PasslbError(
            "route_failed",
            `ip route show (IPv${family}) failed: ${listed.error?.message ?? listed.stderr.trim()}`,
          );
        const arrays = parseRouteBatch(listed.stdout);
        if (arrays.length !== mine.length)
          throw new PasslbError(
            "route_failed",
            `ip route show (IPv${family}): ${arrays.length} answers for ${mine.length} tables`,
          );
        for (const [i, t] of mine.entries()) out.push({ family, table: t.table, rows: arrays[i]! });
      }
      return { rules, tables: out };
    },
    async sync(routes) {
      for (const family of [4, 6] as const) {
        const lines = routeCommands(family, await rulesOf(family), routes, pref);
        if (lines.length === 0) continue;
        const r = await run([`-${family}`, "-force", "-batch", "-"], `${lines.join("\n")}\n`);
        if (r.code !== 0)
          throw new PasslbError(
            "route_failed",
            `ip -batch (policy routes, IPv${family}) failed: ${r.stderr.trim()}`,
            {
              details: { stderr: r.stderr.slice(0, 4000) },
            },
          );
      }
    },
  };
}

/** `ip -j -batch` of `route show table T` lines: one JSON array per line, in order. */
export function parseRouteBatch(stdout: string): IpRouteRow[][] {
  return stdout
    .split("\n")
    .filter((l) => l.trim() !== "")
    .map((l) => JSON.parse(l) as IpRouteRow[]);
}

/** Same routes in the same order. */
export function sameRoutes(a: readonly PolicyRoute[] | undefined, b: readonly PolicyRoute[]): boolean {
  if (!a || a.length !== b.length) return false;
  return a.every((r, i) => r.mark === b[i]!.mark && r.via === b[i]!.via && r.family === b[i]!.family);
}

/** Both lists, one route per mark (b's wins): what must exist while moving from a to b. */
export function unionRoutes(a: readonly PolicyRoute[], b: readonly PolicyRoute[]): PolicyRoute[] {
  const byMark = new Map<number, PolicyRoute>();
  for (const r of a) byMark.set(r.mark, r);
  for (const r of b) byMark.set(r.mark, r);
  return [...byMark.values()];
}
