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
}

/** The conntrack command line for one filter (without the command itself). */
export function conntrackDeleteArgs(d: ConntrackFilter): string[] {
  return [
    "-D",
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

/** `command` is how to run conntrack: `["conntrack"]`, or `["ip", "netns", "exec", NS, "conntrack"]`. */
export function conntrackTool(command: readonly string[] = ["conntrack"]): ConntrackDriver {
  const [path, ...prefix] = command;
  if (path === undefined) throw new Error("conntrackTool: empty command");
  return {
    deleteFlows: (d) =>
      new Promise((resolve, reject) => {
        const args = conntrackDeleteArgs(d);
        const child = spawn(path, [...prefix, ...args], { stdio: ["ignore", "ignore", "pipe"] });
        let stderr = "";
        child.stderr.setEncoding("utf8").on("data", (s: string) => {
          stderr += s;
        });
        child.on("error", (e) =>
          reject(new PasslbError("conntrack_unavailable", `cannot run ${path}: ${e.message}`, { cause: e })),
        );
        child.on("close", (code) => {
          const n = parseDeletedCount(stderr);
          if ((code === 0 || code === 1) && n !== undefined) return resolve(n);
          reject(
            new PasslbError(
              "conntrack_failed",
              `conntrack ${args.join(" ")} failed (exit ${code}): ${stderr.trim()}`,
              { details: { stderr, exitCode: code } },
            ),
          );
        });
      }),
  };
}
