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
import { mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { parse, stringify } from "yaml";
import { procSysScript } from "../src/lab/lab-host-commands.ts";

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
