/**
 * The `ip` driver of the LB host's policy routing (docs/architecture.md "Drivers"): runs
 * `ip` in the host or a namespace, makes sure the tunnel devices exist and are up, reads
 * `ip -j rule show` and passlb's route tables, and runs the batches that
 * src/lb-host/routing/policy-routes.ts computes (the pure part: what the kernel must hold and the
 * commands that get it there). Its fake is fake-ip-routes.ts.
 */
import { spawn } from "node:child_process";
import { PasslbError } from "../errors.ts";
import type { Fam } from "../lb-host/nftables/render/nft-state.ts";
import { deviceCommands, type Forward, lbDeviceList, ROUTE_FORWARD } from "../lb-host/routing/encap.ts";
import {
  type ExistingRoute,
  type ExistingRule,
  parseRoutes,
  parseRules,
  type RouteApplier,
  RULE_PREF,
  routeCommands,
} from "../lb-host/routing/policy-routes.ts";
import type { IpRouteRow } from "../lb-host/routing/route-drift.ts";

export interface PolicyRouteOptions {
  readonly netns?: string;
  readonly pref?: number;
  /** encap: the tunnel devices are created (or raised) before every route sync */
  readonly forward?: Forward;
}

export type Run = (
  args: readonly string[],
  input?: string,
) => Promise<{ code: number | null; stdout: string; stderr: string; error?: Error }>;

/** `ip` in the host or in a namespace (tests); resolves with the exit code, never rejects. */
export function ipRunner(netns?: string): Run {
  return (args, input) =>
    new Promise((resolve) => {
      const argv = netns ? ["netns", "exec", netns, "ip", ...args] : [...args];
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
}

export function createPolicyRoutes(options: PolicyRouteOptions = {}): RouteApplier {
  const pref = options.pref ?? RULE_PREF;
  const forward = options.forward ?? ROUTE_FORWARD;
  const run = ipRunner(options.netns);
  const listRules = async (family: Fam): Promise<ExistingRule[]> => {
    const listed = await run([`-${family}`, "-j", "rule", "show"]);
    if (listed.error || listed.code !== 0)
      throw new PasslbError("route_failed", `ip rule show failed: ${listed.error?.message ?? listed.stderr}`);
    return parseRules(listed.stdout, pref);
  };
  const listRoutes = async (family: Fam): Promise<ExistingRoute[]> => {
    const tables = await run([`-${family}`, "route", "show", "table", "all"]);
    if (tables.error || tables.code !== 0)
      throw new PasslbError(
        "route_failed",
        `ip route show table all failed: ${tables.error?.message ?? tables.stderr}`,
      );
    return parseRoutes(tables.stdout);
  };
  return {
    async read(tables) {
      const rules: { family: Fam; line: ExistingRule }[] = [];
      const out: { family: Fam; table: number; rows: IpRouteRow[] }[] = [];
      for (const family of [4, 6] as const) {
        for (const line of await listRules(family)) rules.push({ family, line });
        const mine = tables.filter((t) => t.family === family);
        if (mine.length === 0) continue;
        const routes = await listRoutes(family);
        for (const t of mine)
          out.push({
            family,
            table: t.table,
            rows: routes.filter((r) => r.table === t.table >>> 0).map(({ table: _, ...row }) => row),
          });
      }
      return { rules, tables: out };
    },
    async sync(routes) {
      if (forward.mode === "encap" && routes.some((r) => r.encap)) await ensureDevices(run, forward);
      for (const family of [4, 6] as const) {
        const lines = routeCommands(family, await listRules(family), routes, pref, await listRoutes(family));
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

/** Creates the tunnel devices that are missing, refuses a same-named device of another
 * kind, and sets MTU and up on all (idempotent). */
export async function ensureDevices(run: Run, forward: Extract<Forward, { mode: "encap" }>): Promise<void> {
  for (const d of lbDeviceList(forward.encap)) {
    const shown = await run(["-d", "-j", "link", "show", "dev", d.name]);
    const [add, raise] = deviceCommands(d);
    if (shown.code !== 0) {
      const r = await run(add!);
      if (r.code !== 0)
        throw new PasslbError(
          "tunnel_failed",
          `ip ${add!.join(" ")} failed: ${r.error?.message ?? r.stderr.trim()} (does this kernel have ${forward.encap.kind}?)`,
          { details: { stderr: r.stderr.slice(0, 4000) } },
        );
    } else assertLinkKind(shown.stdout, d.name, d.kernelKind);
    const r = await run(raise!);
    if (r.code !== 0)
      throw new PasslbError("tunnel_failed", `ip ${raise!.join(" ")} failed: ${r.stderr.trim()}`);
  }
}

/** An existing device must be of the kind passlb would create (`ip -d -j link show` output). */
export function assertLinkKind(shown: string, name: string, kernelKind: string): void {
  const kind = (JSON.parse(shown) as { linkinfo?: { info_kind?: string } }[])[0]?.linkinfo?.info_kind;
  if (kind !== kernelKind)
    throw new PasslbError("tunnel_failed", `device ${name} exists as ${kind ?? "?"}, not ${kernelKind}`);
}
