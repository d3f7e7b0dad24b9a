/**
 * Adapter: the userspace load balancer. Owns one TCP or UDP listener per VIP:port of every
 * planned Service and forwards each new connection or flow to a node's nodePort, chosen by
 * lb-route.ts from the Service's forwarding state (Maglev table, health, weights, zones).
 *
 * Semantics (docs/dataplane-userspace.md):
 *   - an established TCP connection stays on its node whatever the table does later; a
 *     UDP flow stays until idle (`udpIdleMs`) or until its node stops taking new flows;
 *   - ClientIP session affinity keeps a client on its node for `timeoutSeconds` after its
 *     last connection (Kubernetes ClientIPConfig; 10800 s when unset);
 *   - sources outside `loadBalancerSourceRanges` are refused (TCP reset, UDP dropped);
 *   - optional PROXY protocol v2 towards the node carries the client address;
 *   - the status this data plane reports is `ipMode: Proxy` (Kubernetes LoadBalancerIngress):
 *     the planner is run with that mode by the caller.
 * Counts connections, flows and bytes per Service and node (traffic-counters.ts, read with
 * `trafficTotals()`). TCP runs on a `TcpPlumbing` (tcp-plumbing.ts): node:net sockets by
 * default, libuv's handles (Node internals) only when `tcp: "experimental-libuv"` asks and
 * this Node exposes them; the per-connection path allocates little beyond the plumbing's
 * own objects (docs/benchmarks.md "Userspace proxy").
 * `update` is level-triggered: the listeners that should exist are opened, those no longer
 * wanted are closed, the others switch to the new forwarding state in place.
 *
 * As an `LbDataplane` (lb-dataplane.ts): `apply` is `update` plus the client zones of
 * zonal affinity from PasslbConfig's `clientCIDRs` (client-zones.ts; a `clientZone` option,
 * the quickstart's own assignment, wins); `check` opens again the listeners whose bind
 * failed (a port another process held); `counters` are the per-Service and per-node bytes
 * (no packets: a proxy counts connections and bytes); nothing to adopt at `start`, and
 * `stop` closes every socket — the sockets end with the process anyway.
 */
import type { ServiceForwarding } from "../../forwarding/forwarding-state.ts";
import type {
  ApplyReport,
  DataplaneCounters,
  LbDataplane,
  LbDesiredState,
  StartReport,
  TrafficCount,
} from "../lb-dataplane.ts";
import { type ClientZoneOf, clientZones } from "./client-zones.ts";
import { FlowTable } from "./flow-table.ts";
import { chooseNode, type LbRoute, parseSourceRanges, sourceAllowed } from "./lb-route.ts";
import { libuvTcpPlumbing } from "./libuv-tcp.ts";
import { encodeProxyV2 } from "./proxy-protocol.ts";
import {
  type ClientConnection,
  netTcpPlumbing,
  type TcpListenerHandle,
  type TcpPlumbing,
  type TcpPlumbingChoice,
} from "./tcp-plumbing.ts";
import { plainAddress } from "./tcp-proxy.ts";
import { TrafficCounters, type TrafficTotals } from "./traffic-counters.ts";
import { UdpRelay } from "./udp-proxy.ts";

export interface LbEvent {
  readonly kind: "connection" | "flow" | "denied" | "unreachable" | "no_backend";
  readonly service: string;
  readonly listener: string;
  readonly vip: string;
  readonly client: string;
  readonly node?: string;
}

export interface LbFinding {
  readonly code:
    | "listener_bind_failed"
    | "listener_conflict"
    | "listener_no_node_port"
    | "protocol_unsupported";
  readonly severity: "error" | "warning";
  readonly subject: string;
  readonly message: string;
}

export interface UserspaceLbOptions {
  readonly seed: number;
  readonly proxyProtocol?: boolean;
  readonly udpIdleMs?: number;
  readonly connectTimeoutMs?: number;
  /** the zone of a client address (PasslbConfig zones), for zonal affinity */
  readonly clientZone?: (address: string) => string | undefined;
  readonly now?: () => number;
  readonly onEvent?: (event: LbEvent) => void;
  /**
   * TCP plumbing (tcp-plumbing.ts): "net" (the default) runs on node:net sockets;
   * "experimental-libuv" on libuv's handles through Node internals when this Node exposes
   * them, else on node:net (`tcpPlumbing` says which runs)
   */
  readonly tcp?: TcpPlumbingChoice;
}

interface Listening {
  readonly key: string;
  readonly protocol: "TCP" | "UDP";
  route: LbRoute;
  nodePort: number;
  readonly server?: TcpListenerHandle;
  readonly relay?: UdpRelay;
}

const DEFAULT_AFFINITY_SECONDS = 10800;

export class UserspaceLb implements LbDataplane {
  readonly name = "userspace" as const;
  readonly #o: UserspaceLbOptions;
  readonly #now: () => number;
  readonly #listeners = new Map<string, Listening>();
  readonly #tcp: TcpPlumbing;
  readonly #affinity = new Map<string, FlowTable<string>>();
  readonly #traffic = new TrafficCounters();
  #closed = false;
  /** the last state applied, for `check()`; the zones it derived the client zones from */
  #applied: LbDesiredState | undefined;
  #zoneOf: ClientZoneOf | undefined;
  #zonesOf: LbDesiredState["zones"] | undefined;

  constructor(options: UserspaceLbOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
    this.#tcp = (options.tcp === "experimental-libuv" && libuvTcpPlumbing()) || netTcpPlumbing();
  }

  /** which TCP plumbing runs: "libuv" or "net" (tcp-plumbing.ts) */
  get tcpPlumbing(): "libuv" | "net" {
    return this.#tcp.kind;
  }

  /** `TCP 127.0.1.1:8080` for every open listener */
  listening(): string[] {
    return [...this.#listeners.keys()].sort();
  }

  get openSockets(): number {
    return this.#tcp.open;
  }

  /** connections, flows and bytes forwarded so far, per Service and node */
  trafficTotals(): TrafficTotals[] {
    return this.#traffic.totals();
  }

  /** nothing to adopt: a previous process's sockets ended with it */
  start(): Promise<StartReport> {
    return Promise.resolve({ adopted: false, replaced: false });
  }

  async apply(state: LbDesiredState): Promise<ApplyReport> {
    const started = this.#now();
    if (state.zones !== this.#zonesOf) {
      this.#zonesOf = state.zones;
      this.#zoneOf = clientZones(state.zones);
    }
    const before = new Set(this.#listeners.keys());
    const findings = await this.update(state.forwarding);
    this.#applied = state;
    const after = new Set(this.#listeners.keys());
    const ops =
      [...after].filter((k) => !before.has(k)).length + [...before].filter((k) => !after.has(k)).length;
    return { ops, ms: this.#now() - started, findings };
  }

  /** listeners the last apply wanted but could not bind are tried again; returns those now open */
  async check(): Promise<readonly string[]> {
    const applied = this.#applied;
    if (!applied || this.#closed) return [];
    const before = new Set(this.#listeners.keys());
    await this.update(applied.forwarding);
    return [...this.#listeners.keys()].filter((k) => !before.has(k)).map((k) => `listener ${k} opened`);
  }

  counters(): Promise<DataplaneCounters> {
    const services = new Map<string, TrafficCount>();
    const nodes = new Map<string, TrafficCount>();
    const add = (m: Map<string, TrafficCount>, key: string, bytes: number) => {
      m.set(key, { packets: 0, bytes: (m.get(key)?.bytes ?? 0) + bytes });
    };
    for (const t of this.#traffic.totals()) {
      add(services, t.service, t.bytesToBackend + t.bytesToClient);
      add(nodes, t.node, t.bytesToBackend + t.bytesToClient);
    }
    return Promise.resolve({ services, nodes, reasons: new Map() });
  }

  stop(): Promise<void> {
    return this.close();
  }

  async update(services: readonly ServiceForwarding[]): Promise<LbFinding[]> {
    if (this.#closed) return [];
    const findings: LbFinding[] = [];
    const wanted = new Map<
      string,
      { route: LbRoute; protocol: "TCP" | "UDP"; nodePort: number; ip: string }
    >();
    for (const svc of services) {
      const plan = svc.plan;
      const affinity = plan.sessionAffinity.type === "ClientIP";
      if (affinity) {
        const ms = (plan.sessionAffinity.timeoutSeconds ?? DEFAULT_AFFINITY_SECONDS) * 1000;
        const t = this.#affinity.get(plan.service);
        if (!t) this.#affinity.set(plan.service, new FlowTable({ idleMs: ms }));
      } else this.#affinity.delete(plan.service);
      const ranges = parseSourceRanges(plan.sourceRanges);
      for (const fw of svc.listeners) {
        const l = plan.listeners.find((x) => x.protocol === fw.protocol && x.port === fw.port);
        if (fw.protocol === "SCTP") {
          findings.push(
            finding(
              "protocol_unsupported",
              "warning",
              plan.service,
              fw.listener,
              "SCTP is not proxied in userspace",
            ),
          );
          continue;
        }
        if (!l?.nodePort) {
          findings.push(
            finding(
              "listener_no_node_port",
              "warning",
              plan.service,
              fw.listener,
              "no nodePort to forward to",
            ),
          );
          continue;
        }
        for (const vip of plan.vips) {
          const key = `${fw.protocol} ${vip.family === "IPv6" ? `[${vip.address}]` : vip.address}:${fw.port}`;
          if (wanted.has(key)) {
            findings.push(
              finding(
                "listener_conflict",
                "error",
                plan.service,
                fw.listener,
                `${key} is already used by ${wanted.get(key)!.route.service}`,
              ),
            );
            continue;
          }
          const route: LbRoute = {
            service: plan.service,
            vip: vip.address,
            forwarding: fw,
            backendsByNode: new Map(fw.backends.map((b) => [b.node, b])),
            sourceRanges: ranges,
            clientIpAffinity: affinity,
            seed: this.#o.seed,
            traffic: new Map(fw.backends.map((b) => [b.node, this.#traffic.node(plan.service, b.node)])),
          };
          wanted.set(key, { route, protocol: fw.protocol, nodePort: l.nodePort, ip: vip.address });
        }
      }
    }
    this.#traffic.retain(new Set(services.map((s) => s.plan.service)));
    for (const [key, l] of this.#listeners) {
      if (wanted.has(key)) continue;
      this.#listeners.delete(key);
      // established connections of a removed listener finish on their own
      await closeListening(l, false);
    }
    for (const [key, w] of wanted) {
      const existing = this.#listeners.get(key);
      if (existing) {
        existing.route = w.route;
        existing.nodePort = w.nodePort;
        // UDP flows whose node no longer takes new flows choose again on their next datagram
        existing.relay?.dropFlows((t) => !w.route.backendsByNode.has(t.owner));
        continue;
      }
      try {
        this.#listeners.set(key, await this.#open(key, w.protocol, w.ip, w.route, w.nodePort));
      } catch (e) {
        findings.push(
          finding(
            "listener_bind_failed",
            "error",
            w.route.service,
            w.route.forwarding.listener,
            `${key}: ${(e as Error).message}`,
          ),
        );
      }
    }
    return findings;
  }

  async close(): Promise<void> {
    this.#closed = true;
    const all = [...this.#listeners.values()];
    this.#listeners.clear();
    await this.#tcp.destroyAll();
    await Promise.all(all.map((l) => closeListening(l, true)));
    this.#affinity.clear();
  }

  async #open(
    key: string,
    protocol: "TCP" | "UDP",
    ip: string,
    route: LbRoute,
    nodePort: number,
  ): Promise<Listening> {
    const port = route.forwarding.port;
    if (protocol === "UDP") {
      const entry: Listening = { key, protocol, route, nodePort };
      const relay = new UdpRelay({
        address: ip,
        port,
        idleMs: this.#o.udpIdleMs ?? 30_000,
        now: this.#now,
        choose: (rinfo) => {
          const r = entry.route;
          const client = plainAddress(rinfo.address);
          const base = { service: r.service, listener: r.forwarding.listener, vip: r.vip, client };
          if (!sourceAllowed(r.sourceRanges, client)) {
            this.#o.onEvent?.({ kind: "denied", ...base });
            return undefined;
          }
          const b = chooseNode(
            r,
            this.#client(client, rinfo.port),
            this.#affinity.get(r.service),
            this.#now(),
          );
          const host = b && (r.vip.includes(":") ? b.addresses.IPv6 : b.addresses.IPv4);
          if (!b || !host) {
            this.#o.onEvent?.({ kind: "no_backend", ...base });
            return undefined;
          }
          this.#o.onEvent?.({ kind: "flow", ...base, node: b.node });
          const t = r.traffic.get(b.node);
          if (t) t.connections++;
          return {
            host,
            port: entry.nodePort,
            owner: b.node,
            ...(t && { toBackend: t.toBackend, toClient: t.toClient }),
          };
        },
        ...(this.#o.proxyProtocol
          ? {
              outbound: (rinfo, payload) =>
                Buffer.concat([
                  encodeProxyV2({
                    transport: "UDP",
                    srcAddr: plainAddress(rinfo.address),
                    srcPort: rinfo.port,
                    dstAddr: ip,
                    dstPort: port,
                  }),
                  payload,
                ]),
            }
          : {}),
      });
      await relay.listen();
      return Object.assign(entry, { relay });
    }
    let entry: Listening | undefined;
    const server = await this.#tcp.listen({
      host: ip,
      port,
      closing: () => this.#closed,
      onConnection: (socket) => this.#onTcp(entry!, socket),
    });
    entry = { key, protocol, route, nodePort, server };
    return entry;
  }

  #client(address: string, port: number) {
    const zoneOf = this.#o.clientZone ?? this.#zoneOf;
    return { address, port, zone: zoneOf?.(address) };
  }

  /** A new TCP connection: callbacks rather than async/await, as this runs per connection. */
  #onTcp(entry: Listening, socket: ClientConnection): void {
    const r = entry.route;
    const client = plainAddress(socket.remoteAddress);
    if (!sourceAllowed(r.sourceRanges, client)) {
      this.#event("denied", r, client);
      socket.resetAndDestroy();
      return;
    }
    this.#connect(entry, socket, client, socket.remotePort ?? 0, undefined, 0);
  }

  /** One attempt (of two) to reach a node; a node that does not answer is avoided on the second. */
  #connect(
    entry: Listening,
    socket: ClientConnection,
    client: string,
    clientPort: number,
    avoid: string | undefined,
    attempt: number,
  ): void {
    const r = entry.route;
    const b =
      attempt < 2
        ? chooseNode(r, this.#client(client, clientPort), this.#affinity.get(r.service), this.#now(), avoid)
        : undefined;
    const host = b && (r.vip.includes(":") ? b.addresses.IPv6 : b.addresses.IPv4);
    if (!b || !host) {
      if (!socket.destroyed) {
        this.#event("no_backend", r, client);
        socket.resetAndDestroy();
      }
      return;
    }
    const t = r.traffic.get(b.node);
    const options = {
      connectTimeoutMs: this.#o.connectTimeoutMs ?? 3000,
      header: this.#o.proxyProtocol
        ? encodeProxyV2({
            transport: "TCP",
            srcAddr: client,
            srcPort: clientPort,
            dstAddr: r.vip,
            dstPort: r.forwarding.port,
          })
        : undefined,
      fromClient: t?.toBackend,
      fromTarget: t?.toClient,
    };
    this.#tcp.splice(socket, { host, port: entry.nodePort }, options, (ok) => {
      if (ok) {
        if (t) t.connections++;
        this.#event("connection", r, client, b.node);
        return;
      }
      this.#event("unreachable", r, client, b.node);
      if (this.#closed) socket.destroy();
      else if (!socket.destroyed) this.#connect(entry, socket, client, clientPort, b.node, attempt + 1);
    });
  }

  #event(kind: LbEvent["kind"], r: LbRoute, client: string, node?: string): void {
    const on = this.#o.onEvent;
    if (on === undefined) return;
    const base = { kind, service: r.service, listener: r.forwarding.listener, vip: r.vip, client };
    on(node === undefined ? base : { ...base, node });
  }
}

function finding(
  code: LbFinding["code"],
  severity: LbFinding["severity"],
  service: string,
  listener: string,
  message: string,
): LbFinding {
  return { code, severity, subject: `Service ${service} ${listener}`, message };
}

async function closeListening(l: Listening, wait: boolean): Promise<void> {
  if (l.relay) await l.relay.close();
  const s = l.server;
  if (!s) return;
  const closed = new Promise<void>((resolve) => s.close(() => resolve()));
  if (wait) await closed;
}
