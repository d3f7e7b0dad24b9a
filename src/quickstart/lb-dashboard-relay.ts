/**
 * Adapter: the lab LB's dashboard, reached from the caller's network namespace without a
 * link into the lab. The LB serves it on its namespace's loopback; a relay process in that
 * namespace (src/lab/unix-relay.ts) accepts on a Unix socket in the lab's state directory
 * (a file: reachable from any namespace) and connects there. From outside, `passlb up`
 * reads `/api/v1/state` over that socket and offers the page on a local TCP address that
 * pipes every connection to the socket. The relay process lives in the lab's namespace, so
 * the lab's `down` stops it with everything else.
 */

import { spawn } from "node:child_process";
import { closeSync, existsSync, openSync } from "node:fs";
import { request } from "node:http";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";

export interface LbRelayOptions {
  /** the LB host's network namespace */
  readonly ns: string;
  readonly socketPath: string;
  /** the dashboard inside the namespace, `127.0.0.1:9797` */
  readonly to: string;
  readonly repoRoot: string;
  readonly logPath: string;
  readonly timeoutMs?: number;
}

/** Starts the relay in the LB namespace and waits (bounded) for its socket. */
export async function startLbRelay(o: LbRelayOptions): Promise<void> {
  const fd = openSync(o.logPath, "a");
  const script = join(o.repoRoot, "src", "lab", "unix-relay.ts");
  const args = [
    "netns",
    "exec",
    o.ns,
    process.execPath,
    "--import",
    "tsx",
    script,
    "--listen",
    o.socketPath,
    "--to",
    o.to,
  ];
  const child = spawn("ip", args, { cwd: o.repoRoot, detached: true, stdio: ["ignore", fd, fd] });
  closeSync(fd);
  child.unref();
  const deadline = Date.now() + (o.timeoutMs ?? 20_000);
  while (!existsSync(o.socketPath)) {
    if (Date.now() > deadline || child.exitCode !== null)
      throw new Error(`the relay to the LB's dashboard did not start (log: ${o.logPath})`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** GET over the Unix socket; undefined on any failure (the LB may be starting or gone). */
export function getJsonOverSocket(socketPath: string, path: string): Promise<unknown> {
  return new Promise((resolve) => {
    const req = request({ socketPath, path, timeout: 2000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (d: string) => {
        body += d;
      });
      res.on("end", () => {
        try {
          resolve(res.statusCode === 200 ? JSON.parse(body) : undefined);
        } catch {
          resolve(undefined);
        }
      });
      res.on("error", () => resolve(undefined));
    });
    req.on("timeout", () => req.destroy());
    req.on("error", () => resolve(undefined));
    req.end();
  });
}

export interface TcpRelay {
  close(): Promise<void>;
}

/** A TCP listener on `host:port` whose every connection is piped to the Unix socket. */
export function relayTcpToSocket(host: string, port: number, socketPath: string): Promise<TcpRelay> {
  const open = new Set<Socket>();
  const server: Server = createServer((inbound) => {
    const outbound = connect(socketPath);
    for (const s of [inbound, outbound]) {
      open.add(s);
      s.on("error", () => {}).on("close", () => {
        open.delete(s);
        inbound.destroy();
        outbound.destroy();
      });
    }
    inbound.pipe(outbound);
    outbound.pipe(inbound);
  });
  const close = () =>
    new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of open) s.destroy();
    });
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port }, () => {
      server.off("error", reject);
      resolve({ close });
    });
  });
}
