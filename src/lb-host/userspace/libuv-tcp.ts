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
import { ConnectDeadlines } from "./connect-deadlines.ts";
import { type Binder, type Binding, loadBinding, processBinder, uvError } from "./libuv-binding.ts";
import {
  afterConnect,
  CLOSED,
  CONNECTING,
  closeConnection,
  closeHandle,
  DISCARD,
  failConnect,
  type Handle,
  IDLE,
  LibuvConnection,
  onTargetRead,
} from "./libuv-connection.ts";
import { firstReadBuffer } from "./read-buffers.ts";
import type { ClientConnection, TcpListenerHandle, TcpListenOptions, TcpPlumbing } from "./tcp-plumbing.ts";
import type { SpliceOptions, TcpTarget } from "./tcp-proxy.ts";

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
    h.onconnection = (err, accepted) => {
      const client: Handle | undefined = accepted;
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
    const up: Handle = new b.TCP(b.SOCKET);
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
