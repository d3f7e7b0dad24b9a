/**
 * Adapter: one health probe over a real socket — a TCP connect, or a minimal HTTP/1.1 GET
 * (over TLS for HTTPS, certificates not verified, as cloud health checks do not verify
 * them) that reads only the status line and headers. Success is a completed connect
 * (TCP) or status 200 (HTTP/HTTPS), the success rule of Google Cloud and Azure HTTP
 * probes. With `readsWeight` the `X-Load-Balancing-Endpoint-Weight` header is read
 * (a plain decimal integer, kubernetes PR #118999); any other value is ignored.
 *
 * Whatever the target does — refuses, hangs, answers slowly, answers garbage or too
 * much, closes mid-response — the promise resolves exactly once, never rejects, and the
 * socket and the timer are gone when it does. A hand-written request instead of
 * node:http: a health probe needs one status line and one header, and at thousands of
 * probes a second node:http's per-request machinery costs several times the CPU.
 */
import { type Socket, connect as tcpConnect } from "node:net";
import { connect as tlsConnect } from "node:tls";
import type { HealthCheckProtocol } from "../plan/load-balancer-plan.ts";
import type { ProbeOutcome } from "./state-machine.ts";

export interface ProbeRequest {
  readonly protocol: HealthCheckProtocol;
  readonly address: string;
  readonly port: number;
  readonly path: string | null;
  readonly timeoutMs: number;
  readonly readsWeight: boolean;
  /** bind the probe to this local port (the tunnel check's range, probe-tunnel.ts); the
   * socket is then closed with a reset, so the port is free again at once (no TIME_WAIT) */
  readonly localPort?: number;
}

/** the most we read of an answer's head before calling it garbage */
export const MAX_HEAD_BYTES = 8192;

const STATUS_LINE = /^HTTP\/1\.[01] (\d{3})(?: [^\r\n]*)?$/;
const WEIGHT = /\r\nx-load-balancing-endpoint-weight:[ \t]*([^\r\n]*?)[ \t]*\r\n/i;

export const CLOSED_EARLY = "connection closed before the response head ended";

/** The probe's request: one GET, nothing else the target needs. */
export function requestText(req: ProbeRequest, close: boolean): string {
  const host = req.address.includes(":") ? `[${req.address}]:${req.port}` : `${req.address}:${req.port}`;
  return `GET ${req.path ?? "/"} HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: passlb-prober\r\nAccept: */*\r\n${close ? "Connection: close\r\n" : ""}\r\n`;
}

/** A verdict on an answer whose head has not ended yet, when one is already due. */
export function partialHeadVerdict(buffered: string): ProbeOutcome | undefined {
  if (buffered.length > MAX_HEAD_BYTES) return { ok: false, reason: "response head too large" };
  if (!"HTTP/".startsWith(buffered.slice(0, 5))) return { ok: false, reason: "not an HTTP response" };
  return undefined;
}

export function errorReason(err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case "ECONNREFUSED":
      return "connection refused";
    case "ECONNRESET":
      return "connection reset";
    case "EHOSTUNREACH":
    case "ENETUNREACH":
      return "unreachable";
    default:
      return err.code ?? err.message;
  }
}

/** A timer whose callback waits one more turn of the event loop (setImmediate runs after
 * sockets are polled): a busy loop runs expired timers before it reads sockets, and an
 * answer that arrived before the deadline must not become a timeout because the loop
 * was late. The callback must check that its probe is still the one waiting. */
export function afterDeadline(fn: () => void, ms: number): ReturnType<typeof setTimeout> {
  return setTimeout(() => setImmediate(fn), ms);
}

/** The verdict on a head that ended at `end` (the index of its empty line's CRLFCRLF): a
 * head longer than MAX_HEAD_BYTES is garbage however the bytes were cut into segments
 * (before, one that arrived in a single read was parsed, the same bytes in two reads were
 * "too large": the verdict depended on TCP segmentation). */
export function completeHeadVerdict(buffered: string, end: number, readsWeight: boolean): ProbeOutcome {
  if (end + 4 > MAX_HEAD_BYTES) return { ok: false, reason: "response head too large" };
  return parseHead(buffered.slice(0, end + 2), readsWeight);
}

/** Reads status and weight from a complete response head (through the last header's CRLF). */
export function parseHead(head: string, readsWeight: boolean): ProbeOutcome {
  const firstLine = head.slice(0, head.indexOf("\r\n"));
  const m = STATUS_LINE.exec(firstLine);
  if (!m) return { ok: false, reason: "not an HTTP response" };
  const status = Number(m[1]);
  let weight: number | undefined;
  if (readsWeight) {
    const w = WEIGHT.exec(head);
    if (w && /^\d{1,9}$/.test(w[1] ?? "")) weight = Number(w[1]);
  }
  return { ok: status === 200, reason: `HTTP ${status}`, ...(weight !== undefined && { weight }) };
}

export function probeOnce(req: ProbeRequest): Promise<ProbeOutcome> {
  return new Promise((resolve) => {
    let done = false;
    let head = "";
    let socket: Socket;
    const finish = (outcome: ProbeOutcome) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      if (req.localPort !== undefined && !socket.destroyed && !socket.connecting) socket.resetAndDestroy();
      else socket.destroy();
      resolve(outcome);
    };
    const timer = afterDeadline(
      () => finish({ ok: false, reason: `timeout after ${req.timeoutMs} ms` }),
      req.timeoutMs,
    );
    const sendRequest = () => {
      if (req.protocol === "TCP") return finish({ ok: true, reason: "TCP connect" });
      socket.write(requestText(req, true));
    };
    if (req.protocol === "HTTPS") {
      socket = tlsConnect({ host: req.address, port: req.port, rejectUnauthorized: false }, sendRequest);
    } else {
      socket = tcpConnect(
        {
          host: req.address,
          port: req.port,
          ...(req.localPort !== undefined && { localPort: req.localPort }),
        },
        sendRequest,
      );
    }
    socket.setEncoding("latin1");
    socket.on("error", (err: NodeJS.ErrnoException) => finish({ ok: false, reason: errorReason(err) }));
    socket.on("data", (chunk: string) => {
      head += chunk;
      const end = head.indexOf("\r\n\r\n");
      if (end >= 0) return finish(completeHeadVerdict(head, end, req.readsWeight));
      const verdict = partialHeadVerdict(head);
      if (verdict) finish(verdict);
    });
    socket.on("end", () => finish({ ok: false, reason: CLOSED_EARLY }));
    socket.on("close", () => finish({ ok: false, reason: CLOSED_EARLY }));
  });
}
