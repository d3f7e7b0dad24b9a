/**
 * Adapter: a UDP listener that relays flows. A flow is one client address:port; its first
 * datagram asks `choose` for a target, later ones go to the same target through the same
 * upstream socket, and answers come back from the listener's address. A flow ends after
 * `idleMs` without datagrams either way (as conntrack's UDP timeout does), or when
 * `dropFlows` says its target is gone — the next datagram then chooses again.
 *
 * One sweep timer per relay; every upstream socket is closed on expiry and on `close()`.
 * Deliberately not here: the choice itself (callers consult forwarding state).
 */
import { createSocket, type RemoteInfo, type Socket } from "node:dgram";
import { FlowTable } from "./flow-table.ts";
import type { ByteTally } from "./tcp-proxy.ts";

export interface UdpTarget {
  readonly host: string;
  readonly port: number;
  /** who the flow belongs to, for `dropFlows` (a node or pod name) */
  readonly owner: string;
  /** client datagram bytes relayed to the target are added here */
  readonly toBackend?: ByteTally;
  /** answer bytes relayed back to the client are added here */
  readonly toClient?: ByteTally;
}

export interface UdpRelayOptions {
  readonly address: string;
  readonly port: number;
  readonly idleMs: number;
  readonly maxFlows?: number;
  readonly now: () => number;
  /**
   * Where a new flow goes; undefined drops the datagram (no backend, source not allowed).
   * `payload` is the datagram (the relay may be asked to strip a header first).
   */
  readonly choose: (client: RemoteInfo, payload: Buffer) => UdpTarget | undefined;
  /** rewrites a datagram before it goes upstream (strip or add a PROXY header) */
  readonly outbound?: (client: RemoteInfo, payload: Buffer) => Buffer | undefined;
}

interface Flow {
  readonly target: UdpTarget;
  readonly upstream: Socket;
  /** datagrams that arrived before the upstream socket finished connecting (bounded) */
  pending: Buffer[] | undefined;
}

const MAX_PENDING = 64;

export class UdpRelay {
  readonly #o: UdpRelayOptions;
  readonly #flows: FlowTable<Flow>;
  #listener: Socket | undefined;
  #sweep: ReturnType<typeof setInterval> | undefined;

  constructor(options: UdpRelayOptions) {
    this.#o = options;
    this.#flows = new FlowTable<Flow>({ idleMs: options.idleMs, maxEntries: options.maxFlows ?? 65536 });
  }

  get flowCount(): number {
    return this.#flows.size;
  }

  listen(): Promise<void> {
    return new Promise((resolve, reject) => {
      const family = this.#o.address.includes(":") ? "udp6" : "udp4";
      const sock = createSocket({ type: family });
      sock.once("error", (e) => {
        sock.close();
        reject(e);
      });
      sock.bind({ address: this.#o.address, port: this.#o.port, exclusive: true }, () => {
        sock.removeAllListeners("error");
        sock.on("error", () => {});
        sock.on("message", (msg, rinfo) => this.#onMessage(msg, rinfo));
        this.#listener = sock;
        this.#sweep = setInterval(() => this.#expire(), Math.min(1000, this.#o.idleMs));
        this.#sweep.unref();
        resolve();
      });
    });
  }

  /** Ends every flow whose target matches (its owner left); their next datagram chooses again. */
  dropFlows(predicate: (target: UdpTarget) => boolean): void {
    for (const [, flow] of this.#flows.deleteWhere((f) => predicate(f.target))) safeClose(flow.upstream);
  }

  close(): Promise<void> {
    if (this.#sweep) clearInterval(this.#sweep);
    this.#sweep = undefined;
    for (const [, flow] of this.#flows.clear()) safeClose(flow.upstream);
    const l = this.#listener;
    this.#listener = undefined;
    if (!l) return Promise.resolve();
    return new Promise((resolve) => l.close(() => resolve()));
  }

  #expire(): void {
    for (const [, flow] of this.#flows.sweep(this.#o.now())) safeClose(flow.upstream);
  }

  #onMessage(msg: Buffer, rinfo: RemoteInfo): void {
    const listener = this.#listener;
    if (!listener) return;
    const key = `${rinfo.address}|${rinfo.port}`;
    const now = this.#o.now();
    let flow = this.#flows.get(key, now);
    if (!flow) {
      const target = this.#o.choose(rinfo, msg);
      if (!target) return;
      const upstream = createSocket({ type: target.host.includes(":") ? "udp6" : "udp4" });
      upstream.on("error", () => {
        if (this.#flows.get(key, now, false) === flow) this.#flows.delete(key);
        safeClose(upstream);
      });
      upstream.on("message", (reply) => {
        this.#flows.get(key, this.#o.now()); // an answer keeps the flow alive too
        if (target.toClient) target.toClient.bytes += reply.length;
        this.#listener?.send(reply, rinfo.port, rinfo.address);
      });
      const created: Flow = { target, upstream, pending: [] };
      upstream.connect(target.port, target.host, () => {
        const queued = created.pending ?? [];
        created.pending = undefined;
        for (const d of queued) upstream.send(d);
      });
      flow = created;
      if (!this.#flows.set(key, flow, now)) {
        safeClose(upstream);
        return;
      }
    }
    const out = this.#o.outbound ? this.#o.outbound(rinfo, msg) : msg;
    if (out === undefined) return;
    const f = flow;
    if (f.pending) {
      if (f.pending.length >= MAX_PENDING) return;
      f.pending.push(out);
      if (f.target.toBackend) f.target.toBackend.bytes += msg.length;
      return;
    }
    if (f.target.toBackend) f.target.toBackend.bytes += msg.length;
    try {
      f.upstream.send(out);
    } catch {
      this.#flows.delete(key);
      safeClose(f.upstream);
    }
  }
}

function safeClose(s: Socket): void {
  try {
    s.close();
  } catch {
    // already closed
  }
}
