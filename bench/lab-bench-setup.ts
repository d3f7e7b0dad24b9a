/**
 * What the lab benchmarks share (bench/lab-*.bench.ts, bench/*-failover.bench.ts):
 * - shortConnectionSysctls: the sysctls that let many short connections, and their
 *   TIME_WAIT and conntrack entries, go quickly (wrk with `Connection: close`);
 * - clientSysctls: what the client namespaces of a connection-rate run set on top, so that
 *   one client address reusing its ports does not measure TIME_WAIT collisions (below);
 * - podHttpResponder: an HAProxy config answering every HTTP request with 200 on :8080,
 *   the pods' responder for the connection-rate runs;
 * - namedTopology: a copy of a lab fixture under a name of this process (parallel runs never
 *   share namespaces), its Service paths made absolute, in a temporary folder the caller
 *   removes;
 * - for bench/lab-packet-rate.bench.ts and bench/lab-scale.bench.ts: benchArg, benchMedian,
 *   benchPrerequisites (root, commands, apt-get of the missing ones), labHostShell (exec,
 *   background processes and waiting for a listener in a lab's hosts), wrkConnectionRate,
 *   clientTimestampSysctls (`tcp_timestamps=2` in the clients) and podHttpResponderDualStack.
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, mkdtempSync, openSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { procSysScript } from "../src/lab/lab-host-commands.ts";
import { XDP_REASONS } from "../src/lb-host/xdp/xdp-layout.ts";

export const shortConnectionSysctls = (): string =>
  procSysScript([
    "net.ipv4.ip_local_port_range=1024 65000",
    "net.ipv4.tcp_tw_reuse=1",
    "net.netfilter.nf_conntrack_tcp_timeout_time_wait=1",
  ]);

/**
 * TCP timestamps without a random offset per connection (`tcp_timestamps=2`, Linux ≥ 4.10;
 * Documentation/networking/ip-sysctl.rst). A client making back-to-back connections from one
 * address cycles through its ports in seconds, while the pod keeps each closed connection in
 * TIME_WAIT for 60 s. With random offsets the new SYN's timestamp looks older than the
 * TIME_WAIT's about half the time; the pod then answers with the old connection's ACK, the
 * client resets and resends its SYN some 10 ms later. Measured in this lab (nstat
 * TcpExtTCPSynRetrans): 22–30 % of all new connections paid that stall, in every path, and
 * the stalls, not CPU, set the connection rate. Many real clients, each with few connections
 * per server, never meet it; with monotonic timestamps the pod accepts the reused port.
 */
export const clientSysctls = (): string => procSysScript(["net.ipv4.tcp_timestamps=2"]);

export const podHttpResponder = (): string =>
  [
    "global",
    "  maxconn 8000",
    "defaults",
    "  mode http",
    "  timeout client 10s",
    "  timeout server 10s",
    "  timeout connect 5s",
    "frontend web",
    "  bind :8080",
    "  http-request return status 200 content-type text/plain string ok",
    "",
  ].join("\n");

/** Writes `fixture` renamed to `name` into a new temporary folder: { name, dir, topology }. */
export function namedTopology(
  fixture: string,
  name: string,
  tmpPrefix: string,
): { name: string; dir: string; topology: string } {
  const raw = parse(readFileSync(fixture, "utf8")) as { name: string; services: string[] };
  raw.name = name;
  raw.services = raw.services.map((s) => resolve(dirname(fixture), s));
  const dir = mkdtempSync(join(tmpdir(), tmpPrefix));
  const topology = join(dir, "topology.yaml");
  writeFileSync(topology, stringify(raw));
  return { name, dir, topology };
}

// ---- helpers of bench/lab-packet-rate.bench.ts and bench/lab-scale.bench.ts ----

/** The value after `--name` on the command line (a number), else `fallback`. */
export function benchArg(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
}

export const benchMedian = (xs: readonly number[]): number =>
  [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** podHttpResponder listening on both families (`:::8080 v4v6`). */
export const podHttpResponderDualStack = (): string =>
  podHttpResponder().replace("  bind :8080", "  bind :::8080 v4v6");

/**
 * Root and commands: true when the bench can run; otherwise it printed why. Missing
 * `packages` (command → Debian package) are installed with apt-get when it is there.
 */
export function benchPrerequisites(bench: string, packages: Readonly<Record<string, string>>): boolean {
  const say = (line: string) => process.stdout.write(`${line}\n`);
  if (process.getuid?.() !== 0) {
    say(`${bench}: skipped: needs root (network namespaces, nft)`);
    return false;
  }
  const has = (t: string) => spawnSync("sh", ["-c", `command -v ${t}`]).status === 0;
  let missing = Object.keys(packages).filter((t) => !has(t));
  if (missing.length > 0 && has("apt-get")) {
    const debs = [...new Set(missing.map((t) => packages[t]!))];
    say(`${bench}: installing ${debs.join(", ")} from Debian's packages (apt-get)`);
    spawnSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...debs], {
      stdio: "inherit",
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    });
    missing = missing.filter((t) => !has(t));
  }
  if (missing.length > 0) {
    say(
      `${bench}: skipped: missing ${missing.join(", ")} (apt-get install ${missing.map((t) => packages[t]).join(" ")})`,
    );
    return false;
  }
  return true;
}

/** Runs commands in the hosts of lab `lab` (namespaces `plb-<lab>-<host>`). */
export function labHostShell(lab: string) {
  const ns = (host: string) => `plb-${lab}-${host}`;
  const exec = (host: string, argv: readonly string[], input?: string): string => {
    const r = spawnSync("ip", ["netns", "exec", ns(host), ...argv], {
      encoding: "utf8",
      maxBuffer: 1 << 28,
      ...(input === undefined ? {} : { input }),
    });
    if (r.status !== 0) throw new Error(`${host}: ${argv.join(" ")}: ${r.stderr}`);
    return r.stdout;
  };
  /** a long-running process in a host; `lab down` stops it with the namespace */
  const background = (host: string, argv: readonly string[], logDir: string): void => {
    const fd = openSync(join(logDir, `${host}.${argv[0]}.log`), "a");
    spawn("ip", ["netns", "exec", ns(host), ...argv], { detached: true, stdio: ["ignore", fd, fd] }).unref();
    closeSync(fd);
  };
  const waitListening = async (host: string, port: number): Promise<void> => {
    for (let i = 0; i < 100; i++) {
      if (exec(host, ["ss", "-Hltn", `sport = :${port}`]).trim() !== "") return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`${host}: nothing listens on ${port}`);
  };
  return { ns, exec, background, waitListening };
}

/** wrk with `Connection: close` (a new TCP connection per request): connections/s. */
export function wrkConnectionRate(
  exec: (host: string, argv: readonly string[]) => string,
  host: string,
  url: string,
  o: { threads: number; connections: number; seconds: number },
): { rate: number; errors: string } {
  const out = exec(host, [
    "wrk",
    `-t${o.threads}`,
    `-c${o.connections}`,
    `-d${o.seconds}s`,
    "-H",
    "Connection: close",
    url,
  ]);
  const rate = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? "0");
  const errors = /Socket errors: (.*)/.exec(out)?.[1] ?? "";
  return { rate, errors };
}

/** labUp options of a benchmark: agents and `passlb lb` with the nftables data plane, plus
 * `agentArgs` for the agents. */
export const benchLabOptions = (repoRoot: string, agentArgs: readonly string[] = []) => ({
  repoRoot,
  agents: true,
  lb: true,
  agentArgs: ["--dataplane=nftables", ...agentArgs],
  lbArgs: ["--dataplane=nftables"],
});

/** packets the XDP program forwarded itself so far (fwd_tx + fwd_redirect, all CPUs) */
export function xdpForwarded(pin: string): number {
  const r = xdpReasonTotals(pin);
  return (r.fwd_tx ?? 0) + (r.fwd_redirect ?? 0);
}

/** the XDP program's verdict counters (its pinned `reasons` map), packets summed over CPUs */
export function xdpReasonTotals(pin: string): Record<string, number> {
  const r = spawnSync("bpftool", ["-j", "map", "dump", "pinned", `${pin}/maps/reasons`], {
    encoding: "utf8",
  });
  const rows = JSON.parse(r.stdout) as { key: string[]; values: { value: string[] }[] }[];
  const out: Record<string, number> = {};
  for (const row of rows) {
    const reason = XDP_REASONS[Number.parseInt(row.key[0]!, 16)] ?? `r${row.key[0]}`;
    for (const v of row.values)
      out[reason] =
        (out[reason] ?? 0) +
        Number(Buffer.from(v.value.slice(0, 8).map((h) => Number.parseInt(h, 16))).readBigUInt64LE());
  }
  return out;
}
