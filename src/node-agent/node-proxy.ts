/**
 * Adapter: `passlb agent --dataplane userspace` — the node side in userspace mode. Listens
 * on the node address at every nodePort (TCP and UDP) and sends each new connection or
 * flow to a pod chosen among the targets node-port-routes.ts allows under the Service's
 * externalTrafficPolicy. The node's health answers are the agent's own kube-proxy-compatible
 * servers (src/health/health-servers.ts), run beside it.
 *
 * - Pod choice: the flow hash (5-tuple, or the client address under ClientIP affinity)
 *   modulo the number of targets, so one client sticks to one pod while the pods stay.
 * - Client address: with `acceptProxyProtocol`, a PROXY v2 header from the LB gives the
 *   original client. With `sendProxyProtocol`, the pod is told the client under Local and
 *   the node address under Cluster (kube-proxy masquerades external Cluster traffic).
 * - Established connections keep their pod when targets change; UDP flows to a pod that
 *   left choose again on their next datagram.
 */
import type { Server, Socket } from "node:net";
import { flowHash } from "../forwarding/maglev-flow-hash.ts";
import type { NodePortRoute, NodeRoutes, PodTarget } from "../lb-host/userspace/node-port-routes.ts";
import { decodeProxyV2, encodeProxyV2 } from "../lb-host/userspace/proxy-protocol.ts";
import { destroyAll, listenTcp } from "../lb-host/userspace/tcp-listener.ts";
import { plainAddress, readProxyHeader, type SocketSet, spliceTcp } from "../lb-host/userspace/tcp-proxy.ts";
import { UdpRelay } from "../lb-host/userspace/udp-proxy.ts";

export interface NodeProxyEvent {
  readonly kind: "connection" | "flow" | "no_endpoint" | "unreachable" | "bad_header";
  readonly node: string;
  readonly service: string;
  readonly client: string;
  readonly pod?: string | undefined;
}

export interface NodeProxyOptions {
  readonly node: string;
  /** the address every listener binds */
  readonly address: string;
  readonly seed: number;
  readonly acceptProxyProtocol?: boolean;
  readonly sendProxyProtocol?: boolean;
  readonly udpIdleMs?: number;
  readonly connectTimeoutMs?: number;
  readonly now?: () => number;
  readonly onEvent?: (e: NodeProxyEvent) => void;
}

interface Listening {
  route: NodePortRoute;
  readonly server?: Server;
  readonly relay?: UdpRelay;
}

export class NodeProxy {
  readonly #o: NodeProxyOptions;
  readonly #now: () => number;
  readonly #listeners = new Map<string, Listening>();
  readonly #sockets: SocketSet = new Set();
  #closed = false;

  constructor(options: NodeProxyOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  get openSockets(): number {
    return this.#sockets.size;
  }

  /** Level-triggered: opens, updates and closes listeners to match. Returns bind errors. */
  async update(state: NodeRoutes): Promise<string[]> {
    if (this.#closed) return [];
    const errors: string[] = [];
    const wanted = new Map(state.routes.map((r) => [`${r.protocol}/${r.nodePort}`, r]));
    for (const [key, l] of this.#listeners)
      if (!wanted.has(key)) {
        this.#listeners.delete(key);
        l.server?.close();
        await l.relay?.close();
      }
    for (const [key, route] of wanted) {
      const l = this.#listeners.get(key);
      if (l) {
        l.route = route;
        const live = new Set(route.targets.map(targetKey));
        l.relay?.dropFlows((t) => !live.has(t.owner));
        continue;
      }
      try {
        this.#listeners.set(key, await this.#open(route));
      } catch (e) {
        errors.push(`${this.#o.address}:${route.nodePort}/${route.protocol}: ${(e as Error).message}`);
      }
    }
    return errors;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#listeners.values()];
    this.#listeners.clear();
    await destroyAll(this.#sockets);
    await Promise.all(
      all.map(async (l) => {
        await l.relay?.close();
        const s = l.server;
        if (s) await new Promise<void>((resolve) => s.close(() => resolve()));
      }),
    );
  }

  #pick(route: NodePortRoute, client: string, clientPort: number): PodTarget | undefined {
    const n = route.targets.length;
    if (n === 0) return undefined;
    const h = route.clientIpAffinity
      ? flowHash({ srcAddr: client }, this.#o.seed)
      : flowHash(
          {
            protocol: route.protocol,
            srcAddr: client,
            srcPort: clientPort,
            dstAddr: this.#o.address,
            dstPort: route.nodePort,
          },
          this.#o.seed,
        );
    return route.targets[h % n];
  }

  #podHeader(
    route: NodePortRoute,
    transport: "TCP" | "UDP",
    client: string,
    clientPort: number,
    t: PodTarget,
  ): Buffer | undefined {
    if (!this.#o.sendProxyProtocol) return undefined;
    const local = route.policy === "Local";
    const src = local ? client : this.#o.address;
    if (src.includes(":") !== t.address.includes(":")) return undefined;
    return encodeProxyV2({
      transport,
      srcAddr: src,
      srcPort: local ? clientPort : 0,
      dstAddr: t.address,
      dstPort: t.port,
    });
  }

  async #open(route: NodePortRoute): Promise<Listening> {
    const entry: Listening = { route };
    if (route.protocol === "UDP") {
      const clients = new Map<string, { address: string; port: number }>();
      const relay = new UdpRelay({
        address: this.#o.address,
        port: route.nodePort,
        idleMs: this.#o.udpIdleMs ?? 30_000,
        now: this.#now,
        choose: (rinfo, payload) => {
          const c = this.#udpClient(rinfo.address, rinfo.port, payload);
          clients.set(`${rinfo.address}|${rinfo.port}`, c);
          if (clients.size > 65536) clients.clear();
          const t = this.#pick(entry.route, c.address, c.port);
          const base = { node: this.#o.node, service: entry.route.service, client: c.address };
          if (!t) {
            this.#o.onEvent?.({ kind: "no_endpoint", ...base });
            return undefined;
          }
          this.#o.onEvent?.({ kind: "flow", ...base, pod: t.pod });
          return { host: t.address, port: t.port, owner: targetKey(t) };
        },
        outbound: (rinfo, payload) => {
          let body = payload;
          if (this.#o.acceptProxyProtocol) {
            const d = decodeProxyV2(payload);
            if (d.kind === "header") body = payload.subarray(d.length);
          }
          if (!this.#o.sendProxyProtocol) return body;
          const c = clients.get(`${rinfo.address}|${rinfo.port}`) ?? {
            address: plainAddress(rinfo.address),
            port: rinfo.port,
          };
          const t = this.#pick(entry.route, c.address, c.port);
          const header = t && this.#podHeader(entry.route, "UDP", c.address, c.port, t);
          return header ? Buffer.concat([header, body]) : body;
        },
      });
      await relay.listen();
      return Object.assign(entry, { relay });
    }
    const server = await listenTcp({
      host: this.#o.address,
      port: route.nodePort,
      sockets: this.#sockets,
      closing: () => this.#closed,
      onSocket: (socket) => void this.#onTcp(entry, socket),
    });
    return Object.assign(entry, { server });
  }

  #udpClient(address: string, port: number, payload: Buffer): { address: string; port: number } {
    if (this.#o.acceptProxyProtocol) {
      const d = decodeProxyV2(payload);
      if (d.kind === "header" && d.addresses)
        return { address: d.addresses.srcAddr, port: d.addresses.srcPort };
    }
    return { address: plainAddress(address), port };
  }

  async #onTcp(entry: Listening, socket: Socket): Promise<void> {
    let client = plainAddress(socket.remoteAddress);
    let clientPort = socket.remotePort ?? 0;
    if (this.#o.acceptProxyProtocol) {
      const h = await readProxyHeader(socket, this.#o.connectTimeoutMs ?? 3000, false);
      if (h.kind === "failed") {
        this.#o.onEvent?.({ kind: "bad_header", node: this.#o.node, service: entry.route.service, client });
        socket.destroy();
        return;
      }
      if (h.kind === "header" && h.addresses) {
        client = h.addresses.srcAddr;
        clientPort = h.addresses.srcPort;
      }
    }
    const route = entry.route;
    const base = { node: this.#o.node, service: route.service, client };
    const t = this.#pick(route, client, clientPort);
    if (!t) {
      this.#o.onEvent?.({ kind: "no_endpoint", ...base });
      socket.resetAndDestroy();
      return;
    }
    const header = this.#podHeader(route, "TCP", client, clientPort, t);
    spliceTcp(
      socket,
      { host: t.address, port: t.port },
      { connectTimeoutMs: this.#o.connectTimeoutMs ?? 3000, ...(header ? { header } : {}) },
      this.#sockets,
      (ok) => {
        this.#o.onEvent?.({ kind: ok ? "connection" : "unreachable", ...base, pod: t.pod });
        if (!ok && !socket.destroyed) socket.resetAndDestroy();
      },
    );
  }
}

function targetKey(t: PodTarget): string {
  return `${t.address}:${t.port}`;
}
