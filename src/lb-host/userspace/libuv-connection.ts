/**
 * Adapter helper for libuv-tcp.ts: one proxied connection on libuv handles — its state
 * (`LibuvConnection`) and the callbacks libuv calls for it: connect done, data read, write
 * done, FIN, shutdown done, handle closed. The rules are libuv-tcp.ts's (same semantics
 * as tcp-proxy.ts); the callbacks are module functions shared by every connection, finding
 * theirs through `handle.link`, so a connection allocates nothing beyond its own object,
 * its target handle and its requests.
 * Deliberately not here: listening, starting a splice, closing everything (libuv-tcp.ts).
 */
import type { ConnectDeadlines } from "./connect-deadlines.ts";
import { type Binding, UV_EOF, type UvReq, type UvTcp } from "./libuv-binding.ts";
import { nextReadBuffer, releaseReadBuffer } from "./read-buffers.ts";
import type { ClientConnection } from "./tcp-plumbing.ts";
import type { ByteTally } from "./tcp-proxy.ts";

/** a handle as the plumbing uses it: with its connection and whether close() was called */
export interface Handle extends UvTcp {
  link?: LibuvConnection;
  closing?: boolean;
}

/** a request whose `handle` is one of ours */
interface Req extends UvReq {
  handle?: Handle;
}

/** what a connection needs of the plumbing that owns it */
export interface ConnectionOwner {
  readonly b: Binding;
  readonly deadlines: ConnectDeadlines<LibuvConnection>;
  /** a handle of `conn` finished closing */
  closed(conn: LibuvConnection | undefined): void;
}

export const IDLE = 0; // accepted, or back from a failed connect
export const CONNECTING = 1;
export const JOINED = 2;
export const CLOSED = 3;

/** bytes queued towards one side before the other side stops being read */
const HIGH_WATER = 64 * 1024;

export const DISCARD: ByteTally = { bytes: 0 };

/** One accepted client and (once spliced) its target: all of a proxied connection's state. */
export class LibuvConnection implements ClientConnection {
  state: typeof IDLE | typeof CONNECTING | typeof JOINED | typeof CLOSED = IDLE;
  target: Handle | undefined = undefined;
  readBuffer: Buffer | undefined = undefined;
  deadline = 0;
  done: (ok: boolean) => void = ignoreResult;
  header: Buffer | undefined = undefined;
  fromClient: ByteTally = DISCARD;
  fromTarget: ByteTally = DISCARD;
  clientEof = false;
  targetEof = false;
  /** shutdowns requested and not yet completed */
  shutting = 0;
  /** a side not being read because the other side's queue is full */
  clientPaused = false;
  targetPaused = false;
  #address: string | undefined = undefined;
  #port: number | undefined = undefined;

  constructor(
    readonly owner: ConnectionOwner,
    readonly client: Handle,
  ) {}

  get remoteAddress(): string | undefined {
    if (this.#address === undefined) this.#peer();
    return this.#address;
  }

  get remotePort(): number | undefined {
    if (this.#port === undefined) this.#peer();
    return this.#port;
  }

  #peer(): void {
    const out: { address?: string; port?: number } = {};
    if (this.client.getpeername(out) === 0) {
      this.#address = out.address;
      this.#port = out.port;
    }
  }

  get destroyed(): boolean {
    return this.state === CLOSED;
  }

  destroy(): void {
    closeConnection(this, false);
  }

  resetAndDestroy(): void {
    closeConnection(this, true);
  }
}

function ignoreResult(): void {
  // the splice result when nobody waits for it
}

export function closeHandle(h: Handle): void {
  if (h.closing) return;
  h.closing = true;
  h.close(onHandleClosed);
}

function onHandleClosed(this: Handle): void {
  const conn = this.link;
  if (conn && this === conn.target && conn.readBuffer) {
    releaseReadBuffer(conn.readBuffer);
    conn.readBuffer = undefined;
  }
  conn?.owner.closed(conn);
}

/**
 * Closes both handles (the client's with a TCP reset when `reset`); idempotent. No reset
 * while a shutdown is pending: libuv refuses it then (EINVAL), and Node's handle, marked
 * closing all the same, ignores every later close() — it would never close.
 */
export function closeConnection(conn: LibuvConnection, reset = false): void {
  if (conn.state === CLOSED) return;
  const connecting = conn.state === CONNECTING;
  if (connecting) conn.owner.deadlines.delete(conn);
  conn.state = CLOSED;
  const c = conn.client;
  if (reset && !c.closing && conn.shutting === 0) {
    c.closing = true;
    if (c.reset(onHandleClosed) !== 0) c.close(onHandleClosed);
  } else closeHandle(c);
  if (conn.target) closeHandle(conn.target);
  if (connecting) conn.done(false); // the client went away before its target answered
}

/** the target could not be reached (in time): abandon it, leave the client to the caller */
export function failConnect(conn: LibuvConnection): void {
  if (conn.state !== CONNECTING) return;
  conn.owner.deadlines.delete(conn);
  conn.state = IDLE;
  const t = conn.target;
  conn.target = undefined;
  if (t) closeHandle(t);
  conn.done(false);
}

export function afterConnect(this: Req, status: number, up: Handle | undefined): void {
  const conn = up?.link;
  if (!up || !conn || conn.target !== up || conn.state !== CONNECTING) {
    if (up) closeHandle(up); // abandoned: the deadline passed or the client is gone
    return;
  }
  if (status !== 0) {
    failConnect(conn);
    return;
  }
  conn.owner.deadlines.delete(conn);
  conn.state = JOINED;
  if (conn.header) send(conn, up, conn.header, conn.client);
  const c = conn.client;
  c.onread = onClientRead;
  // a side that cannot be read (it went away meanwhile) ends the connection at once
  const unreadable = c.readStart() !== 0 || up.readStart() !== 0;
  conn.done(true);
  if (unreadable) closeConnection(conn);
}

function onClientRead(this: Handle, data: ArrayBuffer | undefined): undefined {
  const conn = this.link!;
  const b = conn.owner.b;
  const n = b.state[b.kRead]!;
  if (n > 0) {
    if (conn.state !== JOINED || !data) return undefined;
    conn.fromClient.bytes += n;
    send(conn, conn.target!, new Uint8Array(data, b.state[b.kOffset]!, n), this);
  } else if (n < 0) readEnded(conn, this, n);
  return undefined;
}

export function onTargetRead(this: Handle): Uint8Array | undefined {
  const conn = this.link!;
  const b = conn.owner.b;
  const n = b.state[b.kRead]!;
  if (n < 0) {
    readEnded(conn, this, n);
    return undefined;
  }
  const buffer = conn.readBuffer;
  if (n === 0 || conn.state !== JOINED || !buffer) return undefined;
  conn.fromTarget.bytes += n;
  const to = conn.client;
  send(conn, to, n === buffer.length ? buffer : buffer.subarray(0, n), this);
  // a write left queued still reads from `buffer`: the next read must go elsewhere
  const next = nextReadBuffer(buffer, n, to.writeQueueSize > 0);
  if (next === buffer) return undefined;
  conn.readBuffer = next;
  return next;
}

/** writes `data` to `to`; stops reading `from` while `to`'s queue is full */
function send(conn: LibuvConnection, to: Handle, data: Uint8Array, from: Handle): void {
  const req = new conn.owner.b.WriteWrap();
  req.handle = to;
  req.oncomplete = afterWrite;
  req.async = false;
  // as net's writeGeneric does: nothing else may hold `data` (a client read's ArrayBuffer, a
  // read buffer handed on by nextReadBuffer), and a collected one would be sent as garbage
  req.buffer = data;
  if (to.writeBuffer(req, data) !== 0) {
    closeConnection(conn);
    return;
  }
  if (to.writeQueueSize < HIGH_WATER) return;
  from.readStop();
  if (from === conn.client) conn.clientPaused = true;
  else conn.targetPaused = true;
}

/** a queued write finished (writes the kernel took at once never come here) */
function afterWrite(this: Req, status: number): void {
  const h = this.handle;
  const conn = h?.link;
  if (!h || !conn || conn.state === CLOSED) return;
  if (status !== 0) {
    closeConnection(conn);
    return;
  }
  if (h.writeQueueSize > 0) return;
  let resumed = 0;
  if (h === conn.target && conn.clientPaused) {
    conn.clientPaused = false;
    if (!conn.clientEof) resumed = conn.client.readStart();
  } else if (h === conn.client && conn.targetPaused) {
    conn.targetPaused = false;
    if (!conn.targetEof) resumed = conn.target?.readStart() ?? 0;
  }
  if (resumed !== 0) closeConnection(conn);
  else closeIfFinished(conn);
}

/** `h` sent its FIN (or failed): pass the FIN on, or close everything on an error */
function readEnded(conn: LibuvConnection, h: Handle, status: number): void {
  if (status !== UV_EOF || conn.state !== JOINED) {
    closeConnection(conn);
    return;
  }
  h.readStop();
  const fromClient = h === conn.client;
  if (fromClient) conn.clientEof = true;
  else conn.targetEof = true;
  const peer = fromClient ? conn.target! : conn.client;
  // the last direction: the peer's FIN came first, so closing it (once its queue is sent)
  // sends this FIN; otherwise shut its write side down after what is queued
  if (!(fromClient ? conn.targetEof : conn.clientEof)) {
    const req = new conn.owner.b.ShutdownWrap();
    req.handle = peer;
    req.oncomplete = afterShutdown;
    if (peer.shutdown(req) !== 0) {
      closeConnection(conn);
      return;
    }
    conn.shutting++;
  }
  closeIfFinished(conn);
}

function afterShutdown(this: Req, status: number): void {
  const conn = this.handle?.link;
  if (!conn || conn.state === CLOSED) return;
  conn.shutting--;
  if (status !== 0) closeConnection(conn);
  else closeIfFinished(conn);
}

/** both FINs passed on and everything written: close both handles */
function closeIfFinished(conn: LibuvConnection): void {
  if (!conn.clientEof || !conn.targetEof || conn.shutting > 0) return;
  if (conn.client.writeQueueSize > 0 || (conn.target?.writeQueueSize ?? 0) > 0) return;
  closeConnection(conn);
}
