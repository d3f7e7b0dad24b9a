/**
 * The fake of RouteApplier: the same `ip -batch` lines the real adapter sends
 * (routeCommands) interpreted on an in-memory rule list and route tables, and read back
 * in the shapes `ip -j rule show` / `ip route show table all` give (route-drift.ts).
 * `deleteRules()` and `flushTable()` simulate someone else editing the kernel (drift).
 * Does not: model routing decisions, devices or any rule other than passlb's own (the
 * node rules and the jumps of its rule tree).
 */

import type { Fam } from "../lb-host/nftables/render/nft-state.ts";
import {
  type ExistingRule,
  type PolicyRoute,
  type RouteApplier,
  RULE_PREF,
  RULE_SPAN,
  routeCommands,
} from "../lb-host/routing/policy-routes.ts";
import type { IpRouteRow, ObservedRouting } from "../lb-host/routing/route-drift.ts";

export class FakePolicyRoutes implements RouteApplier {
  /** every route list passed to sync */
  readonly calls: PolicyRoute[][] = [];
  readonly #rules = new Map<Fam, ExistingRule[]>([
    [4, []],
    [6, []],
  ]);
  /** `${family}/${table}` → rows */
  readonly #tables = new Map<string, IpRouteRow[]>();

  async sync(routes: readonly PolicyRoute[]): Promise<void> {
    this.calls.push([...routes]);
    for (const family of [4, 6] as const) {
      const existing = [...this.#tables.entries()]
        .filter(([k]) => k.startsWith(`${family}/`))
        .flatMap(([k, rows]) => rows.map((r) => ({ table: Number(k.split("/")[1]), dst: r.dst ?? "?" })));
      for (const line of routeCommands(family, this.#rules.get(family)!, routes, RULE_PREF, existing))
        this.#run(family, line);
    }
  }

  async read(tables: readonly { family: Fam; table: number }[]): Promise<ObservedRouting> {
    const rules = [4, 6].flatMap((f) =>
      this.#rules.get(f as Fam)!.map((line) => ({ family: f as Fam, line })),
    );
    return {
      rules,
      tables: tables.map((t) => ({ ...t, rows: [...(this.#tables.get(`${t.family}/${t.table}`) ?? [])] })),
    };
  }

  /** drift: `ip rule del` of every passlb rule of a family */
  deleteRules(family: Fam): void {
    this.#rules.set(family, []);
  }

  /** drift: `ip route flush table T` */
  flushTable(family: Fam, table: number): void {
    this.#tables.delete(`${family}/${table}`);
  }

  #run(family: Fam, line: string): void {
    // `rule add|del <line>`: the canonical rule lines of policy-routes.ts, as `ip` takes them
    let m = /^rule (add|del) (pref (\d+) .*)$/.exec(line);
    if (m) {
      const [verb, rule, pref] = [m[1], m[2]!, Number(m[3])];
      const rules = this.#rules.get(family)!;
      if (pref < RULE_PREF || pref >= RULE_PREF + RULE_SPAN)
        throw new Error(`fake routes: not our pref: ${line}`);
      if (verb === "add") {
        // as the kernel: an existing rule is found without comparing a `goto` target
        // (net/core/fib_rules.c rule_exists), so a jump whose target changes must go first
        const same = (r: string) => r.replace(/ goto \d+$/, " goto") === rule.replace(/ goto \d+$/, " goto");
        if (rules.some(same)) throw new Error(`fake routes: rule exists: ${line}`);
        rules.push(rule);
        return;
      }
      const i = rules.indexOf(rule);
      if (i < 0) throw new Error(`fake routes: no such rule: ${line}`);
      rules.splice(i, 1);
      return;
    }
    m = /^route flush table (\d+)$/.exec(line);
    if (m) {
      this.#tables.delete(`${family}/${m[1]}`);
      return;
    }
    m = /^route del (\S+) table (\d+)$/.exec(line);
    if (m) {
      const key = `${family}/${m[2]}`;
      this.#tables.set(
        key,
        (this.#tables.get(key) ?? []).filter((r) => r.dst !== m![1]),
      );
      return;
    }
    // `route replace DST SPEC table T`: `default via NODE`, or a VIP through the tunnel
    // (`encap ip … dev plbvg0 …`, or `via NODE dev plbgue4 onlink`)
    m = /^route replace (\S+) (.*) table (\d+)$/.exec(line);
    if (m) {
      const words = m[2]!.split(/\s+/);
      const after = (w: string) => {
        const i = words.indexOf(w);
        return i < 0 ? undefined : words[i + 1];
      };
      const via = after("via");
      const dev = after("dev");
      const row: IpRouteRow = {
        dst: m[1]!,
        ...(via !== undefined && { gateway: via }),
        ...(dev !== undefined && { dev }),
      };
      const key = `${family}/${m[3]}`;
      this.#tables.set(key, [...(this.#tables.get(key) ?? []).filter((r) => r.dst !== row.dst), row]);
      return;
    }
    throw new Error(`fake routes: cannot interpret ${line}`);
  }
}
