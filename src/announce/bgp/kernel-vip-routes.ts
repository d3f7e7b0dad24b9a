/**
 * Adapter: the kernel routing table the BGP speaker learns VIP routes from
 * (docs/vip-announce.md "How a VIP is announced": announcing a VIP is a route to it in
 * table 4242, withdrawing it deletes the route). The table is consulted by no routing rule, so the routes
 * never change how this host forwards; they only tell BIRD (bird-config.ts `protocol kernel
 * … learn`) what to announce. Idempotent: `replace` to add, a missing route on delete is
 * not an error, and `list` reads the table back (`ip -j route show table N`) so a restarted
 * passlb reconciles what a previous one left. Routes on `lo` with `proto static` are passlb's:
 * host routes (/32, /128) of VIPs, and the aggregates of LoadBalancerBGPAdvertisements
 * (`PREFIX/LEN`, present while one of their VIPs is; never consulted for forwarding either);
 * anything else in the table is left alone.
 */
import { spawn } from "node:child_process";
import { isIPv6 } from "node:net";
import { PasslbError } from "../../errors.ts";

/** The narrow interface the BGP announcer uses; `fakeVipRoutes` in tests. */
export interface VipRouteTable {
  /** the routes in the table now: a VIP for a host route, `PREFIX/LEN` for an aggregate */
  list(): Promise<string[]>;
  add(vip: string): Promise<void>;
  remove(vip: string): Promise<void>;
}

/** The table id passlb uses unless told otherwise (the lab's measured setup, docs/vip-announce.md). */
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
  // a route key is a VIP (its host route) or `PREFIX/LEN` (an aggregate: bgp-advertisements.ts)
  const prefix = (key: string) => (key.includes("/") ? key : `${key}/${isIPv6(key) ? 128 : 32}`);
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
