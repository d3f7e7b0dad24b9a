/**
 * The fake of RouteApplier: the same `ip -batch` lines the real adapter sends
 * (routeCommands) interpreted on an in-memory rule list and route tables, and read back
 * in the shapes `ip -j rule show` / `ip -j route show table T` give (route-drift.ts).
 * `deleteRules()` and `flushTable()` simulate someone else editing the kernel (drift).
 * Does not: model routing decisions, devices or any rule other than passlb's fwmark rules.
 */
import {
  type ExistingRule,
  type PolicyRoute,
  type RouteApplier,
  RULE_PREF,
  routeCommands,
} from "./policy-routes.ts";
import type { Fam } from "./render/nft-state.ts";
import type { IpRouteRow, ObservedRouting } from "./route-drift.ts";

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
    for (const family of [4, 6] as const)
      for (const line of routeCommands(family, this.#rules.get(family)!, routes)) this.#run(family, line);
  }

  async read(tables: readonly { family: Fam; table: number }[]): Promise<ObservedRouting> {
    const rules = [4, 6].flatMap((f) =>
      this.#rules.get(f as Fam)!.map((r) => ({ family: f as Fam, mark: r.mark, table: r.table })),
    );
    return {
      rules,
      tables: tables.map((t) => ({ ...t, rows: [...(this.#tables.get(`${t.family}/${t.table}`) ?? [])] })),
    };
  }

  /** drift: `ip rule del pref 3100 …` of every passlb rule of a family */
  deleteRules(family: Fam): void {
    this.#rules.set(family, []);
  }

  /** drift: `ip route flush table T` */
  flushTable(family: Fam, table: number): void {
    this.#tables.delete(`${family}/${table}`);
  }

  #run(family: Fam, line: string): void {
    let m = /^rule del pref (\d+) fwmark 0x([0-9a-f]+) table (\d+)$/.exec(line);
    if (m) {
      const [mark, table] = [Number.parseInt(m[2]!, 16), Number(m[3])];
      const rules = this.#rules.get(family)!;
      const i = rules.findIndex((r) => r.mark === mark && r.table === table);
      if (Number(m[1]) !== RULE_PREF || i < 0) throw new Error(`fake routes: no such rule: ${line}`);
      rules.splice(i, 1);
      return;
    }
    m = /^rule add pref (\d+) fwmark 0x([0-9a-f]+) table (\d+)$/.exec(line);
    if (m) {
      this.#rules.get(family)!.push({ mark: Number.parseInt(m[2]!, 16), table: Number(m[3]) });
      return;
    }
    m = /^route flush table (\d+)$/.exec(line);
    if (m) {
      this.#tables.delete(`${family}/${m[1]}`);
      return;
    }
    m = /^route replace default via (\S+) table (\d+)$/.exec(line);
    if (m) {
      this.#tables.set(`${family}/${m[2]}`, [{ dst: "default", gateway: m[1]! }]);
      return;
    }
    throw new Error(`fake routes: cannot interpret ${line}`);
  }
}
