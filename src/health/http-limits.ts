/**
 * Adapter: the limits that keep a small HTTP server answering its probes while hostile or
 * broken clients connect to it (issue 16 §2) — the node health servers (health-servers.ts)
 * and the dashboard (web/dashboard-server.ts) share them.
 *
 *   - a connection budget per group of servers: past `maxConnections`, a new connection
 *     first closes the least recently active one that is not being answered (a slow or
 *     idle client, an idle kept-alive one). Without it, 10,000 idle connections take every
 *     descriptor the process may open and libuv then accepts and at once closes every new
 *     connection (its EMFILE fallback, src/unix/stream.c `uv__emfile_trick`), probes
 *     included. The newest connection — a probe that has just arrived — is never the one
 *     closed. passlb's prober retries a kept-alive connection the server closed while idle
 *     on a fresh one within the same timeout (probe-connections.ts), so closing it costs no
 *     failed probe;
 *   - a request with a body (nothing here reads one) is answered and its connection closed
 *     at once instead of drained: node:http reads and discards the rest of a body to reuse
 *     the connection, and 200 clients each streaming megabytes keep the event loop too
 *     busy to answer a probe within its 1 s;
 *   - node:http's own limits, tightened: headers within 5 s (`headersTimeout`), the whole
 *     request within 10 s (`requestTimeout`), checked every second
 *     (`connectionsCheckingInterval`; node's default 30 s lets a slowloris client sit for
 *     up to 90 s), idle kept-alive connections closed after 5 s (`keepAliveTimeout`),
 *     request heads of at most 8 KiB (`maxHeaderSize`; node answers 431 past it). Node's
 *     documentation: https://nodejs.org/docs/latest-v20.x/api/http.html#httpcreateserveroptions-requestlistener.
 *
 * The default budget is a quarter of the process's soft descriptor limit (read from
 * /proc/self/limits; 1024, systemd's default soft limit, when unreadable), between 64 and
 * 4096, so that two groups of servers hold at most half the descriptors.
 * Does not: raise the descriptor limit (node has no setrlimit; the deploy sets it), rate
 * limit, or decide any answer.
 */
import { readFileSync } from "node:fs";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";

export interface HttpLimits {
  readonly maxConnections: number;
  readonly headersTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly keepAliveTimeoutMs: number;
  readonly maxHeaderSize: number;
  /** how often node checks the two timeouts above */
  readonly checkIntervalMs: number;
}

/** systemd's DefaultLimitNOFILE soft value, assumed when /proc/self/limits cannot be read */
const ASSUMED_SOFT_NOFILE = 1024;

/** The soft "Max open files" of this process, or undefined (not Linux, unlimited). */
export function softNofileLimit(limitsText?: string): number | undefined {
  let text = limitsText;
  if (text === undefined)
    try {
      text = readFileSync("/proc/self/limits", "utf8");
    } catch {
      return undefined;
    }
  const m = /^Max open files\s+(\d+)\s/m.exec(text);
  return m ? Number(m[1]) : undefined;
}

export function defaultHttpLimits(softNofile = softNofileLimit() ?? ASSUMED_SOFT_NOFILE): HttpLimits {
  return {
    maxConnections: Math.max(64, Math.min(4096, Math.floor(softNofile / 4))),
    headersTimeoutMs: 5_000,
    requestTimeoutMs: 10_000,
    keepAliveTimeoutMs: 5_000,
    maxHeaderSize: 8192,
    checkIntervalMs: 1_000,
  };
}

/**
 * The open connections of a group of servers, least recently active first. `admit` a new
 * one (closing one over the budget), `busy`/`idle` around each answer.
 */
export class ConnectionBudget {
  readonly max: number;
  /** insertion order = least recently active first; the value: being answered */
  readonly #open = new Map<Socket, boolean>();
  evicted = 0;

  constructor(max: number) {
    this.max = Math.max(1, max);
  }

  get size(): number {
    return this.#open.size;
  }

  admit(socket: Socket): void {
    this.#open.set(socket, false);
    socket.once("close", () => this.#open.delete(socket));
    while (this.#open.size > this.max) {
      const victim = this.#victim(socket);
      if (!victim) return;
      this.#open.delete(victim);
      this.evicted++;
      victim.destroy();
    }
  }

  busy(socket: Socket): void {
    if (!this.#open.has(socket)) return;
    this.#open.delete(socket);
    this.#open.set(socket, true);
  }

  idle(socket: Socket): void {
    if (!this.#open.has(socket)) return;
    this.#open.delete(socket);
    this.#open.set(socket, false);
  }

  /** the least recently active connection not being answered; else the oldest; never `keep` */
  #victim(keep: Socket): Socket | undefined {
    let oldest: Socket | undefined;
    for (const [s, answering] of this.#open) {
      if (s === keep) continue;
      if (!answering) return s;
      oldest ??= s;
    }
    return oldest;
  }
}

/** A node:http server with the limits above, its connections counted in `budget`. */
export function limitedHttpServer(
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  limits: HttpLimits,
  budget: ConnectionBudget,
): Server {
  const server = createServer(
    {
      headersTimeout: limits.headersTimeoutMs,
      requestTimeout: limits.requestTimeoutMs,
      keepAliveTimeout: limits.keepAliveTimeoutMs,
      maxHeaderSize: limits.maxHeaderSize,
      connectionsCheckingInterval: limits.checkIntervalMs,
    },
    (req, res) => {
      const socket = req.socket;
      budget.busy(socket);
      const hasBody =
        req.headers["transfer-encoding"] !== undefined || Number(req.headers["content-length"] ?? 0) > 0;
      if (hasBody) res.setHeader("Connection", "close");
      res.once("close", () => {
        budget.idle(socket);
        // a body nobody reads is not drained: the answer went out, the connection goes
        if (!req.complete) socket.destroy();
      });
      handler(req, res);
    },
  );
  server.on("connection", (socket: Socket) => budget.admit(socket));
  return server;
}
