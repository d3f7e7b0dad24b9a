/**
 * Adapter seam: the TCP plumbing the userspace LB runs on — a listener that hands over
 * accepted connections, and a splice that joins one to a target (semantics in
 * tcp-proxy.ts: backpressure, half-close, errors, connect deadline, byte tallies).
 * Two implementations with the same contract (test/userspace/lb-plumbing-suite.ts runs on
 * both):
 * - `netTcpPlumbing` (below): node:net sockets, documented APIs only — the default, and
 *   what the node proxy uses;
 * - `libuvTcpPlumbing` (libuv-tcp.ts): libuv's TCP handles driven directly through Node's
 *   undocumented `process.binding("tcp_wrap")`, without net.Socket and its streams. Opt-in
 *   only, named experimental (`--tcp-plumbing experimental-libuv`): a Node upgrade may
 *   change or remove those internals (docs/architecture.md "Conventions").
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

/** what a user may ask for (`--tcp-plumbing`): node:net, or the experimental libuv handles */
export type TcpPlumbingChoice = "net" | "experimental-libuv";

export const TCP_PLUMBING_CHOICES: readonly TcpPlumbingChoice[] = ["net", "experimental-libuv"];

/** a `--tcp-plumbing` value, or undefined when it is none of TCP_PLUMBING_CHOICES */
export function parseTcpPlumbing(value: string): TcpPlumbingChoice | undefined {
  return (TCP_PLUMBING_CHOICES as readonly string[]).includes(value)
    ? (value as TcpPlumbingChoice)
    : undefined;
}

/**
 * One line for start-up output: which TCP plumbing runs, and why when it is not the one
 * asked for (`experimental-libuv` on a Node that does not expose the handles).
 */
export function describeTcpPlumbing(kind: TcpPlumbing["kind"], requested: TcpPlumbingChoice = "net"): string {
  if (kind === "libuv") return "TCP on libuv handles (experimental: Node internals)";
  return requested === "experimental-libuv"
    ? "TCP on node:net sockets (experimental-libuv asked for, but this Node does not expose libuv's TCP handles)"
    : "TCP on node:net sockets";
}
