/**
 * Adapter: the userspace LB's TCP on libuv's TCP handles, driven directly rather than
 * through net.Socket (tcp-plumbing.ts has the contract; tcp-proxy.ts the net version).
 *
 * Why: a proxy connection is two sockets that mostly pass bytes along. net.Socket builds a
 * Duplex stream per socket (two stream states, event emitters, next-tick steps for every
 * read, write, end and close); at tens of thousands of connections that is most of the
 * proxy's user CPU. On the handles a connection is one small object and a few callbacks,
 * about half the CPU per connection (docs/benchmarks.md "Userspace proxy").
 *
 * The handles are Node's own (`process.binding("tcp_wrap")`, `"stream_wrap"`), which Node
 * keeps for compatibility but does not document. `libuvTcpPlumbing()` therefore checks
 * every constructor, method and constant it uses and returns undefined when one is
 * missing; the LB then runs on net.Socket and says so.
 *
 * Same semantics as tcp-proxy.ts:
 * - a client is not read until its target answers (its bytes, and an early FIN, wait in
 *   the kernel); the target's answer to the connect decides `done(true|false)`; a target
 *   that does not answer by the deadline (connect-deadlines.ts) is abandoned, and the
 *   client left for the caller to retry or reset;
 * - backpressure: while one side's write queue holds a high-water mark or more, the other
 *   side is not read; reading resumes when the queue is empty;
 * - half-close: a FIN from one side becomes a shutdown of the other once what was written
 *   to it is sent; when both sides have sent their FIN and every write is done, both
 *   handles close (the last direction closes instead of shutting down: same FIN, one
 *   system call fewer);
 * - a read or write error on either side closes both;
 * - the target's bytes are read into buffers the proxy owns (read-buffers.ts).
 */
import { getSystemErrorMap } from "node:util";
import { ConnectDeadlines } from "./connect-deadlines.ts";
import { firstReadBuffer, nextReadBuffer, releaseReadBuffer } from "./read-buffers.ts";
import type { ClientConnection, TcpListenerHandle, TcpListenOptions, TcpPlumbing } from "./tcp-plumbing.ts";
import type { ByteTally, SpliceOptions, TcpTarget } from "./tcp-proxy.ts";

// ---------------------------------------------------------------- the binding, checked

/** a libuv TCP handle as Node's tcp_wrap exposes it (the members used here) */
interface UvTcp {
  onread: ((this: UvTcp, data: ArrayBuffer | undefined) => Uint8Array | undefined) | null;
  onconnection: ((status: number, client: UvTcp | undefined) => void) | null;
  readonly writeQueueSize: number;
  bind(host: string, port: number): number;
  bind6(host: string, port: number, flags: number): number;
  listen(backlog: number): number;
  connect(req: object, host: string, port: number): number;
  connect6(req: object, host: string, port: number): number;
  getpeername(out: { address?: string; port?: number }): number;
  setNoDelay(on: boolean): number;
  readStart(): number;
  readStop(): number;
  useUserBuffer(buffer: Uint8Array): void;
  writeBuffer(req: object, data: Uint8Array): number;
  shutdown(req: object): number;
  close(callback?: () => void): void;
  reset(callback?: () => void): number;
  /** the connection this handle belongs to (set by this module) */
  link?: LibuvConnection;
  /** close() was called (set by this module) */
  closing?: boolean;
}

interface UvReq {
  handle?: UvTcp;
  /** `this` is the request; connects also pass the handle */
  oncomplete: (status: number, handle: UvTcp | undefined) => void;
  async?: boolean;
  /** a write's bytes: libuv sends a queued write from this memory, so the request keeps it alive */
  buffer?: Uint8Array;
}

interface Binding {
  readonly TCP: new (type: number) => UvTcp;
  readonly ConnectWrap: new () => UvReq;
  readonly WriteWrap: new () => UvReq;
  readonly ShutdownWrap: new () => UvReq;
  readonly SOCKET: number;
  readonly SERVER: number;
  /** Node's shared read/write status array and the slots this module reads */
  readonly state: Int32Array;
  readonly kRead: number;
  readonly kOffset: number;
}

const HANDLE_METHODS = [
  "bind",
  "bind6",
  "listen",
  "connect",
  "connect6",
  "getpeername",
  "setNoDelay",
  "readStart",
  "readStop",
  "useUserBuffer",
  "writeBuffer",
  "shutdown",
  "close",
  "reset",
] as const;

type Binder = (name: string) => unknown;

function processBinder(): Binder | undefined {
  const get = (process as unknown as { binding?: Binder }).binding;
  return typeof get === "function" ? (name) => get.call(process, name) : undefined;
}

function loadBinding(get: Binder | undefined): Binding | undefined {
  if (get === undefined) return undefined;
  try {
    const tcp = get("tcp_wrap") as Record<string, unknown>;
    const stream = get("stream_wrap") as Record<string, unknown>;
    const TCP = tcp.TCP as Binding["TCP"] | undefined;
    const constants = tcp.constants as { SOCKET?: unknown; SERVER?: unknown } | undefined;
    const state = stream.streamBaseState;
    const kRead = stream.kReadBytesOrError;
    const kOffset = stream.kArrayBufferOffset;
    if (
      typeof TCP !== "function" ||
      typeof tcp.TCPConnectWrap !== "function" ||
      typeof stream.WriteWrap !== "function" ||
      typeof stream.ShutdownWrap !== "function" ||
      typeof constants?.SOCKET !== "number" ||
      typeof constants.SERVER !== "number" ||
      !(state instanceof Int32Array) ||
      typeof kRead !== "number" ||
      typeof kOffset !== "number"
    )
      return undefined;
    const proto = TCP.prototype as unknown as Record<string, unknown>;
    if (HANDLE_METHODS.some((m) => typeof proto[m] !== "function")) return undefined;
    return {
      TCP,
      ConnectWrap: tcp.TCPConnectWrap as Binding["ConnectWrap"],
      WriteWrap: stream.WriteWrap as Binding["WriteWrap"],
      ShutdownWrap: stream.ShutdownWrap as Binding["ShutdownWrap"],
      SOCKET: constants.SOCKET,
      SERVER: constants.SERVER,
      state,
      kRead,
      kOffset,
    };
  } catch {
    return undefined;
  }
}

const ERRORS = getSystemErrorMap();
const UV_EOF = [...ERRORS].find(([, [name]]) => name === "EOF")?.[0] ?? -4095;

/** an Error shaped like node:net's (`listen EADDRINUSE: address already in use 127.0.0.1:80`) */
function uvError(status: number, syscall: string, host: string, port: number): Error {
  const [code, text] = ERRORS.get(status) ?? [`E${-status}`, "unknown error"];
  return Object.assign(new Error(`${syscall} ${code}: ${text} ${host}:${port}`), {
    code,
    errno: status,
    syscall,
    address: host,
    port,
  });
}

let binding: Binding | undefined | null = null;

/**
 * The libuv plumbing, or undefined when this Node does not expose what it needs.
 * `binder` replaces `process.binding` (tests: a Node without the handles).
 */
export function libuvTcpPlumbing(binder?: Binder): TcpPlumbing | undefined {
  if (binder) {
    const b = loadBinding(binder);
    return b && new LibuvPlumbing(b);
  }
  if (binding === null) binding = loadBinding(processBinder());
  return binding && new LibuvPlumbing(binding);
}

// ---------------------------------------------------------------- connections

const IDLE = 0; // accepted, or back from a failed connect
const CONNECTING = 1;
const JOINED = 2;
const CLOSED = 3;

/** bytes queued towards one side before the other side stops being read */
const HIGH_WATER = 64 * 1024;

const DISCARD: ByteTally = { bytes: 0 };

/** One accepted client and (once spliced) its target: all of a proxied connection's state. */
class LibuvConnection implements ClientConnection {
  state: typeof IDLE | typeof CONNECTING | typeof JOINED | typeof CLOSED = IDLE;
  target: UvTcp | undefined = undefined;
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
    readonly owner: LibuvPlumbing,
    readonly client: UvTcp,
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

class LibuvPlumbing implements TcpPlumbing {
  readonly kind = "libuv";
  readonly b: Binding;
  /** connections with at least one open handle */
  readonly live = new Set<LibuvConnection>();
  /** handles not yet closed (clients and targets) */
  handles = 0;
  #idle: Array<() => void> = [];
  /** a target not reached in time is abandoned; the client is left to the caller */
  readonly deadlines = new ConnectDeadlines<LibuvConnection>(failConnect);

  constructor(b: Binding) {
    this.b = b;
  }

  get open(): number {
    return this.handles;
  }

  listen(o: TcpListenOptions): Promise<TcpListenerHandle> {
    const h = new this.b.TCP(this.b.SERVER);
    let status = o.host.includes(":") ? h.bind6(o.host, o.port, 0) : h.bind(o.host, o.port);
    if (status === 0) status = h.listen(511);
    if (status !== 0) {
      h.close();
      return Promise.reject(uvError(status, "listen", o.host, o.port));
    }
    h.onconnection = (err, client) => {
      if (err !== 0 || client === undefined) return;
      if (o.closing()) {
        client.close();
        return;
      }
      this.handles++;
      client.setNoDelay(true);
      const conn = new LibuvConnection(this, client);
      client.link = conn;
      this.live.add(conn);
      o.onConnection(conn);
    };
    return Promise.resolve({ close: (callback) => h.close(callback) });
  }

  splice(
    client: ClientConnection,
    target: TcpTarget,
    options: SpliceOptions,
    done: (ok: boolean) => void,
  ): void {
    const conn = client as LibuvConnection;
    if (conn.owner !== this || conn.state !== IDLE) {
      done(false);
      return;
    }
    const b = this.b;
    const up = new b.TCP(b.SOCKET);
    this.handles++;
    up.link = conn;
    const v6 = target.host.includes(":");
    const local = options.localAddress;
    let status = 0;
    if (local !== undefined) status = v6 ? up.bind6(local, 0, 0) : up.bind(local, 0);
    if (status === 0) {
      up.setNoDelay(true);
      const buffer = firstReadBuffer();
      conn.readBuffer = buffer;
      up.useUserBuffer(buffer);
      up.onread = onTargetRead;
      const req = new b.ConnectWrap();
      req.oncomplete = afterConnect;
      status = v6 ? up.connect6(req, target.host, target.port) : up.connect(req, target.host, target.port);
    }
    if (status !== 0) {
      closeHandle(up);
      done(false);
      return;
    }
    conn.state = CONNECTING;
    conn.target = up;
    conn.header = options.header;
    conn.fromClient = options.fromClient ?? DISCARD;
    conn.fromTarget = options.fromTarget ?? DISCARD;
    conn.done = done;
    conn.deadline = Date.now() + options.connectTimeoutMs;
    this.deadlines.add(conn);
  }

  destroyAll(): Promise<void> {
    for (const conn of [...this.live]) closeConnection(conn);
    if (this.handles === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** a handle finished closing */
  closed(conn: LibuvConnection | undefined): void {
    this.handles--;
    if (conn && conn.state === CLOSED && conn.client.closing && (!conn.target || conn.target.closing))
      this.live.delete(conn);
    if (this.handles === 0 && this.#idle.length > 0) for (const resolve of this.#idle.splice(0)) resolve();
  }
}

// ---------------------------------------------------------------- shared callbacks
// Module functions, not closures: they find their connection through `handle.link`, so a
// connection allocates nothing beyond its own object, its target handle and its requests.

function closeHandle(h: UvTcp): void {
  if (h.closing) return;
  h.closing = true;
  h.close(onHandleClosed);
}

function onHandleClosed(this: UvTcp): void {
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
function closeConnection(conn: LibuvConnection, reset = false): void {
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
function failConnect(conn: LibuvConnection): void {
  if (conn.state !== CONNECTING) return;
  conn.owner.deadlines.delete(conn);
  conn.state = IDLE;
  const t = conn.target;
  conn.target = undefined;
  if (t) closeHandle(t);
  conn.done(false);
}

function afterConnect(this: UvReq, status: number, up: UvTcp | undefined): void {
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

function onClientRead(this: UvTcp, data: ArrayBuffer | undefined): undefined {
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

function onTargetRead(this: UvTcp): Uint8Array | undefined {
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
function send(conn: LibuvConnection, to: UvTcp, data: Uint8Array, from: UvTcp): void {
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
  if (to.writeQueueSize < HIGH_WATER || from === to) return;
  from.readStop();
  if (from === conn.client) conn.clientPaused = true;
  else conn.targetPaused = true;
}

/** a queued write finished (writes the kernel took at once never come here) */
function afterWrite(this: UvReq, status: number): void {
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
function readEnded(conn: LibuvConnection, h: UvTcp, status: number): void {
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

function afterShutdown(this: UvReq, status: number): void {
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
