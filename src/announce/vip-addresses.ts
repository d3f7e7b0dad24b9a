/**
 * Adapter: the VIP addresses on this LB host's segment interface (docs/vip-announce.md
 * "Holding a VIP"). Holding a VIP = the address on the interface (`/32`, `/128` nodad), so
 * the kernel itself answers ARP and neighbour solicitations for it; taking one over is
 * announced with a gratuitous ARP (`arping -U`, iputils) for IPv4 and, for IPv6, with the
 * unsolicited neighbour advertisement the kernel sends when an address is added on an
 * interface with `ndisc_notify=1` (so no extra tool is needed).
 *
 * A VIP that is local on the host would be delivered to the host instead of forwarded:
 * `prepare` therefore moves the `local` routing rule from preference 0 to 3200, after
 * passlb's fwmark rules at 3100 (new rule added before the old one is removed, so local
 * delivery never lapses), and sets `ndisc_notify` on the interface. Nothing else on the
 * host changes. Only addresses that are VIPs passlb was asked to manage are ever removed.
 *
 * A held address carries a lifetime (`leaseSeconds`: the kernel's valid_lft and
 * preferred_lft) that the announcer renews while it runs (`renew`, about once a second). If
 * the process dies and its host does not, the kernel itself removes the addresses when the
 * lifetime runs out, so the host stops answering ARP for VIPs a peer has taken over instead
 * of answering beside it until the process restarts. `leaseSeconds: 0` holds addresses
 * forever (the kernel's default).
 */
import { spawn } from "node:child_process";
import { readFile, writeFile } from "node:fs/promises";
import { isIPv6 } from "node:net";
import { PasslbError } from "../errors.ts";

/** The narrow interface the announcer uses; `fakeVipAddresses` in tests. */
export interface VipAddresses {
  /** once at start: rule order and interface settings */
  prepare(): Promise<void>;
  /** which of `candidates` are on the interface now */
  held(candidates: readonly string[]): Promise<string[]>;
  add(vip: string): Promise<void>;
  /** the held addresses are still wanted: their lifetime starts again (one command for all) */
  renew(vips: readonly string[]): Promise<void>;
  remove(vip: string): Promise<void>;
  /** gratuitous ARP (IPv4); IPv6 is announced by the kernel on add */
  announce(vip: string): Promise<void>;
  /** the interface has carrier (operstate up or unknown) */
  linkUp(): Promise<boolean>;
}

/** where the `local` rule goes: after passlb's fwmark rules (policy-routes.ts RULE_PREF 3100) */
export const LOCAL_RULE_PREF = 3200;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: readonly string[], input?: string, timeoutMs = 5000): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: [input === undefined ? "ignore" : "pipe", "pipe", "pipe"] });
    if (input !== undefined) {
      child.stdin?.on("error", () => {}); // a command that exits early: its code reports it
      child.stdin?.end(input);
    }
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.stdout?.on("data", (b: Buffer) => {
      stdout += b.toString();
    });
    child.stderr?.on("data", (b: Buffer) => {
      stderr += b.toString();
    });
    child.on("error", (e) => {
      clearTimeout(timer);
      resolve({ code: null, stdout, stderr: e.message });
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

async function must(cmd: string, args: readonly string[], what: string, input?: string): Promise<Run> {
  const r = await run(cmd, args, input);
  if (r.code !== 0)
    throw new PasslbError("announce_failed", `${what}: ${cmd} ${args.join(" ")}: ${r.stderr.trim()}`, {
      details: { stderr: r.stderr.slice(0, 2000) },
    });
  return r;
}

const prefix = (vip: string) => (isIPv6(vip) ? `${vip}/128` : `${vip}/32`);

export function kernelVipAddresses(options: {
  interface: string;
  arping?: string;
  /** lifetime of a held address; 0: forever */
  leaseSeconds?: number;
}): VipAddresses {
  const dev = options.interface;
  const lease = options.leaseSeconds ?? 0;
  const life = lease > 0 ? ["valid_lft", String(lease), "preferred_lft", String(lease)] : [];
  /** `ip addr replace` arguments that hold `vip` (again), with its lifetime */
  const hold = (vip: string) => [
    "addr",
    "replace",
    prefix(vip),
    "dev",
    dev,
    ...life,
    ...(isIPv6(vip) ? ["nodad"] : []),
  ];
  return {
    async prepare() {
      for (const family of ["-4", "-6"]) {
        const rules = JSON.parse(
          (await must("ip", [family, "-j", "rule", "show"], "list rules")).stdout || "[]",
        ) as {
          priority?: number;
          table?: string;
          src?: string;
          fwmark?: string;
        }[];
        const local = (p: number) =>
          rules.some(
            (r) =>
              r.priority === p &&
              r.table === "local" &&
              (r.src === undefined || r.src === "all") &&
              r.fwmark === undefined,
          );
        if (!local(LOCAL_RULE_PREF))
          await must(
            "ip",
            [family, "rule", "add", "pref", `${LOCAL_RULE_PREF}`, "lookup", "local"],
            "move local rule",
          );
        if (local(0))
          await must("ip", [family, "rule", "del", "pref", "0", "lookup", "local"], "move local rule");
      }
      // IPv6: the kernel sends an unsolicited neighbour advertisement for a new address
      await writeFile(`/proc/sys/net/ipv6/conf/${dev}/ndisc_notify`, "1\n").catch(() => {});
    },
    async held(candidates) {
      const r = await must("ip", ["-j", "addr", "show", "dev", dev], "list addresses");
      const rows = JSON.parse(r.stdout || "[]") as { addr_info?: { local?: string; prefixlen?: number }[] }[];
      const on = new Set(
        rows.flatMap((row) =>
          (row.addr_info ?? [])
            .filter((a) => a.prefixlen === 32 || a.prefixlen === 128)
            .map((a) => a.local ?? ""),
        ),
      );
      return candidates.filter((v) => on.has(v));
    },
    async add(vip) {
      await must("ip", hold(vip), `hold ${vip}`);
    },
    async renew(vips) {
      if (lease === 0 || vips.length === 0) return;
      const batch = vips.map((v) => hold(v).join(" ")).join("\n");
      await must("ip", ["-batch", "-"], `renew ${vips.join(", ")}`, `${batch}\n`);
    },
    async remove(vip) {
      const r = await run("ip", ["addr", "del", prefix(vip), "dev", dev]);
      // already gone is fine
      if (r.code !== 0 && !/Cannot assign|not found|No such/i.test(r.stderr))
        throw new PasslbError("announce_failed", `release ${vip}: ${r.stderr.trim()}`);
    },
    async announce(vip) {
      if (isIPv6(vip)) return;
      await must(options.arping ?? "arping", ["-U", "-c", "1", "-w", "1", "-I", dev, vip], `announce ${vip}`);
    },
    async linkUp() {
      const state = (await readFile(`/sys/class/net/${dev}/operstate`, "utf8").catch(() => "down")).trim();
      return state === "up" || state === "unknown";
    },
  };
}

/** In-memory stand-in with the same interface: records every call. */
export function fakeVipAddresses(): VipAddresses & {
  readonly on: Set<string>;
  readonly calls: string[];
  link: boolean;
} {
  const on = new Set<string>();
  const calls: string[] = [];
  const fake = {
    on,
    calls,
    link: true,
    async prepare() {
      calls.push("prepare");
    },
    async held(candidates: readonly string[]) {
      return candidates.filter((c) => on.has(c));
    },
    async add(vip: string) {
      calls.push(`add ${vip}`);
      on.add(vip);
    },
    async renew(vips: readonly string[]) {
      calls.push(`renew ${vips.join(",")}`);
    },
    async remove(vip: string) {
      calls.push(`remove ${vip}`);
      on.delete(vip);
    },
    async announce(vip: string) {
      calls.push(`announce ${vip}`);
    },
    async linkUp() {
      return fake.link;
    },
  };
  return fake;
}
