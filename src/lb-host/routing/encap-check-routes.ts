/**
 * Adapter: keeps the tunnel check's rule and routes (encap-check.ts) in the LB host's
 * kernel. `sync(addresses)` makes sure the tunnel devices exist (the same ensureDevices
 * the VIP routes use), asks the main table which source it picks toward each address
 * (`ip -j route get`: the rule does not match it, it has no `ipproto`), reads the rules at
 * ENCAP_CHECK_PREF and the check tables, and runs the difference as one `ip -batch` per
 * family — nothing when nothing differs. The LB calls it when the checked addresses change
 * and on every drift-check tick, so a deleted route or rule comes back within one tick.
 * `sync([], false)` removes the check (an LB host started without `--encap-check`).
 * Failures are PasslbErrors `route_failed` / `tunnel_failed` with ip's stderr.
 */

import { ensureDevices, ipRunner } from "../../drivers/ip-routes.ts";
import { PasslbError } from "../../errors.ts";
import type { Forward } from "./encap.ts";
import {
  type CheckedAddress,
  type CheckObserved,
  ENCAP_CHECK_TABLE,
  encapCheckCommands,
  encapCheckRoutes,
  type PortRange,
  parseCheckRules,
} from "./encap-check.ts";

export interface EncapCheckRoutes {
  sync(addresses: readonly string[], enabled?: boolean): Promise<{ changed: boolean }>;
}

export function createEncapCheckRoutes(options: {
  readonly forward: Forward;
  readonly ports: PortRange;
  readonly netns?: string;
}): EncapCheckRoutes {
  const run = ipRunner(options.netns);
  const { forward, ports } = options;
  const fail = (what: string, stderr: string) =>
    new PasslbError("route_failed", `${what}: ${stderr.trim()}`, {
      details: { stderr: stderr.slice(0, 4000) },
    });
  const observe = async (family: 4 | 6): Promise<CheckObserved> => {
    const rules = await run([`-${family}`, "-j", "rule", "show"]);
    if (rules.code !== 0) throw fail("ip rule show failed", rules.error?.message ?? rules.stderr);
    const routes = await run([`-${family}`, "route", "show", "table", String(ENCAP_CHECK_TABLE[family])]);
    // a table that was never filled is "not found" on some iproute2 versions: empty
    const lines = routes.code === 0 ? routes.stdout.split("\n").filter((l) => l.trim() !== "") : [];
    return { rules: parseCheckRules(rules.stdout), routes: lines };
  };
  return {
    async sync(addresses, enabled = true) {
      if (forward.mode !== "encap") return { changed: false };
      const checked: CheckedAddress[] = [];
      for (const address of enabled ? addresses : []) {
        const got = await run([address.includes(":") ? "-6" : "-4", "-j", "route", "get", address]);
        const src =
          got.code === 0 ? (JSON.parse(got.stdout) as { prefsrc?: string }[])[0]?.prefsrc : undefined;
        checked.push(src === undefined ? { address } : { address, src });
      }
      const wanted = encapCheckRoutes(forward, checked);
      if (wanted.length > 0) await ensureDevices(run, forward);
      let changed = false;
      for (const family of [4, 6] as const) {
        const lines = encapCheckCommands(family, await observe(family), wanted, ports, enabled);
        if (lines.length === 0) continue;
        changed = true;
        const r = await run([`-${family}`, "-force", "-batch", "-"], `${lines.join("\n")}\n`);
        if (r.code !== 0) throw fail(`ip -batch (tunnel check, IPv${family}) failed`, r.stderr);
      }
      return { changed };
    },
  };
}
