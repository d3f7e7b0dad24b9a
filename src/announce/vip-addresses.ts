/**
 * Adapter: the host side of holding VIPs on the segment interface (docs/vip-announce.md
 * "Holding a VIP"). keepalived adds and removes the VIP addresses itself and sends the
 * gratuitous ARP / unsolicited NA; this adapter does only what keepalived does not:
 *
 *   - `prepare`: a VIP that is local on the host would be delivered to the host instead of
 *     forwarded, so the `local` routing rule moves from preference 0 to 3200, after passlb's
 *     fwmark rules at 3100 (new rule added before the old one is removed, so local delivery
 *     never lapses; IPv4 and IPv6). Nothing else on the host changes.
 *   - `onInterface` / `remove`: after keepalived died without cleaning up (SIGKILL, OOM) its
 *     VIP addresses stay on the interface and the kernel would keep answering ARP for them
 *     beside the peer that took over; the driver removes them (only addresses that are VIPs
 *     passlb was asked to manage are ever removed).
 */
import { spawn } from "node:child_process";
import { isIPv6 } from "node:net";
import { PasslbError } from "../errors.ts";

/** The narrow interface the keepalived driver uses. */
export interface VipAddresses {
  /** once at start: rule order */
  prepare(): Promise<void>;
  /** the host addresses (/32, /128) on the interface now */
  onInterface(): Promise<Set<string>>;
  remove(vip: string): Promise<void>;
}

/** where the `local` rule goes: after passlb's policy rules (policy-routes.ts, prefs 3100-3199) */
export const LOCAL_RULE_PREF = 3200;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function run(cmd: string, args: readonly string[], timeoutMs = 5000): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { stdio: ["ignore", "pipe", "pipe"] });
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

async function must(cmd: string, args: readonly string[], what: string): Promise<Run> {
  const r = await run(cmd, args);
  if (r.code !== 0)
    throw new PasslbError("announce_failed", `${what}: ${cmd} ${args.join(" ")}: ${r.stderr.trim()}`, {
      details: { stderr: r.stderr.slice(0, 2000) },
    });
  return r;
}

const prefix = (vip: string) => (isIPv6(vip) ? `${vip}/128` : `${vip}/32`);

export function kernelVipAddresses(options: {
  interface: string;
  /** tests: run `ip -n NETNS …` */
  netns?: string;
}): VipAddresses {
  const dev = options.interface;
  const ns = options.netns === undefined ? [] : ["-n", options.netns];
  return {
    async prepare() {
      for (const family of ["-4", "-6"]) {
        const rules = JSON.parse(
          (await must("ip", [...ns, family, "-j", "rule", "show"], "list rules")).stdout || "[]",
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
            [...ns, family, "rule", "add", "pref", `${LOCAL_RULE_PREF}`, "lookup", "local"],
            "move local rule",
          );
        if (local(0))
          await must("ip", [...ns, family, "rule", "del", "pref", "0", "lookup", "local"], "move local rule");
      }
    },
    async onInterface() {
      const r = await must("ip", [...ns, "-j", "addr", "show", "dev", dev], "list addresses");
      const rows = JSON.parse(r.stdout || "[]") as { addr_info?: { local?: string; prefixlen?: number }[] }[];
      return new Set(
        rows.flatMap((row) =>
          (row.addr_info ?? [])
            .filter((a) => a.prefixlen === 32 || a.prefixlen === 128)
            .map((a) => a.local ?? ""),
        ),
      );
    },
    async remove(vip) {
      const r = await run("ip", [...ns, "addr", "del", prefix(vip), "dev", dev]);
      // already gone is fine
      if (r.code !== 0 && !/Cannot assign|not found|No such/i.test(r.stderr))
        throw new PasslbError("announce_failed", `release ${vip}: ${r.stderr.trim()}`);
    },
  };
}

/** In-memory stand-in with the same interface (unit tests). */
export function fakeVipAddresses(
  initial: Iterable<string> = [],
): VipAddresses & { readonly on: Set<string> } {
  const on = new Set(initial);
  return {
    on,
    async prepare() {},
    async onInterface() {
      return new Set(on);
    },
    async remove(vip) {
      on.delete(vip);
    },
  };
}
