/**
 * Adapter: the BGP lab's router (docs/lab.md "A router with BGP"): FRR's zebra, bfdd and
 * bgpd started inside the topology's `lb` namespace with the files of lab-bgp.ts, and the
 * router's view of a VIP read back from its kernel FIB (what FRR installed: the ECMP next
 * hops). Everything FRR needs lives in `<state>/frr`: configs, pid files, the zebra socket,
 * the vty sockets, the bfdd control socket and logs, so labs never share anything with
 * each other or with a system FRR. The daemons run as Debian's `frr` user (in the `frrvty`
 * group, which the Debian build requires: docs/lab.md "A router with BGP") and daemonise (`-d`);
 * `lab down` stops them with everything else in the namespace. `-P 0`: no vty TCP port.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { frrRouterFiles } from "./lab-bgp.ts";
import type { LabLayout } from "./lab-layout.ts";
import { sleep } from "./lab-shell.ts";

export const FRR_DIR = "/usr/lib/frr";

/** Why the BGP lab cannot run here, or undefined. */
export function labRouterUnavailable(): string | undefined {
  if (!existsSync(join(FRR_DIR, "bgpd"))) return "FRR is not installed (Debian package frr)";
  if (spawnSync("id", ["frr"]).status !== 0) return "the frr user is missing (Debian package frr creates it)";
  if (spawnSync("bird", ["--version"]).error) return "BIRD is not installed (Debian package bird2)";
  return undefined;
}

export async function startLabRouter(stateDir: string, layout: LabLayout): Promise<void> {
  if (!layout.bgp) return;
  const dir = join(stateDir, "frr");
  mkdirSync(dir, { recursive: true });
  for (const [name, text] of Object.entries(frrRouterFiles(layout.lbHosts, layout.bgp)))
    writeFileSync(join(dir, name), text);
  const chown = spawnSync("chown", ["-R", "frr:frr", dir], { encoding: "utf8" });
  if (chown.status !== 0) throw new Error(`lab router: chown frr ${dir}: ${chown.stderr}`);
  for (const daemon of ["zebra", "bfdd", "bgpd"] as const) {
    startDaemon(dir, layout.lb.ns, daemon);
    // bgpd and bfdd connect to zebra's socket: it must exist first
    if (daemon === "zebra")
      for (let i = 0; i < 100 && !existsSync(join(dir, "zserv.api")); i++) await sleep(50);
  }
}

export type FrrDaemon = "zebra" | "bfdd" | "bgpd";

/** An FRR daemon started in namespace `ns` with its files in `dir` (and the vty sockets there). */
export function startDaemon(dir: string, ns: string, daemon: FrrDaemon): void {
  const args = [
    "netns",
    "exec",
    ns,
    join(FRR_DIR, daemon),
    "-d",
    "-f",
    join(dir, `${daemon}.conf`),
    "-i",
    join(dir, `${daemon}.pid`),
    "-z",
    join(dir, "zserv.api"),
    "--vty_socket",
    dir,
    "-P",
    "0",
    "--log",
    `file:${join(dir, `${daemon}.log`)}`,
    ...(daemon === "bfdd" ? ["--bfdctl", join(dir, "bfdd.sock")] : []),
  ];
  const r = spawnSync("ip", args, { encoding: "utf8", timeout: 10_000 });
  if (r.status !== 0) throw new Error(`lab router: ${daemon} did not start: ${r.stderr}`);
}

/** A test's fault: the router's daemon SIGKILLed (`start` false), or started again as at first. */
export function labRouterDaemon(
  stateDir: string,
  layout: LabLayout,
  daemon: FrrDaemon,
  start: boolean,
): void {
  const dir = join(stateDir, "frr");
  if (start) startDaemon(dir, layout.lb.ns, daemon);
  else process.kill(Number(readFileSync(join(dir, `${daemon}.pid`), "utf8").trim()), "SIGKILL");
}

/** The router's next hops for a VIP now (its FIB, as FRR installed it). */
export function routerNextHops(layout: Pick<LabLayout, "lb">, vip: string): string[] {
  const r = spawnSync(
    "ip",
    ["-n", layout.lb.ns, "-j", vip.includes(":") ? "-6" : "-4", "route", "show", vip],
    {
      encoding: "utf8",
    },
  );
  const rows = JSON.parse(r.stdout || "[]") as {
    dst?: string;
    protocol?: string;
    gateway?: string;
    dev?: string;
    nexthops?: { gateway?: string; dev?: string }[];
  }[];
  const row = rows.find((x) => x.protocol === "bgp");
  if (!row) return [];
  const hops = row.nexthops ?? [row];
  return hops.map((h) => h.gateway ?? h.dev ?? "?").sort();
}
