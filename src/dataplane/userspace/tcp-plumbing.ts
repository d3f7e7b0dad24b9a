/**
 * Adapter seam: the TCP plumbing the userspace LB runs on — a listener that hands over
 * accepted connections, and a splice that joins one to a target (semantics in
 * tcp-proxy.ts: backpressure, half-close, errors, connect deadline, byte tallies).
 * Two implementations with the same contract (test/userspace/lb-plumbing-suite.ts runs on
 * both):
 * - `libuvTcpPlumbing` (libuv-tcp.ts): libuv's TCP handles driven directly, without
 *   net.Socket and its streams: about half the CPU per connection; used when this Node
 *   exposes them;
 * - `netTcpPlumbing` (below): node:net sockets, the fallback, and what the node proxy uses.
 * Deliberately not here: which node to pick (userspace-lb.ts).
 */
import type { Socket } from "node:net";
import { destroyAll, listenTcp } from "./tcp-listener.ts";
import { type SocketSet, type SpliceOptions, spliceTcp, type TcpTarget } from "./tcp-proxy.ts";

/** an accepted client connection, as the LB sees it (net.Socket has this shape) */
export interface ClientConnection {
  readonly remoteAddress: string | undefined;
  readonly remotePort: number | undefined;
  readonly destroyed: boolean;
  destroy(): void;
  /** close with a TCP reset (a refused client) */
  resetAndDestroy(): void;
}

export interface TcpListenerHandle {
  close(callback: () => void): void;
}

export interface TcpListenOptions {
  readonly host: string;
  readonly port: number;
  readonly closing: () => boolean;
  readonly onConnection: (client: ClientConnection) => void;
}

export interface TcpPlumbing {
  /** "libuv" or "net": which implementation, for logs and docs */
  readonly kind: "libuv" | "net";
  /** resolves once listening; rejects with the bind error (its `code`, e.g. EADDRINUSE) */
  listen(options: TcpListenOptions): Promise<TcpListenerHandle>;
  /** as `spliceTcp`; `client` is one this plumbing's listener handed over */
  splice(
    client: ClientConnection,
    target: TcpTarget,
    options: SpliceOptions,
    done: (ok: boolean) => void,
  ): void;
  /** open connections (clients and targets) */
  readonly open: number;
  /** closes every open connection; resolves once all have closed */
  destroyAll(): Promise<void>;
}

/** node:net sockets (listenTcp + spliceTcp), each tracked in one set */
export function netTcpPlumbing(): TcpPlumbing {
  const sockets: SocketSet = new Set();
  return {
    kind: "net",
    listen: (o) =>
      listenTcp({
        host: o.host,
        port: o.port,
        sockets,
        closing: o.closing,
        onSocket: o.onConnection,
      }),
    splice: (client, target, options, done) => spliceTcp(client as Socket, target, options, sockets, done),
    get open() {
      return sockets.size;
    },
    destroyAll: () => destroyAll(sockets),
  };
}

/** one line for start-up output: which TCP plumbing runs, and why when it is the fallback */
export function describeTcpPlumbing(kind: TcpPlumbing["kind"]): string {
  return kind === "libuv"
    ? "TCP on libuv handles"
    : "TCP on node:net sockets (this Node does not expose libuv's TCP handles)";
}
