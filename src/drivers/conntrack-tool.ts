/**
 * Adapter: deletes conntrack entries through the kernel's conntrack interface with
 * Debian's `conntrack` tool (conntrack-tools), one `conntrack -D` per filter that a pure
 * step decided — on a node `conntrack-cleanup.ts`:
 *
 *   conntrack -D -f ipv4|ipv6 -p udp|sctp --orig-dst VIP --orig-port-dst PORT --reply-src ENDPOINT
 *
 * (the filter kube-proxy builds with `filterForIPPortNAT`, kubernetes
 * pkg/proxy/conntrack/cleanup.go); on an LB host `lb-flow-release.ts`, with `--mark NODE`
 * instead of `--reply-src`. conntrack prints "N flow entries have been deleted" on
 * stderr and exits 1 when N is 0; that is a result, not a failure. It decides nothing.
 */
import { spawn } from "node:child_process";
import { PasslbError } from "../errors.ts";
import type { IpFamily } from "../net/ip.ts";

/** What one `conntrack -D` matches: every field given must match. */
export interface ConntrackFilter {
  readonly family: IpFamily;
  readonly protocol: "udp" | "sctp";
  /** `--orig-dst`: the VIP */
  readonly origDst: string;
  /** `--orig-port-dst`: the listener's port */
  readonly origPortDst: number;
  /** `--reply-src`: an endpoint (node agent) */
  readonly replySrc?: string;
  /** `--mark`: a node's conntrack mark (LB host) */
  readonly mark?: number;
}

export interface ConntrackDriver {
  /** deletes the entries one filter names; resolves with how many the kernel removed */
  readonly deleteFlows: (filter: ConntrackFilter) => Promise<number>;
  /** the reply sources of the entries one filter names (`conntrack -L`), one per entry */
  readonly listReplySources: (filter: ConntrackFilter) => Promise<string[]>;
}

/** The conntrack command line for one filter (without the command itself). */
export function conntrackDeleteArgs(d: ConntrackFilter, verb: "-D" | "-L" = "-D"): string[] {
  return [
    verb,
    "-f",
    d.family === "IPv4" ? "ipv4" : "ipv6",
    "-p",
    d.protocol,
    "--orig-dst",
    d.origDst,
    "--orig-port-dst",
    String(d.origPortDst),
    ...(d.replySrc === undefined ? [] : ["--reply-src", d.replySrc]),
    ...(d.mark === undefined ? [] : ["--mark", String(d.mark)]),
  ];
}

/** Reads conntrack's "N flow entries have been deleted." line; undefined when absent. */
export function parseDeletedCount(stderr: string): number | undefined {
  const m = /(\d+) flow entr(?:y|ies) ha(?:s|ve) been deleted/.exec(stderr);
  return m ? Number(m[1]) : undefined;
}

/** The reply-direction source of every entry `conntrack -L` printed: the second `src=`
 * of a line (the first is the original direction's). */
export function parseReplySources(stdout: string): string[] {
  const out: string[] = [];
  for (const line of stdout.split("\n")) {
    const sources = [...line.matchAll(/\bsrc=(\S+)/g)];
    const reply = sources[1]?.[1];
    if (reply !== undefined) out.push(reply);
  }
  return out;
}

/** `command` is how to run conntrack: `["conntrack"]`, or `["ip", "netns", "exec", NS, "conntrack"]`. */
export function conntrackTool(command: readonly string[] = ["conntrack"]): ConntrackDriver {
  const [path, ...prefix] = command;
  if (path === undefined) throw new Error("conntrackTool: empty command");
  const run = (args: string[]) =>
    new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(path, [...prefix, ...args], { stdio: ["ignore", "pipe", "pipe"] });
      let stdout = "";
      let stderr = "";
      child.stdout.setEncoding("utf8").on("data", (s: string) => {
        stdout += s;
      });
      child.stderr.setEncoding("utf8").on("data", (s: string) => {
        stderr += s;
      });
      child.on("error", (e) =>
        reject(new PasslbError("conntrack_unavailable", `cannot run ${path}: ${e.message}`, { cause: e })),
      );
      child.on("close", (code) => resolve({ code, stdout, stderr }));
    });
  const failed = (args: string[], r: { code: number | null; stderr: string }) =>
    new PasslbError(
      "conntrack_failed",
      `conntrack ${args.join(" ")} failed (exit ${r.code}): ${r.stderr.trim()}`,
      {
        details: { stderr: r.stderr, exitCode: r.code },
      },
    );
  return {
    deleteFlows: async (d) => {
      const args = conntrackDeleteArgs(d);
      const r = await run(args);
      const n = parseDeletedCount(r.stderr);
      if ((r.code === 0 || r.code === 1) && n !== undefined) return n;
      throw failed(args, r);
    },
    listReplySources: async (d) => {
      const args = conntrackDeleteArgs(d, "-L");
      const r = await run(args);
      if (r.code !== 0) throw failed(args, r);
      return parseReplySources(r.stdout);
    },
  };
}
