/**
 * Adapter: the accepting side of the userspace proxies (the LB and the node proxy).
 * `listenTcp` opens a proxy's listener and tracks every accepted socket so closing the
 * proxy can destroy them (`destroyAll`).
 * Per-connection handlers are shared module functions (see tcp-proxy.ts for why).
 * Deliberately not here: joining a client to a target and reading a PROXY header
 * (tcp-proxy.ts).
 */
import { createServer, type Server, type Socket } from "node:net";
import type { SocketSet } from "./tcp-proxy.ts";

const OWNER = Symbol("passlb.acceptedIn");

interface Accepted extends Socket {
  [OWNER]?: SocketSet;
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

function untrack(this: Accepted): void {
  this[OWNER]?.delete(this);
}

function destroySelf(this: Socket): void {
  this.destroy();
}

/**
 * A TCP listener for a proxy: half-open allowed, Nagle off;
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
  // Not `pauseOnConnect`: an accepted socket reads at once into its stream buffer (at most
  // its high-water mark, then the kernel holds the rest) until the splice takes the data;
  // pausing and resuming it would cost two more epoll_ctl calls per connection.
  const server = createServer({ allowHalfOpen: true, noDelay: true });
  const { sockets, closing, onSocket } = options;
  server.on("connection", (socket: Accepted) => {
    if (closing()) {
      socket.destroy();
      return;
    }
    socket[OWNER] = sockets;
    sockets.add(socket);
    socket.on("close", untrack);
    socket.on("error", destroySelf);
    onSocket(socket);
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
