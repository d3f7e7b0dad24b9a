/**
 * Adapter: TCP plumbing shared by the userspace LB and the node proxy. `spliceTcp` joins
 * an accepted client socket (tcp-listener.ts) to a new connection towards a target;
 * `readProxyHeader` takes a PROXY v2 header off the front of an accepted socket.
 *
 * - Backpressure: each direction pauses its reader while the writer's buffer is full and
 *   resumes it on `drain`, so one slow peer holds only its own connection.
 * - Half-close: both sockets allow half-open; a FIN from one side becomes `end()` on the
 *   other, and the reverse direction keeps flowing until it ends too.
 * - Errors: a reset or error on either side destroys both; the connect has a deadline, so
 *   a dead backend costs one entry in a shared deadline set (one sweep timer for all
 *   pending connects, running only while some are pending).
 * - Counting: bytes read from each side are added to the caller's `ByteTally` objects, one
 *   addition per chunk and no allocation.
 * - Reading the target: the upstream socket reads into buffers the proxy owns (`onread`,
 *   read-buffers.ts) rather than a new allocation per read; this is the direction bulk
 *   traffic (responses, downloads) takes, and most of what a proxy's throughput costs.
 *   Accepted client sockets cannot be given `onread` (net.Server has no such option), so
 *   the client's bytes arrive as ordinary 'data' chunks.
 * Cost per connection is what the connection rate is made of (docs/benchmarks.md
 * "Userspace proxy"): the event handlers below are module functions shared by every
 * connection, finding their connection through one symbol-keyed field on each socket, so
 * a connection allocates no closures or once-wrappers of its own; no Promise, no timer.
 * Deliberately not here: which target to pick (the callers decide from forwarding state).
 */
import { connect, type Socket } from "node:net";
import { ConnectDeadlines } from "./connect-deadlines.ts";
import { decodeProxyV2, type ProxyAddresses } from "./proxy-protocol.ts";
import { firstReadBuffer, nextReadBuffer, releaseReadBuffer } from "./read-buffers.ts";

export interface TcpTarget {
  readonly host: string;
  readonly port: number;
}

/** A running byte count that many connections add to (one per Service, node and direction). */
export interface ByteTally {
  bytes: number;
}

export interface SpliceOptions {
  readonly connectTimeoutMs: number;
  /** bytes written to the target before anything from the client (a PROXY header) */
  readonly header?: Buffer | undefined;
  /** source address to connect from (a loopback address), when set */
  readonly localAddress?: string | undefined;
  /** bytes read from the client are added here */
  readonly fromClient?: ByteTally | undefined;
  /** bytes read from the target are added here */
  readonly fromTarget?: ByteTally | undefined;
}

/** the live sockets of one splicer, so the owner can destroy them all on close */
export type SocketSet = Set<Socket>;

const CONNECTING = 0;
const JOINED = 1;
const FAILED = 2;

/** One client joined (or being joined) to one target. */
class Splice {
  state: typeof CONNECTING | typeof JOINED | typeof FAILED = CONNECTING;
  /** what the upstream socket reads into next (see read-buffers.ts) */
  readBuffer: Buffer;
  constructor(
    readonly client: Socket,
    readonly upstream: Socket,
    readonly header: Buffer | undefined,
    readonly fromClient: ByteTally,
    readonly fromTarget: ByteTally,
    readonly deadline: number,
    readonly done: (ok: boolean) => void,
    readBuffer: Buffer,
  ) {
    this.readBuffer = readBuffer;
  }
}

const SPLICE = Symbol("passlb.splice");
const OWNER = Symbol("passlb.socketSet");

/** a socket as the shared handlers see it: its splice and the set it is tracked in */
interface Tracked extends Socket {
  [SPLICE]?: Splice;
  [OWNER]?: SocketSet;
}

/** every pending connect of the process, failed when its deadline passes */
const deadlines = new ConnectDeadlines<Splice>(fail);

/** where counts go when the caller keeps none */
const DISCARD: ByteTally = { bytes: 0 };

/**
 * Connects to `target` and, once connected, joins it to `client`, then calls `done(true)`;
 * data then flows until both sides finish. Calls `done(false)` when the target could not
 * be reached in time or the client went away first — the client is left untouched so the
 * caller may try another target or destroy it. `done` is called exactly once.
 * The client must already have an `error` listener (listenTcp's sockets do): its errors
 * reach the splice as a close with `hadError`.
 */
export function spliceTcp(
  client: Socket,
  target: TcpTarget,
  options: SpliceOptions,
  sockets: SocketSet | undefined,
  done: (ok: boolean) => void,
): void {
  if (client.destroyed) {
    done(false);
    return;
  }
  const readBuffer = firstReadBuffer();
  handOut = readBuffer; // what the socket's constructor takes through TARGET_READS.buffer
  const upstream: Tracked = connect(
    options.localAddress === undefined
      ? { host: target.host, port: target.port, allowHalfOpen: true, noDelay: true, onread: TARGET_READS }
      : {
          host: target.host,
          port: target.port,
          allowHalfOpen: true,
          noDelay: true,
          localAddress: options.localAddress,
          onread: TARGET_READS,
        },
  );
  const s = new Splice(
    client,
    upstream,
    options.header,
    options.fromClient ?? DISCARD,
    options.fromTarget ?? DISCARD,
    Date.now() + options.connectTimeoutMs,
    done,
    readBuffer,
  );
  upstream[SPLICE] = s;
  (client as Tracked)[SPLICE] = s;
  if (sockets) {
    upstream[OWNER] = sockets;
    sockets.add(upstream);
  }
  upstream.on("error", ignore);
  upstream.on("close", onClose);
  upstream.on("connect", onConnect);
  client.on("close", onClose);
  deadlines.add(s);
}

function onConnect(this: Tracked): void {
  const s = this[SPLICE];
  if (s === undefined || s.state !== CONNECTING) return;
  s.state = JOINED;
  deadlines.delete(s);
  const { client, upstream } = s;
  if (s.header) upstream.write(s.header);
  client.on("data", onClientData);
  client.on("end", onEnd);
  upstream.on("end", onEnd);
  // the client reads from accept on: a FIN with no data before it may already be consumed
  if (client.readableEnded) endSoftly(upstream);
  else client.resume();
  s.done(true);
}

function fail(s: Splice): void {
  if (s.state !== CONNECTING) return;
  s.state = FAILED;
  deadlines.delete(s);
  s.client.off("close", onClose);
  s.upstream.destroy();
  s.done(false);
}

function onClose(this: Tracked, hadError: boolean): void {
  this[OWNER]?.delete(this);
  const s = this[SPLICE];
  if (s === undefined) return;
  if (this === s.upstream) releaseReadBuffer(s.readBuffer);
  if (s.state === CONNECTING) {
    fail(s);
    return;
  }
  if (s.state !== JOINED) return;
  // a reset arrives as an error; a clean close of one side ends the other
  const peer = this === s.client ? s.upstream : s.client;
  if (hadError) peer.destroy();
  else endSoftly(peer);
}

/** Client to target: what `pipe` does, with fewer listeners (this runs per chunk). */
function onClientData(this: Tracked, chunk: Buffer): void {
  const s = this[SPLICE]!;
  s.fromClient.bytes += chunk.length;
  const to = s.upstream;
  to.write(chunk);
  if (to.writableLength >= to.writableHighWaterMark) {
    this.pause();
    to.once("drain", onDrain);
  }
}

/** the buffer the upstream socket reads into next: set by `onTargetRead` just before */
let handOut: Buffer = Buffer.alloc(0);

/** Node calls `buffer` (without a `this`) right after each `callback`, and once at creation. */
const TARGET_READS = { buffer: takeReadBuffer, callback: onTargetRead };

function takeReadBuffer(): Buffer {
  return handOut;
}

/**
 * Target to client, `read` bytes in `buffer` (`onread`). The write may leave part of them
 * queued, still in `buffer`; then the next read goes elsewhere (read-buffers.ts). Returning
 * false stops reading until the client's queue drains.
 */
function onTargetRead(this: Tracked, read: number, buffer: Buffer): boolean {
  const s = this[SPLICE]!;
  s.fromTarget.bytes += read;
  const to = s.client;
  to.write(read === buffer.length ? buffer : buffer.subarray(0, read));
  const queued = to.writableLength;
  handOut = s.readBuffer = nextReadBuffer(buffer, read, queued > 0);
  if (queued < to.writableHighWaterMark) return true;
  to.once("drain", onDrain);
  return false;
}

/** `this` is the writer whose queue drained: its peer may read again */
function onDrain(this: Tracked): void {
  const s = this[SPLICE]!;
  (this === s.client ? s.upstream : s.client).resume();
}

/** `this` sent its FIN: pass it on. */
function onEnd(this: Tracked): void {
  const s = this[SPLICE]!;
  const to = this === s.client ? s.upstream : s.client;
  // The last direction of the connection: `to` has already sent us its FIN and everything
  // written to it is in the kernel, so closing it sends the same FIN as `end()` would,
  // without a separate shutdown(2) and Node's finish step (no unread data: no reset).
  if (to.readableEnded && to.writableLength === 0 && !to.writableEnded) to.destroy();
  else endSoftly(to);
  // `this` was already told to end (its peer's FIN came first) and has nothing queued:
  // both directions are done. Closing it now sends that FIN with the close, and the
  // shutdown(2) libuv would run on its next turn is cancelled: when a client closes right
  // after its answer (the common short connection) both FINs arrive in one poll, and this
  // saves a system call and Node's finish steps. Its bytes are all read (this is its EOF),
  // so the close sends a FIN, not a reset.
  if (this.writableEnded && this.writableLength === 0 && !this.destroyed) this.destroy();
}

/** `end()` unless already ended or destroyed (where `end()` would build an error object). */
function endSoftly(socket: Socket): void {
  if (!socket.writableEnded && !socket.destroyed) socket.end();
}

function ignore(): void {
  // errors reach `onClose` as hadError; this listener keeps them from being thrown
}

export type ProxyHeaderRead =
  | { readonly kind: "header"; readonly addresses: ProxyAddresses | undefined }
  | { readonly kind: "none" }
  | { readonly kind: "failed"; readonly reason: string };

/**
 * Reads a PROXY v2 header from the front of `socket`. With `required`, anything else fails;
 * without, plain traffic is accepted and left unread ("none"). Bytes after the header are
 * pushed back, and the socket is left paused for the caller to splice.
 */
export function readProxyHeader(
  socket: Socket,
  timeoutMs: number,
  required: boolean,
): Promise<ProxyHeaderRead> {
  return new Promise((resolve) => {
    let buffered: Buffer = Buffer.alloc(0);
    const timer = setTimeout(() => done({ kind: "failed", reason: "no PROXY header in time" }), timeoutMs);
    function done(result: ProxyHeaderRead, rest?: Buffer): void {
      clearTimeout(timer);
      socket.off("data", onData);
      socket.off("end", onEnd);
      socket.off("close", onEnd);
      socket.pause();
      if (rest && rest.length > 0) socket.unshift(rest);
      resolve(result);
    }
    function onEnd(): void {
      done({ kind: "failed", reason: "closed before a PROXY header" });
    }
    function onData(chunk: Buffer): void {
      buffered = buffered.length === 0 ? chunk : Buffer.concat([buffered, chunk]);
      const d = decodeProxyV2(buffered);
      if (d.kind === "incomplete") return;
      if (d.kind === "invalid") {
        if (required) done({ kind: "failed", reason: d.reason });
        else done({ kind: "none" }, buffered);
        return;
      }
      done({ kind: "header", addresses: d.addresses }, buffered.subarray(d.length));
    }
    socket.on("data", onData);
    socket.once("end", onEnd);
    socket.once("close", onEnd);
    socket.resume();
  });
}

/** `::ffff:127.0.0.1` → `127.0.0.1`: sockets on dual-stack listeners report mapped addresses. */
export function plainAddress(address: string | undefined): string {
  if (address === undefined) return "";
  return address.startsWith("::ffff:") && address.includes(".") ? address.slice(7) : address;
}
