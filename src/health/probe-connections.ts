/**
 * Adapter: HTTP(S) probes over kept-alive connections, one per target, the way Envoy's
 * HTTP health checker reuses its connection by default. At thousands of probes a second
 * most of a fresh-connection probe's cost is the TCP handshake and teardown (and on
 * loopback the kernel charges the listener's half of them to the prober too); a kept
 * connection costs one write and one read per probe. docs/benchmarks.md has the figures.
 *
 * A connection is reused only while the exchange stays in step: the answer has a
 * Content-Length, no `Connection: close`, is HTTP/1.1, and its body has fully arrived
 * before the next probe. Otherwise it is closed and the next probe opens a new one.
 * A reused connection that fails before any byte of the answer (the target closed it
 * while idle) is retried once on a fresh connection within the same timeout, so an idle
 * timeout on the target's side is not a failed probe. TCP probes, and every probe when
 * reuse is off, go through probeOnce (a new connection each time).
 *
 * `forget(key)` and `close()` destroy connections at once; nothing stays open after
 * close(). What counts as success is probe-once.ts's `completeHeadVerdict`.
 */
import { type Socket, connect as tcpConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import {
  afterDeadline,
  CLOSED_EARLY,
  completeHeadVerdict,
  errorReason,
  type ProbeRequest,
  partialHeadVerdict,
  probeOnce,
  requestText,
} from "./probe-once.ts";
import type { ProbeOutcome } from "./state-machine.ts";

export interface KeyedProbeRequest extends ProbeRequest {
  readonly key: string;
}

interface Pending {
  readonly req: KeyedProbeRequest;
  readonly deadline: number;
  readonly reused: boolean;
  readonly resolve: (o: ProbeOutcome) => void;
  timer: ReturnType<typeof setTimeout> | undefined;
  gotBytes: boolean;
}

interface Conn {
  readonly socket: Socket;
  /** the request bytes, built once per connection */
  readonly request: Buffer;
  connected: boolean;
  /** bytes of the last answer's body still to come */
  bodyLeft: number;
  buf: string;
  pending: Pending | undefined;
  dead: boolean;
}

const CONTENT_LENGTH = /\r\ncontent-length:[ \t]*(\d+)[ \t]*\r\n/i;
const CONN_CLOSE = /\r\nconnection:[^\r\n]*\bclose\b/i;
const CHUNKED = /\r\ntransfer-encoding:/i;

export class ProbeConnections {
  readonly #reuse: boolean;
  readonly #conns = new Map<string, Conn>();
  #closed = false;

  constructor(options: { reuse: boolean } = { reuse: true }) {
    this.#reuse = options.reuse;
  }

  /** open connections (for tests and metrics) */
  get open(): number {
    return this.#conns.size;
  }

  readonly probe = (req: KeyedProbeRequest): Promise<ProbeOutcome> => {
    if (req.protocol === "TCP" || !this.#reuse || this.#closed) return probeOnce(req);
    return new Promise((resolve) => {
      const deadline = performance.now() + req.timeoutMs;
      this.#send(req, deadline, resolve, true);
    });
  };

  forget(key: string): void {
    const conn = this.#conns.get(key);
    if (conn) this.#drop(key, conn, { ok: false, reason: "target removed" });
  }

  close(): void {
    this.#closed = true;
    for (const [key, conn] of this.#conns) this.#drop(key, conn, { ok: false, reason: "prober closed" });
  }

  #send(
    req: KeyedProbeRequest,
    deadline: number,
    resolve: (o: ProbeOutcome) => void,
    mayRetry: boolean,
  ): void {
    let conn = this.#conns.get(req.key);
    if (conn && (conn.dead || conn.bodyLeft > 0 || conn.pending)) {
      this.#drop(req.key, conn, undefined);
      conn = undefined;
    }
    const reused = conn !== undefined && mayRetry;
    if (!conn) conn = this.#connect(req);
    const c = conn;
    const left = Math.max(0, deadline - performance.now());
    const pending: Pending = { req, deadline, reused, resolve, gotBytes: false, timer: undefined };
    pending.timer = afterDeadline(() => {
      if (c.pending === pending)
        this.#finish(req.key, c, { ok: false, reason: `timeout after ${req.timeoutMs} ms` }, true);
    }, left);
    c.pending = pending;
    if (c.connected) c.socket.write(c.request);
  }

  #connect(req: KeyedProbeRequest): Conn {
    const onConnect = () => {
      conn.connected = true;
      if (conn.pending) conn.socket.write(conn.request);
    };
    const socket =
      req.protocol === "HTTPS"
        ? tlsConnect({ host: req.address, port: req.port, rejectUnauthorized: false }, onConnect)
        : tcpConnect({ host: req.address, port: req.port }, onConnect);
    const request = Buffer.from(requestText(req, false), "latin1");
    const conn: Conn = {
      socket,
      request,
      connected: false,
      bodyLeft: 0,
      buf: "",
      pending: undefined,
      dead: false,
    };
    this.#conns.set(req.key, conn);
    socket.setEncoding("latin1");
    socket.on("data", (chunk: string) => this.#data(req.key, conn, chunk));
    const gone = (reason: string) => {
      conn.dead = true;
      const p = conn.pending;
      if (!p) {
        if (this.#conns.get(req.key) === conn) this.#conns.delete(req.key);
        socket.destroy();
        return;
      }
      // the target closed a kept connection before answering: once more on a new one
      if (p.reused && !p.gotBytes && performance.now() < p.deadline) {
        clearTimeout(p.timer);
        conn.pending = undefined;
        this.#drop(req.key, conn, undefined);
        this.#send(p.req, p.deadline, p.resolve, false);
        return;
      }
      this.#finish(req.key, conn, { ok: false, reason }, true);
    };
    socket.on("error", (err: NodeJS.ErrnoException) => gone(errorReason(err)));
    socket.on("end", () => gone(CLOSED_EARLY));
    socket.on("close", () => gone(CLOSED_EARLY));
    return conn;
  }

  #data(key: string, conn: Conn, chunk: string): void {
    const p = conn.pending;
    if (!p) {
      // the rest of the last answer's body; anything more is out of step
      if (chunk.length <= conn.bodyLeft) conn.bodyLeft -= chunk.length;
      else this.#drop(key, conn, undefined);
      return;
    }
    p.gotBytes = true;
    conn.buf += chunk;
    const end = conn.buf.indexOf("\r\n\r\n");
    if (end < 0) {
      const verdict = partialHeadVerdict(conn.buf);
      if (verdict) this.#finish(key, conn, verdict, true);
      return;
    }
    const head = conn.buf.slice(0, end + 2);
    const outcome = completeHeadVerdict(conn.buf, end, p.req.readsWeight);
    const length = CONTENT_LENGTH.exec(head);
    const keep =
      outcome.reason !== "not an HTTP response" &&
      outcome.reason !== "response head too large" &&
      head.startsWith("HTTP/1.1 ") &&
      length !== null &&
      !CONN_CLOSE.test(head) &&
      !CHUNKED.test(head);
    const rest = conn.buf.length - (end + 4);
    conn.buf = "";
    conn.bodyLeft = keep ? Number(length?.[1]) - rest : 0;
    this.#finish(key, conn, outcome, !keep || conn.bodyLeft < 0);
  }

  #finish(key: string, conn: Conn, outcome: ProbeOutcome, drop: boolean): void {
    const p = conn.pending;
    if (!p) return;
    conn.pending = undefined;
    clearTimeout(p.timer);
    if (drop) this.#drop(key, conn, undefined);
    p.resolve(outcome);
  }

  #drop(key: string, conn: Conn, outcome: ProbeOutcome | undefined): void {
    conn.dead = true;
    if (this.#conns.get(key) === conn) this.#conns.delete(key);
    const p = conn.pending;
    conn.pending = undefined;
    conn.socket.destroy();
    if (p) {
      clearTimeout(p.timer);
      p.resolve(outcome ?? { ok: false, reason: "connection dropped" });
    }
  }
}
