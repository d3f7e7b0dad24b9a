/**
 * What BIRD really exports to each router, against what this host should announce
 * (docs/vip-announce.md "Checked from the wire", BGP). The engine's status says which VIPs
 * are announced (their route is in the kernel table and a session of the family is up:
 * bgp-decision.ts); BIRD's export table (`birdc show route export <protocol>`, BIRD 2 doc
 * "show route": CZ-NIC/bird@v2.0.12:doc/bird.sgml) says what each Established session
 * carries. A filter edited by hand, a kernel protocol disabled, or a route BIRD did not
 * learn makes them differ:
 *   - `bgp_not_exported`: announced, but missing from an Established session of its family;
 *   - `bgp_unexpected_export`: exported, but not announced (withdrawn, or no VIP at all).
 * `exportProblems` is pure; `readBirdExports` runs birdc (an adapter, a few lines).
 */
import { spawn } from "node:child_process";
import type { WireVipCheck } from "../wire-verdict.ts";
import { bgpSessionsOf, parseBirdProtocols, parseBirdRouteExport } from "./bird-status.ts";

export interface SessionExports {
  /** BIRD protocol name (`peer1`) */
  readonly name: string;
  readonly peer: string;
  readonly established: boolean;
  /** prefixes in its export table; undefined when birdc did not answer */
  readonly exported: readonly string[] | undefined;
}

const familyOf = (address: string) => (address.includes(":") ? "IPv6" : "IPv4");
const hostPrefix = (vip: string) => `${vip}/${vip.includes(":") ? 128 : 32}`;

export function exportProblems(input: {
  /** the VIPs this host announces now (the engine's `held`) */
  readonly announced: readonly string[];
  /** every VIP of the plans (so an export of a withdrawn VIP names it) */
  readonly known: readonly string[];
  readonly sessions: readonly SessionExports[];
}): WireVipCheck[] {
  const out = new Map<string, WireVipCheck>();
  const up = input.sessions.filter((s) => s.established && s.exported !== undefined);
  for (const vip of input.announced) {
    const missing = up.filter(
      (s) => familyOf(s.peer) === familyOf(vip) && !s.exported!.includes(hostPrefix(vip)),
    );
    if (missing.length > 0)
      out.set(vip, {
        vip,
        problem: "bgp_not_exported",
        answers: [],
        message: `${vip}: announced but not exported to ${missing.map((s) => `${s.name} (${s.peer})`).join(", ")}`,
      });
  }
  const wanted = new Set(input.announced.map(hostPrefix));
  for (const s of up)
    for (const prefix of s.exported!) {
      if (wanted.has(prefix)) continue;
      const vip = prefix.replace(/\/\d+$/, "");
      const what = input.known.includes(vip) ? "withdrawn here" : "not a VIP of this host";
      const before = out.get(vip);
      out.set(vip, {
        vip,
        problem: "bgp_unexpected_export",
        answers: [],
        message: before
          ? `${before.message}; ${s.name} (${s.peer})`
          : `${vip}: exported to ${s.name} (${s.peer}) but ${what}`,
      });
    }
  for (const vip of input.announced)
    if (!out.has(vip) && up.some((s) => familyOf(s.peer) === familyOf(vip)))
      out.set(vip, { vip, problem: null, answers: [], message: `${vip}: exported to every session` });
  return [...out.values()].sort((a, b) => (a.vip < b.vip ? -1 : 1));
}

function birdc(command: readonly string[], args: readonly string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    const child = spawn(command[0]!, [...command.slice(1), ...args], { stdio: ["ignore", "pipe", "ignore"] });
    let stdout = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), 3000);
    child.stdout.on("data", (b: Buffer) => {
      stdout += b.toString();
    });
    child.on("error", () => {
      clearTimeout(timer);
      resolve(undefined);
    });
    child.on("close", (code) => {
      clearTimeout(timer);
      // birdc prints "Unable to connect to server control socket" without BIRD
      resolve(code === 0 && !/Unable to connect/.test(stdout) ? stdout : undefined);
    });
  });
}

/**
 * Reads BIRD's BGP sessions (`show protocols all`) and each one's export table (`show route
 * export NAME`) over the control socket; undefined when BIRD does not answer.
 * `command`: birdc and its leading arguments (default `["birdc"]`).
 */
export async function readBirdExports(
  socket: string,
  command: readonly string[] = ["birdc"],
): Promise<SessionExports[] | undefined> {
  const protocols = await birdc(command, ["-s", socket, "show", "protocols", "all"]);
  if (protocols === undefined) return undefined;
  const out: SessionExports[] = [];
  for (const s of bgpSessionsOf(parseBirdProtocols(protocols))) {
    const text = s.established
      ? await birdc(command, ["-s", socket, "show", "route", "export", s.name])
      : undefined;
    out.push({
      name: s.name,
      peer: s.peer,
      established: s.established,
      exported: text === undefined ? undefined : parseBirdRouteExport(text),
    });
  }
  return out;
}
