/**
 * passlb's metrics facade: one prom-client Registry per process (no global registry, so
 * tests and several commands in one process do not collide) holding every metric
 * (defined in metric-definitions.ts). Adapters never touch prom-client: they call the
 * typed `Metrics` facade (`metrics.probeResult(node, ok, seconds)`), which keeps the
 * label sets bounded (Service, node, pool, fixed enums — never an address, a port or a
 * client) and turns running totals into counter increments.
 *
 * Not here: deciding what to observe (the adapters and `observeForwarding` do) and HTTP
 * (dashboard-server.ts serves `registry.metrics()`).
 */

import { type Counter, collectDefaultMetrics, Registry } from "prom-client";
import type { AnnouncerStatus } from "../announce/announcer.ts";
import { BGP_PROBLEMS, L2_PROBLEMS } from "../announce/wire-verdict.ts";
import type { RestartReason } from "../cluster/kube-watch.ts";
import type { ServiceForwarding } from "../forwarding/forwarding-state.ts";
import type { MaglevTable } from "../forwarding/maglev.ts";
import { slotsMoved } from "../forwarding/maglev.ts";
import type { TrafficTotals } from "../lb-host/userspace/traffic-counters.ts";
import type { Finding } from "../plan/load-balancer-plan.ts";
import { type BackendState, backendStates } from "./backend-states.ts";
import { type DefinedMetrics, defineMetrics } from "./metric-definitions.ts";

export type ReconcileOutcome = "ok" | "retry" | "reprocess_all" | "failed";
export type NftKind = "full" | "incremental";
export type Direction = "to_backend" | "to_client";

export interface MetricsOptions {
  /** also export Node.js process metrics (process_*, nodejs_*; unprefixed, prom-client defaults) */
  readonly processMetrics?: boolean;
}

/** The typed facade adapters call; owns the registry. */
export class Metrics {
  readonly registry = new Registry();
  readonly #m: DefinedMetrics;
  /** last table per `service listener` for rebuild and slots-moved accounting */
  readonly #tables = new Map<string, MaglevTable>();
  #traffic: (() => readonly TrafficTotals[]) | undefined;

  constructor(options: MetricsOptions = {}) {
    this.#m = defineMetrics(this.registry, () => this.pullTraffic());
    if (options.processMetrics) collectDefaultMetrics({ register: this.registry });
  }

  /** `text/plain; version=0.0.4` exposition */
  text(): Promise<string> {
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  probeResult(node: string, ok: boolean, seconds: number): void {
    const result = ok ? "success" : "failure";
    this.#m.probes.inc({ node, result });
    this.#m.probeSeconds.observe({ result }, seconds);
  }

  healthTransition(node: string, to: string): void {
    this.#m.transitions.inc({ node, to });
  }

  /** `--encap-check`: a routed node address's tunnel check reached a verdict (unknown: series removed) */
  tunnelCheck(node: string, family: string, state: "healthy" | "unhealthy" | "unknown"): void {
    if (state === "unknown") this.#m.tunnelCheck.remove({ node, family });
    else this.#m.tunnelCheck.set({ node, family }, state === "healthy" ? 1 : 0);
  }

  nftTransaction(kind: NftKind, ok: boolean, seconds: number): void {
    this.#m.nftTransactions.inc({ kind, result: ok ? "ok" : "failed" });
    this.#m.nftSeconds.observe({ kind }, seconds);
  }

  programmed(dataplane: string, seconds: number): void {
    this.#m.programming.observe({ dataplane }, seconds);
  }

  connection(service: string, node: string): void {
    this.#m.connections.inc({ service, node });
  }

  bytes(service: string, node: string, direction: Direction, n: number): void {
    if (n > 0) this.#m.bytes.inc({ service, node, direction }, n);
  }

  /** data planes that count in the kernel (nft counters) report totals, not increments */
  connectionTotals(service: string, node: string, total: number): void {
    this.#setCounter(this.#m.connections, { service, node }, total);
  }

  /** kernel per-node counters, as totals (a total that went back restarts from it) */
  nodeTraffic(node: string, packets: number, bytes: number, dataplane = "nftables"): void {
    // the series exist from the first read, at 0 too
    this.#setCounter(this.#m.nodePackets, { node, dataplane }, packets, true);
    this.#setCounter(this.#m.nodeBytes, { node, dataplane }, bytes, true);
  }

  /** a data plane's own flow table (nftables: the TCP flow maps; xdp: the LRU hash): entries and capacity per family */
  flowTable(dataplane: string, family: string, entries: number, capacity: number): void {
    this.#m.flowTableEntries.set({ dataplane, family }, entries);
    this.#m.flowTableCapacity.set({ dataplane, family }, capacity);
  }

  /** the flow table's evictions, as a total */
  flowEvictions(dataplane: string, total: number): void {
    this.#setCounter(this.#m.flowTableEvictions, { dataplane }, total, true);
  }

  /** kernel per-Service counters, as totals */
  serviceTraffic(service: string, packets: number, bytes: number, dataplane = "nftables"): void {
    this.#setCounter(this.#m.servicePackets, { service, dataplane }, packets, true);
    this.#setCounter(this.#m.serviceBytes, { service, dataplane }, bytes, true);
  }

  /** the XDP program's verdict counters, as totals */
  xdpReason(reason: string, packets: number): void {
    this.#setCounter(this.#m.xdpPackets, { reason }, packets, true);
  }

  xdpAttached(iface: string, attached: boolean): void {
    this.#m.xdpAttached.set({ interface: iface }, attached ? 1 : 0);
  }

  byteTotals(service: string, node: string, direction: Direction, total: number): void {
    this.#setCounter(this.#m.bytes, { service, node, direction }, total);
  }

  /**
   * A data plane that keeps its own running totals (the userspace LB's tallies,
   * traffic-counters.ts): read at every scrape of the connection and byte counters, so
   * the proxy's per-connection path never touches prom-client.
   */
  trafficSource(read: () => readonly TrafficTotals[]): void {
    this.#traffic = read;
  }

  /** Takes the source's totals now (a scrape does this too). */
  pullTraffic(): void {
    const read = this.#traffic;
    if (!read) return;
    for (const t of read()) {
      this.connectionTotals(t.service, t.node, t.connections);
      this.byteTotals(t.service, t.node, "to_backend", t.bytesToBackend);
      this.byteTotals(t.service, t.node, "to_client", t.bytesToClient);
    }
  }

  reconcile(controller: string, outcome: ReconcileOutcome): void {
    this.#m.reconciles.inc({ controller, outcome });
  }

  /** a Kubernetes list+watch loop started over: `closed` by the server, `expired` (410 Gone,
   * relisted), after an `error` (backoff), or `continue_expired` (a paged list read again whole) */
  kubeWatchRestart(resource: string, reason: RestartReason): void {
    this.#m.watchRestarts.inc({ resource, reason });
  }

  /** a Kubernetes API request refused (`code`: HTTP status) or unanswered (`unreachable`) */
  kubeApiError(verb: string, resource: string, code: string): void {
    this.#m.kubeApiErrors.inc({ verb, resource, code });
  }

  /** whether a channel of API calls is failing now (kube-api-health.ts) */
  kubeApiFailing(channel: string, failing: boolean): void {
    this.#m.kubeApiFailing.set({ channel }, failing ? 1 : 0);
  }

  ipPool(pool: string, family: string, size: number, used: number): void {
    this.#m.poolSize.set({ pool, family }, size);
    this.#m.poolUsed.set({ pool, family }, used);
  }

  /** the announcement engine's status (announcer.ts, either engine): VIPs per state, engine
   * up; with BIRD also its BGP sessions, their BFD sessions and the speaker's health */
  announce(status: AnnouncerStatus): void {
    const counts = { held: 0, backup: 0, withdrawn: 0 };
    for (const v of status.vips) counts[v.state]++;
    for (const [state, n] of Object.entries(counts))
      this.#m.announceVips.set({ engine: status.engine, state }, n);
    this.#m.announceEngineUp.set({ engine: status.engine }, status.state === "running" ? 1 : 0);
    this.#announceDetail(status);
    if (status.wire) this.#wire(status.engine, status.wire);
    const speaker = status.speaker;
    if (!speaker) return;
    this.#m.bgpSessionUp.reset();
    this.#m.bfdSessionUp.reset();
    for (const s of speaker.sessions) {
      this.#m.bgpSessionUp.set({ peer: s.peer }, s.established ? 1 : 0);
      if (s.bfd !== undefined) this.#m.bfdSessionUp.set({ peer: s.peer }, s.bfd === "Up" ? 1 : 0);
      this.#transition(this.#m.bgpSessionTransitions, `bgp ${s.peer}`, s.peer, s.established);
      if (s.bfd !== undefined)
        this.#transition(this.#m.bfdSessionTransitions, `bfd ${s.peer}`, s.peer, s.bfd === "Up");
    }
    for (const h of ["healthy", "degraded", "down"] as const)
      this.#m.bgpSpeakerState.set({ state: h }, h === speaker.health ? 1 : 0);
  }

  /** per VIP: held here or not (the VIPs of this engine only); keepalived: each instance's state */
  #announceDetail(status: AnnouncerStatus): void {
    const engine = status.engine;
    for (const vip of this.#vipsHeld.get(engine) ?? []) this.#m.announceVipHeld.remove({ engine, vip });
    for (const v of status.vips)
      this.#m.announceVipHeld.set({ engine, vip: v.vip }, v.state === "held" ? 1 : 0);
    this.#vipsHeld.set(
      engine,
      status.vips.map((v) => v.vip),
    );
    if (engine !== "keepalived") return;
    this.#m.vrrpInstanceState.reset();
    for (const g of status.groups)
      for (const state of new Set([...VRRP_STATES, g.state]))
        this.#m.vrrpInstanceState.set({ vrrp_instance: g.name, state }, state === g.state ? 1 : 0);
  }

  /** VIPs with a held series, per engine (a VIP gone from the plan loses its series) */
  readonly #vipsHeld = new Map<string, readonly string[]>();

  /** the data plane repaired drifted kernel state (`what`: table, routes); `n` 0 shows the series at 0 */
  driftRepair(dataplane: string, what: string, n = 1): void {
    this.#m.driftRepairs.inc({ dataplane, what }, n);
  }

  /** the LB host's conntrack table: entries now and the kernel's limit */
  conntrack(entries: number, max: number): void {
    this.#m.conntrackEntries.set(entries);
    this.#m.conntrackMax.set(max);
  }

  /** whether this controller holds the leader Lease (`namespace/name`) */
  leading(lease: string, leading: boolean): void {
    this.#m.controllerLeader.set({ lease }, leading ? 1 : 0);
  }
  /** the wire checks (wire-verdict.ts): every problem kind of every checked VIP, 1 or 0;
   * VIPs no longer checked and speakers gone stay at 0 */
  #wire(engine: AnnouncerStatus["engine"], wire: NonNullable<AnnouncerStatus["wire"]>): void {
    const kinds = engine === "bird" ? BGP_PROBLEMS : L2_PROBLEMS;
    const checked = new Set(wire.vips.map((c) => c.vip));
    for (const vip of this.#wireVips)
      if (!checked.has(vip)) for (const p of kinds) this.#m.wireProblems.set({ vip, problem: p }, 0);
    for (const c of wire.vips)
      for (const p of kinds) this.#m.wireProblems.set({ vip: c.vip, problem: p }, c.problem === p ? 1 : 0);
    this.#wireVips = checked;
    if (!wire.vrrp) return;
    const heard = new Set(wire.vrrp.foreign.map((s) => String(s.vrid)));
    for (const vrid of new Set([...this.#foreignVrids, ...heard]))
      this.#m.vrrpForeignSpeaker.set({ interface: wire.vrrp.interface, vrid }, heard.has(vrid) ? 1 : 0);
    for (const v of heard) this.#foreignVrids.add(v);
  }
  #wireVips = new Set<string>();
  readonly #foreignVrids = new Set<string>();

  /** counts a change of an up/down state against the last one seen (the first sighting is not a change) */
  #transition(c: Counter<"peer" | "to">, key: string, peer: string, up: boolean): void {
    const before = this.#lastUp.get(key);
    this.#lastUp.set(key, up);
    if (before === undefined) {
      // both series from the first sighting on, so `increase()` sees the first flap
      c.inc({ peer, to: "up" }, 0);
      c.inc({ peer, to: "down" }, 0);
      return;
    }
    if (before !== up) c.inc({ peer, to: up ? "up" : "down" });
  }
  readonly #lastUp = new Map<string, boolean>();

  announceTransition(engine: string, state: string): void {
    this.#m.announceTransitions.inc({ engine, state: state.toLowerCase() });
  }

  /** every pool at once (pool-usage.ts); pools that are gone disappear */
  ipPools(usage: readonly { pool: string; family: string; size: number; used: number }[]): void {
    this.#m.poolSize.reset();
    this.#m.poolUsed.reset();
    for (const u of usage) this.ipPool(u.pool, u.family, u.size, u.used);
  }

  /**
   * The gauges that describe what is programmed now, from the forwarding state the data
   * plane just took; counts Maglev rebuilds and the slots they moved against the previous call.
   */
  observeForwarding(forwarding: readonly ServiceForwarding[], extraIssues: readonly Finding[] = []): void {
    const m = this.#m;
    for (const g of [m.vipsProgrammed, m.backends, m.nodeWeight, m.failOpen, m.issues]) g.reset();
    m.servicesProgrammed.set(forwarding.length);
    const families = { IPv4: 0, IPv6: 0 };
    const issues = new Map<string, { code: string; severity: string; n: number }>();
    const seen = new Set<string>();
    for (const fw of forwarding) {
      const service = fw.service;
      for (const v of fw.plan.vips) families[v.family]++;
      const counts: Record<BackendState, number> = { healthy: 0, unhealthy: 0, unknown: 0, excluded: 0 };
      for (const b of backendStates(fw)) {
        counts[b.state]++;
        m.nodeWeight.set({ service, node: b.node }, b.weight);
      }
      for (const [state, n] of Object.entries(counts)) m.backends.set({ service, state }, n);
      m.failOpen.set({ service }, fw.listeners.some((l) => l.failOpen) ? 1 : 0);
      for (const l of fw.listeners) {
        const key = `${service} ${l.listener}`;
        seen.add(key);
        const before = this.#tables.get(key);
        this.#tables.set(key, l.table);
        if (!before || sameTable(before, l.table)) continue;
        m.maglevRebuilds.inc({ service });
        if (before.size === l.table.size) m.slotsMoved.observe(slotsMoved(before, l.table));
      }
      for (const i of fw.plan.issues) countIssue(issues, i);
    }
    for (const i of extraIssues) countIssue(issues, i);
    for (const key of [...this.#tables.keys()]) if (!seen.has(key)) this.#tables.delete(key);
    for (const [family, n] of Object.entries(families)) m.vipsProgrammed.set({ family }, n);
    for (const i of issues.values()) m.issues.set({ code: i.code, severity: i.severity }, i.n);
  }

  /** `zero`: add 0 too, so the series shows before any traffic */
  #setCounter<L extends string>(c: Counter<L>, labels: Record<L, string>, total: number, zero = false): void {
    // prom-client counters only go up; a kernel counter that was reset (table rebuilt) restarts from it
    let totals = this.#totals.get(c);
    if (!totals) {
      totals = new Map();
      this.#totals.set(c, totals);
    }
    const key = Object.values(labels).join("\u0000");
    const last = totals.get(key) ?? 0;
    const delta = total >= last ? total - last : total;
    totals.set(key, total);
    if (delta > 0 || zero) c.inc(labels, delta);
  }

  /** last total read per counter and label values */
  readonly #totals = new Map<Counter<string>, Map<string, number>>();
}

/** keepalived's instance states (keepalived.conf(5) notify scripts: MASTER, BACKUP, FAULT, STOP) */
const VRRP_STATES = ["MASTER", "BACKUP", "FAULT", "STOP"] as const;

function countIssue(into: Map<string, { code: string; severity: string; n: number }>, i: Finding): void {
  const key = `${i.code} ${i.severity}`;
  const e = into.get(key) ?? { code: i.code, severity: i.severity, n: 0 };
  e.n++;
  into.set(key, e);
}

function sameTable(a: MaglevTable, b: MaglevTable): boolean {
  if (a === b) return true;
  if (a.size !== b.size || a.backends.length !== b.backends.length) return false;
  if (a.backends.some((n, i) => n !== b.backends[i])) return false;
  for (let i = 0; i < a.size; i++) if (a.slots[i] !== b.slots[i]) return false;
  return true;
}
