/**
 * Adapter: the one object a passlb command hands its observations to, and the source of
 * its dashboard. It fans each observation out to the three outputs — a metric, a log line
 * with stable `event`/`reason` keys, an entry in the dashboard's recent events — so the
 * data planes and the prober stay unaware of all three. Narrow on purpose:
 *
 *   forwarding(fw, health)   the data plane took this forwarding state (gauges, Maglev rebuilds,
 *                            and a `backend_state` event per node whose state in a Service changed
 *                            — so a health source without transition events still shows them)
 *   proberEvent(e)           a health transition or weight change from prober.ts
 *   probeFinished(node, ok, seconds)
 *   connection(service, node)  one new connection/flow, for a data plane that reports each
 *   traffic(read)            or: a data plane's running totals (the userspace LB's tallies),
 *                            read at each scrape and each `state()`; new connections since the
 *                            last read count towards the recent shares
 *   finding(f)               a finding (plan issue, agent, data plane)
 *   note(event)              anything else worth showing (reload, agent stopped)
 *   kubeApi(report)          Kubernetes mode: the API calls' failing channels, in `state()`
 *                            and `readiness()` (`/readyz`)
 *   announcement(read)       how this host announces its VIPs, read at each state()
 *   fastPathCounters(c)      `--dataplane xdp`: the fast path's counters as just read
 *   state()                  the `/api/v1/state` view (dashboard-state.ts)
 *
 * Bounded: recent connections are counted in one-second buckets over `windowMs`; at most
 * `maxEvents` events are kept. Time comes from the injected `now`.
 */
import type { AnnouncerStatus } from "../announce/announcer.ts";
import type { KubeApiReport } from "../cluster/kube-api-health.ts";
import type { HealthLookup, ServiceForwarding } from "../forwarding/forwarding-state.ts";
import type { ProberEvent } from "../health/prober.ts";
import { TUNNEL_CHECK_FAILED } from "../health/state-tunnel-targets.ts";
import type { DataplaneCounters } from "../lb-host/lb-dataplane.ts";
import type { Forward } from "../lb-host/routing/encap.ts";
import type { TrafficTotals } from "../lb-host/userspace/traffic-counters.ts";
import type { Finding, Severity } from "../plan/load-balancer-plan.ts";
import { type BackendState, backendStates } from "./backend-states.ts";
import { type DashboardEvent, type DashboardState, dashboardState } from "./dashboard-state.ts";
import { type DashboardFastPath, fastPathView } from "./fast-path-view.ts";
import type { Logger } from "./logger.ts";
import type { Metrics } from "./metrics.ts";

export interface ObserverOptions {
  /** `passlb up`, `passlb lb`, `passlb agent` */
  readonly process: string;
  readonly dataplane: string;
  readonly now: () => number;
  readonly metrics: Metrics;
  readonly logger: Logger;
  /** window of the connection shares (default 10 s) */
  readonly windowMs?: number;
  /** events kept for the page (default 50) */
  readonly maxEvents?: number;
}

const STABLE_TRANSITION_REASON = {
  unhealthy: "probe_failures",
  healthy: "probe_successes",
  unknown: "target_reset",
} as const;

/** the tunnel check's transitions (`--encap-check`, health/state-tunnel-targets.ts) */
const TUNNEL_TRANSITION_REASON = {
  unhealthy: TUNNEL_CHECK_FAILED,
  healthy: "tunnel_check_passed",
  unknown: "target_reset",
} as const;

export class Observer {
  readonly #o: ObserverOptions;
  readonly startedAt: number;
  #forwarding: readonly ServiceForwarding[] = [];
  #announce: (() => AnnouncerStatus) | undefined;
  #health: HealthLookup | undefined;
  readonly #events: DashboardEvent[] = [];
  /** `service\0node` → second → count */
  readonly #recent = new Map<string, Map<number, number>>();
  readonly #issues = new Map<string, Finding>();
  /** `service\0node` → state at the last forwarding */
  #states = new Map<string, BackendState>();
  #traffic: (() => readonly TrafficTotals[]) | undefined;
  /** `service\0node` → connections total at the last read (`#lastRead`: when that was) */
  readonly #lastTotals = new Map<string, number>();
  #lastRead = 0;

  constructor(options: ObserverOptions) {
    this.#o = options;
    this.startedAt = options.now();
  }

  get metrics(): Metrics {
    return this.#o.metrics;
  }

  get logger(): Logger {
    return this.#o.logger;
  }

  #forward: Forward | undefined;

  /** An LB host's forwarding mode: the dashboard then shows each node's path. */
  forwardMode(forward: Forward): void {
    this.#forward = forward;
  }

  forwarding(forwarding: readonly ServiceForwarding[], health?: HealthLookup): void {
    this.#forwarding = forwarding;
    this.#health = health;
    this.#o.metrics.observeForwarding(forwarding, [...this.#issues.values()]);
    this.#backendChanges(forwarding, health);
  }

  /** a backend's state in a Service changed since the last forwarding: one event each */
  #backendChanges(forwarding: readonly ServiceForwarding[], health: HealthLookup | undefined): void {
    const next = new Map<string, BackendState>();
    for (const fw of forwarding)
      for (const b of backendStates(fw, health)) {
        const key = `${fw.service}\u0000${b.node}`;
        next.set(key, b.state);
        const before = this.#states.get(key);
        if (before === undefined || before === b.state) continue;
        this.note({
          event: "backend_state",
          reason: b.state,
          severity: b.state === "unhealthy" ? "warning" : "info",
          service: fw.service,
          node: b.node,
          message: `${b.node} in ${fw.service}: ${before} → ${b.state}${b.state === "excluded" ? ` (${b.reason})` : ""}`,
        });
      }
    this.#states = next;
  }

  proberEvent(e: ProberEvent): void {
    const node = e.target.users[0]?.node ?? e.target.address;
    const services = [...new Set(e.target.users.map((u) => u.service))];
    const service = services.length === 1 ? services[0] : undefined;
    if (e.kind === "transition") {
      this.#o.metrics.healthTransition(node, e.to);
      const tunnel = e.target.via === "tunnel";
      if (tunnel) this.#o.metrics.tunnelCheck(node, e.target.family, e.to);
      this.note({
        event: "health_transition",
        reason: tunnel ? TUNNEL_TRANSITION_REASON[e.to] : STABLE_TRANSITION_REASON[e.to],
        severity: e.to === "unhealthy" ? "warning" : "info",
        ...(service !== undefined && { service }),
        node,
        message: `${node} ${e.from} → ${e.to} (${e.target.key}): ${e.reason}`,
      });
    } else {
      this.note({
        event: "weight_change",
        reason: "reported_weight",
        severity: "info",
        ...(service !== undefined && { service }),
        node,
        message: `${node} weight ${e.from ?? "planned"} → ${e.to} (${e.target.key})`,
      });
    }
  }

  probeFinished(node: string, ok: boolean, seconds: number): void {
    this.#o.metrics.probeResult(node, ok, seconds);
  }

  connection(service: string, node: string): void {
    this.#o.metrics.connection(service, node);
    this.#addRecent(`${service}\u0000${node}`, this.#o.now(), 1);
  }

  /** Use a data plane's running totals instead of `connection()` calls (see the header). */
  traffic(read: () => readonly TrafficTotals[]): void {
    this.#traffic = read;
    this.#lastRead = this.#o.now();
    this.#o.metrics.trafficSource(read);
  }

  #addRecent(key: string, now: number, n: number): void {
    const second = Math.floor(now / 1000);
    const buckets = this.#recent.get(key) ?? new Map<number, number>();
    this.#recent.set(key, buckets);
    buckets.set(second, (buckets.get(second) ?? 0) + n);
  }

  /**
   * New connections since the last read go into the current second. When the last read is
   * older than the window, only the window's part of them is counted (spread evenly):
   * the shares between nodes stay right, the count is an estimate.
   */
  #readTraffic(now: number, windowMs: number): void {
    const read = this.#traffic;
    if (!read) return;
    const elapsed = now - this.#lastRead;
    this.#lastRead = now;
    const scale = elapsed > windowMs ? windowMs / elapsed : 1;
    for (const t of read()) {
      const key = `${t.service}\u0000${t.node}`;
      const before = this.#lastTotals.get(key) ?? 0;
      this.#lastTotals.set(key, t.connections);
      const delta = t.connections >= before ? t.connections - before : t.connections;
      if (delta > 0) this.#addRecent(key, now, delta * scale);
    }
  }

  /** A finding stays on the page until `clearFinding(code, subject)` or a new set replaces it. */
  finding(f: Finding, event = "finding"): void {
    const key = `${f.code} ${f.subject}`;
    if (this.#issues.has(key)) return;
    this.#issues.set(key, f);
    this.#o.logger.finding(f, event);
  }

  /** Replaces the standing findings of the process (e.g. after each read of the input). */
  setFindings(findings: readonly Finding[], event = "finding"): void {
    const keep = new Set(findings.map((f) => `${f.code} ${f.subject}`));
    for (const key of [...this.#issues.keys()]) if (!keep.has(key)) this.#issues.delete(key);
    for (const f of findings) this.finding(f, event);
  }

  note(e: Omit<DashboardEvent, "at">): void {
    const entry: DashboardEvent = { ...e, at: this.#o.now() };
    this.#events.push(entry);
    const max = this.#o.maxEvents ?? 50;
    if (this.#events.length > max) this.#events.splice(0, this.#events.length - max);
    const { message, severity, ...fields } = e;
    this.#o.logger.log(LOG_LEVEL[severity], fields, message);
  }

  /** Kubernetes mode: where the API calls' health comes from (web/kube-api-monitor.ts) */
  kubeApi(report: () => KubeApiReport): void {
    this.#kubeApi = report;
  }

  #kubeApi: (() => KubeApiReport) | undefined;

  /** `/readyz`: ready unless a channel of API calls is failing (always ready outside Kubernetes mode) */
  readiness(): KubeApiReport {
    return this.#kubeApi?.() ?? { ready: true, failing: [] };
  }

  #fastPath: DashboardFastPath | undefined;

  /** the fast path's counters (lb-host/fast-path.ts reads them every `--counters-ms`) */
  fastPathCounters(dataplane: string, counters: DataplaneCounters): void {
    this.#fastPath = fastPathView(dataplane, counters, this.#o.now());
  }

  /** VIP announcement: the engine's status, read at each `state()` */
  announcement(status: () => AnnouncerStatus): void {
    this.#announce = status;
  }

  state(): DashboardState {
    const now = this.#o.now();
    const windowMs = this.#o.windowMs ?? 10_000;
    this.#readTraffic(now, windowMs);
    const from = Math.floor((now - windowMs) / 1000);
    const recent = new Map<string, Map<string, number>>();
    for (const [key, buckets] of this.#recent) {
      let n = 0;
      for (const [second, count] of buckets) {
        if (second <= from) buckets.delete(second);
        else n += count;
      }
      if (buckets.size === 0) this.#recent.delete(key);
      if (n === 0) continue;
      const [service, node] = key.split("\u0000") as [string, string];
      const m = recent.get(service) ?? new Map<string, number>();
      recent.set(service, m);
      m.set(node, Math.round(n));
    }
    return dashboardState({
      now,
      startedAt: this.startedAt,
      process: this.#o.process,
      dataplane: this.#o.dataplane,
      forwarding: this.#forwarding,
      ...(this.#health && { health: this.#health }),
      windowSeconds: Math.round(windowMs / 1000),
      recentConnections: recent,
      events: this.#events,
      issues: [...this.#issues.values()],
      ...(this.#kubeApi && { kubeApi: this.#kubeApi() }),
      ...(this.#announce && { announce: this.#announce() }),
      ...(this.#forward && { forward: this.#forward }),
      ...(this.#fastPath && { fastPath: this.#fastPath }),
    });
  }
}

const LOG_LEVEL: Record<Severity, "info" | "warn" | "error"> = {
  info: "info",
  warning: "warn",
  error: "error",
};
