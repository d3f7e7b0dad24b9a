/**
 * Adapter: the kernel routing table the BGP speaker learns VIP routes from
 * (specs/scale-out.md §0: "Announce a VIP = `ip route add VIP/32 dev lo table 4242 proto
 * static`. Withdraw = `del`."). The table is consulted by no routing rule, so the routes
 * never change how this host forwards; they only tell BIRD (bird-config.ts `protocol kernel
 * … learn`) what to announce. Idempotent: `replace` to add, a missing route on delete is
 * not an error, and `list` reads the table back (`ip -j route show table N`) so a restarted
 * passlb reconciles what a previous one left. Only host routes (/32, /128) on `lo` with
 * `proto static` are passlb's; anything else in the table is left alone.
 */
import { spawn } from "node:child_process";
import { isIPv6 } from "node:net";
import { PasslbError } from "../../errors.ts";

/** The narrow interface the BGP announcer uses; `fakeVipRoutes` in tests. */
export interface VipRouteTable {
  /** the VIPs (addresses) that have a route in the table now */
  list(): Promise<string[]>;
  add(vip: string): Promise<void>;
  remove(vip: string): Promise<void>;
}

/** The table id passlb uses unless told otherwise (the spec's measured setup). */
export const DEFAULT_KERNEL_TABLE = 4242;

function ip(args: readonly string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn("ip", args, { stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (b: Buffer) => {
      stdout += b.toString();
    });
    child.stderr.on("data", (b: Buffer) => {
      stderr += b.toString();
    });
    child.on("error", (e) => resolve({ code: null, stdout, stderr: e.message }));
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** `netns`: run every `ip` inside that network namespace (`ip -n`; tests). */
export function kernelVipRoutes(options: { table: number; netns?: string }): VipRouteTable {
  const table = String(options.table);
  const ns = options.netns ? ["-n", options.netns] : [];
  const prefix = (vip: string) => `${vip}/${isIPv6(vip) ? 128 : 32}`;
  const fail = (what: string, stderr: string) =>
    new PasslbError("announce_failed", `${what} in table ${table}: ${stderr.trim()}`, {
      details: { table: options.table, stderr },
    });
  return {
    async list() {
      const out: string[] = [];
      for (const family of ["-4", "-6"]) {
        const r = await ip([
          ...ns,
          "-j",
          family,
          "route",
          "show",
          "table",
          table,
          "proto",
          "static",
          "dev",
          "lo",
        ]);
        if (r.code !== 0) {
          // an empty table that never existed is reported as an error by some iproute2 versions
          if (/does not exist|No such/.test(r.stderr)) continue;
          throw fail("listing VIP routes", r.stderr);
        }
        for (const row of JSON.parse(r.stdout || "[]") as { dst?: string }[])
          if (row.dst && row.dst !== "default") out.push(row.dst.replace(/\/(32|128)$/, ""));
      }
      return out;
    },
    async add(vip) {
      const r = await ip([
        ...ns,
        "route",
        "replace",
        prefix(vip),
        "dev",
        "lo",
        "table",
        table,
        "proto",
        "static",
      ]);
      if (r.code !== 0) throw fail(`adding the route of ${vip}`, r.stderr);
    },
    async remove(vip) {
      const r = await ip([
        ...ns,
        "route",
        "del",
        prefix(vip),
        "dev",
        "lo",
        "table",
        table,
        "proto",
        "static",
      ]);
      if (r.code !== 0 && !/No such process|not found/i.test(r.stderr))
        throw fail(`deleting the route of ${vip}`, r.stderr);
    },
  };
}

/** In-memory stand-in with the same contract (idempotent add and remove). */
export function fakeVipRoutes(): VipRouteTable & { readonly routes: Set<string> } {
  const routes = new Set<string>();
  return {
    routes,
    list: async () => [...routes],
    add: async (vip) => {
      routes.add(vip);
    },
    remove: async (vip) => {
      routes.delete(vip);
    },
  };
}
