/**
 * Adapter: TCP plumbing shared by the userspace LB and the node proxy. `spliceTcp` joins
 * an accepted client socket to a new connection towards a target; `readProxyHeader`
 * takes a PROXY v2 header off the front of an accepted socket.
 *
 * - Backpressure: each direction pauses its reader while the writer's buffer is full and
 *   resumes it on `drain`, so one slow peer holds only its own connection.
 * - Half-close: both sockets allow half-open; a FIN from one side becomes `end()` on the
 *   other, and the reverse direction keeps flowing until it ends too.
 * - Errors: a reset or error on either side destroys both; the connect has a deadline, so
 *   a dead backend costs one timer, cleared on every path.
 * Deliberately not here: which target to pick (the callers decide from forwarding state).
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import { decodeProxyV2, type ProxyAddresses } from "./proxy-protocol.ts";

export interface TcpTarget {
  readonly host: string;
  readonly port: number;
}

export interface SpliceOptions {
  readonly connectTimeoutMs: number;
  /** bytes written to the target before anything from the client (a PROXY header) */
  readonly header?: Buffer;
  /** source address to connect from (a loopback address), when set */
  readonly localAddress?: string;
}

/** the live sockets of one splicer, so the owner can destroy them all on close */
export type SocketSet = Set<Socket>;

function track(set: SocketSet | undefined, s: Socket): void {
  if (!set) return;
  set.add(s);
  s.once("close", () => set.delete(s));
}

/**
 * Connects to `target` and, once connected, joins it to `client`. Resolves true when the
 * connection was established (data then flows until both sides finish), false when the
 * target could not be reached in time — the client is left untouched so the caller may try
 * another target or destroy it.
 */
export function spliceTcp(
  client: Socket,
  target: TcpTarget,
  options: SpliceOptions,
  sockets?: SocketSet,
): Promise<boolean> {
  return new Promise((resolve) => {
    if (client.destroyed) {
      resolve(false);
      return;
    }
    const upstream = connect({
      host: target.host,
      port: target.port,
      allowHalfOpen: true,
      noDelay: true,
      ...(options.localAddress === undefined ? {} : { localAddress: options.localAddress }),
    });
    track(sockets, upstream);
    let settled = false;
    const timer = setTimeout(() => fail(), options.connectTimeoutMs);
    const onClientGone = () => fail();
    client.once("close", onClientGone);
    function fail(): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.off("close", onClientGone);
      upstream.destroy();
      resolve(false);
    }
    upstream.once("error", fail);
    upstream.once("connect", () => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      client.off("close", onClientGone);
      upstream.off("error", fail);
      if (options.header) upstream.write(options.header);
      join(client, upstream);
      resolve(true);
    });
  });
}

function join(a: Socket, b: Socket): void {
  const onError = () => {
    a.destroy();
    b.destroy();
  };
  a.on("error", onError);
  b.on("error", onError);
  // a reset arrives as an error; a clean close of one side ends the other
  a.once("close", (hadError) => (hadError ? b.destroy() : b.end()));
  b.once("close", (hadError) => (hadError ? a.destroy() : a.end()));
  relay(a, b);
  relay(b, a);
}

/** One direction: what `pipe` does, with fewer listeners (this runs per connection). */
function relay(from: Socket, to: Socket): void {
  const resume = () => from.resume();
  from.on("data", (chunk: Buffer) => {
    if (!to.write(chunk)) {
      from.pause();
      to.once("drain", resume);
    }
  });
  from.once("end", () => to.end());
  from.resume();
}

export type ProxyHeaderRead =
  | { readonly kind: "header"; readonly addresses: ProxyAddresses | undefined }
  | { readonly kind: "none" }
  | { readonly kind: "failed"; readonly reason: string };

/**
 * Reads a PROXY v2 header from the front of `socket`. With `required`, anything else fails;
 * without, plain traffic is accepted and left unread ("none"). Bytes after the header are
 * pushed back, and the socket is left paused for the caller to pipe.
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

/** Destroys every socket of the set and resolves once each has closed. */
export async function destroyAll(sockets: SocketSet): Promise<void> {
  const all = [...sockets];
  await Promise.all(
    all.map(
      (s) =>
        new Promise<void>((resolve) => {
          if (s.closed) return resolve();
          s.once("close", () => resolve());
          s.destroy();
        }),
    ),
  );
}

/**
 * A TCP listener for a proxy: half-open allowed, paused until the handler reads, Nagle off;
 * each accepted socket is tracked in `sockets` (so closing the proxy can destroy it) and
 * handed to `onSocket`, unless the proxy is already closing. Resolves once listening.
 */
export async function listenTcp(options: {
  readonly host: string;
  readonly port: number;
  readonly sockets: SocketSet;
  readonly closing: () => boolean;
  readonly onSocket: (socket: Socket) => void;
}): Promise<Server> {
  const server = createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true });
  server.on("connection", (socket) => {
    if (options.closing()) {
      socket.destroy();
      return;
    }
    options.sockets.add(socket);
    socket.once("close", () => options.sockets.delete(socket));
    socket.on("error", () => socket.destroy());
    options.onSocket(socket);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: options.host, port: options.port, exclusive: true }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  return server;
}
