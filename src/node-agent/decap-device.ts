/**
 * Adapter: makes a node's decapsulation side what decap.ts says — creates the missing
 * devices, raises them, writes the rp_filter settings under /proc/sys, gives the devices
 * the loose-mode address when needed and opens the GUE ports. Idempotent: `passlb agent
 * --decap` calls it at start and after every read of its input, so a deleted device or a
 * reset sysctl comes back within one sync period. Failures are PasslbErrors
 * (`tunnel_failed`, with ip's stderr). It never deletes a device and never touches devices
 * whose names are not its own.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { assertLinkKind, ipRunner } from "../drivers/ip-routes.ts";
import { PasslbError } from "../errors.ts";
import type { Encap } from "../lb-host/routing/encap.ts";
import { decapDevices, fouCommands, RP_LOOSE_ADDRESS, rpFilterPlan } from "./decap.ts";

export interface DecapResult {
  /** devices created this time */
  readonly created: readonly string[];
  /** host-wide changes made (strict rp_filter loosened), for the log */
  readonly notes: readonly string[];
}

export async function ensureDecap(encap: Encap, options: { procSys?: string } = {}): Promise<DecapResult> {
  const run = ipRunner();
  const proc = options.procSys ?? "/proc/sys";
  const devices = decapDevices(encap);
  const created: string[] = [];
  const fail = (what: string, stderr: string) =>
    new PasslbError("tunnel_failed", `${what}: ${stderr.trim()}`, {
      details: { stderr: stderr.slice(0, 4000) },
    });
  for (const d of devices) {
    const shown = await run(["-d", "-j", "link", "show", "dev", d.name]);
    if (shown.code !== 0) {
      const r = await run(["link", "add", d.name, ...d.args]);
      if (r.code !== 0)
        throw fail(`ip link add ${d.name} ${d.args.join(" ")} failed (does this kernel have it?)`, r.stderr);
      created.push(d.name);
    } else assertLinkKind(shown.stdout, d.name, d.kernelKind);
    const up = await run(["link", "set", d.name, "up"]);
    if (up.code !== 0) throw fail(`ip link set ${d.name} up failed`, up.stderr);
  }
  const all = Number(readFileSync(`${proc}/net/ipv4/conf/all/rp_filter`, "utf8").trim());
  const rp = rpFilterPlan(devices, all);
  for (const line of rp.sysctls) {
    const [key, value] = line.split("=");
    writeFileSync(`${proc}/${key!.replaceAll(".", "/")}`, `${value}\n`);
  }
  if (rp.address)
    for (const d of devices) {
      const r = await run(["addr", "replace", RP_LOOSE_ADDRESS, "dev", d.name]);
      if (r.code !== 0) throw fail(`ip addr replace ${RP_LOOSE_ADDRESS} dev ${d.name} failed`, r.stderr);
    }
  for (const argv of fouCommands(encap)) {
    const r = await run(argv);
    if (r.code !== 0 && !/exists/i.test(r.stderr)) throw fail(`ip ${argv.join(" ")} failed`, r.stderr);
  }
  return { created, notes: rp.note ? [rp.note] : [] };
}
