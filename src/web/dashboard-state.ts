/**
 * The dashboard's view model: from what a passlb process knows now — forwarding state
 * (plans, active backends, Maglev tables), health, recent connection counts, recent events
 * and findings — to the JSON of `/api/v1/state` (docs/dashboard.md documents it).
 *
 * Per Service: VIPs, listeners (with their gating check, fail-open flag and Maglev strip),
 * issues, and each backend node with zone, state, weight, its share of the recent
 * connections and of the Maglev slots. The strip samples a listener's table at
 * `STRIP_CELLS` evenly spaced slots (tables have thousands of slots; the page draws one
 * cell each) and run-length encodes the owners as indexes into the Service's `nodes`, so
 * one node keeps one colour across listeners and a weight change shows as a wider band.
 *
 * Pure: `now` and every count arrive as data; no clock, no I/O. Not here: collecting the
 * counts (the data planes), serving (dashboard-server.ts), drawing (assets/dashboard.html).
 */
import type { AnnouncerStatus } from "../announce/announcer.ts";
import type { KubeApiReport } from "../cluster/kube-api-health.ts";
import type { HealthLookup, ListenerForwarding, ServiceForwarding } from "../forwarding/forwarding-state.ts";
import { NO_BACKEND, slotShares } from "../forwarding/maglev.ts";
import { type Forward, memberPaths } from "../lb-host/routing/encap.ts";
import type { Finding, Severity } from "../plan/load-balancer-plan.ts";
import { type BackendState, backendStates } from "./backend-states.ts";
import type { DashboardFastPath } from "./fast-path-view.ts";

export const STRIP_CELLS = 256;

/** Something that happened, for the page's event list (and the same fields as the log line). */
export interface DashboardEvent {
  /** ms since the epoch */
  readonly at: number;
  /** stable snake_case: `health_transition`, `weight_change`, `reload`, `agent_stopped`, … */
  readonly event: string;
  readonly reason?: string;
  readonly severity: Severity;
  readonly service?: string;
  readonly node?: string;
  readonly message: string;
}

export interface DashboardInput {
  readonly now: number;
  readonly startedAt: number;
  /** `passlb up`, `passlb lb`, `passlb agent` */
  readonly process: string;
  /** `userspace`, `nftables`, `none` */
  readonly dataplane: string;
  readonly forwarding: readonly ServiceForwarding[];
  /** per-node health; without it the state is inferred from who is active */
  readonly health?: HealthLookup;
  readonly windowSeconds: number;
  /** Service → node → connections (and UDP flows) within the window */
  readonly recentConnections: ReadonlyMap<string, ReadonlyMap<string, number>>;
  /** oldest first */
  readonly events: readonly DashboardEvent[];
  /** findings not tied to a plan (config, data plane, agents) */
  readonly issues: readonly Finding[];
  /** Kubernetes mode: whether the API calls are failing (cluster/kube-api-health.ts) */
  readonly kubeApi?: KubeApiReport;
  /** VIP announcement (`--announce l2` or `bgp`, one shape): which VIPs this host holds, its engine's state */
  readonly announce?: AnnouncerStatus;
  /** an LB host's forwarding mode (issue 21): each node then shows its path */
  readonly forward?: Forward;
  /** `--dataplane xdp`: the fast path's counters as last read (fast-path-view.ts) */
  readonly fastPath?: DashboardFastPath;
}

export interface DashboardNode {
  readonly node: string;
  readonly zone: string;
  readonly state: BackendState;
  /** the plan's reason (`eligible`, `no_local_endpoints`, …), or, when unhealthy for a
   * reason the health source names, that one (`tunnel_check_failed`) */
  readonly reason: string;
  readonly weight: number;
  readonly active: boolean;
  readonly connections: number;
  /** 0..1 of the Service's connections in the window; 0 when there were none */
  readonly connectionShare: number;
  /** 0..1 of the first listener's Maglev slots */
  readonly slotShare: number;
  /** how the LB host reaches the node: `route` or `encap <kind>[:port]` (LB hosts only) */
  readonly path?: string;
}

export interface DashboardListener {
  /** `TCP/80` */
  readonly listener: string;
  readonly name: string;
  readonly protocol: string;
  readonly port: number;
  readonly nodePort: number | null;
  readonly failOpen: boolean;
  readonly activeBackends: number;
  readonly healthCheck: {
    readonly id: string;
    readonly protocol: string;
    readonly port: number;
    readonly path: string | null;
  } | null;
  readonly maglev: {
    readonly size: number;
    readonly cells: number;
    /** [node index into the Service's `nodes` (-1: no backend), run length in cells] */
    readonly strip: readonly (readonly [number, number])[];
    /** per node of the Service (same order), 0..1 of this table's slots */
    readonly slotShares: readonly number[];
    /** zonal affinity: zone → slots of its own table */
    readonly zoneTables: readonly { readonly zone: string; readonly size: number }[];
  };
}

export interface DashboardService {
  readonly service: string;
  readonly policy: "Cluster" | "Local";
  readonly weighted: boolean;
  readonly zonalAffinity: boolean;
  readonly sessionAffinity: string;
  readonly sourceRanges: readonly string[];
  readonly vips: readonly {
    readonly address: string;
    readonly family: string;
    readonly pool: string | null;
    readonly source: string;
  }[];
  readonly listeners: readonly DashboardListener[];
  readonly nodes: readonly DashboardNode[];
  readonly connections: number;
  readonly issues: readonly Finding[];
}

export interface DashboardState {
  readonly apiVersion: "passlb.io/dashboard/v1";
  readonly generatedAt: string;
  readonly uptimeSeconds: number;
  readonly process: string;
  readonly dataplane: string;
  readonly windowSeconds: number;
  readonly summary: {
    readonly services: number;
    readonly vips: number;
    readonly backends: Readonly<Record<BackendState, number>>;
    readonly issues: Readonly<Record<Severity, number>>;
  };
  readonly services: readonly DashboardService[];
  /** newest last */
  readonly events: readonly (Omit<DashboardEvent, "at"> & { readonly at: string })[];
  readonly issues: readonly Finding[];
  /** Kubernetes mode only: the API calls' failing channels (docs/kubernetes.md) */
  readonly kubeApi?: KubeApiReport;
  /** null without announcement (docs/dashboard.md "announce") */
  readonly announce: AnnouncerStatus | null;
  /** null without a fast path, or before its first counter read (docs/dashboard.md "fastPath") */
  readonly fastPath: DashboardFastPath | null;
}

const round = (x: number) => Math.round(x * 10_000) / 10_000;

export function dashboardState(input: DashboardInput): DashboardState {
  const backends: Record<BackendState, number> = { healthy: 0, unhealthy: 0, unknown: 0, excluded: 0 };
  const issues: Record<Severity, number> = { error: 0, warning: 0, info: 0 };
  let vips = 0;
  const services = [...input.forwarding]
    .sort((a, b) => (a.service < b.service ? -1 : a.service > b.service ? 1 : 0))
    .map((fw) => {
      const s = serviceView(fw, input);
      vips += s.vips.length;
      for (const n of s.nodes) backends[n.state]++;
      for (const i of s.issues) issues[i.severity]++;
      return s;
    });
  for (const i of input.issues) issues[i.severity]++;
  return {
    apiVersion: "passlb.io/dashboard/v1",
    generatedAt: new Date(input.now).toISOString(),
    uptimeSeconds: Math.max(0, Math.floor((input.now - input.startedAt) / 1000)),
    process: input.process,
    dataplane: input.dataplane,
    windowSeconds: input.windowSeconds,
    summary: { services: services.length, vips, backends, issues },
    services,
    events: input.events.map((e) => ({ ...e, at: new Date(e.at).toISOString() })),
    issues: [...input.issues],
    ...(input.kubeApi && { kubeApi: input.kubeApi }),
    announce: input.announce ?? null,
    fastPath: input.fastPath ?? null,
  };
}

function serviceView(fw: ServiceForwarding, input: DashboardInput): DashboardService {
  const plan = fw.plan;
  const states = backendStates(fw, input.health);
  const index = new Map(states.map((b, i) => [b.node, i]));
  const counts = input.recentConnections.get(plan.service) ?? new Map<string, number>();
  const total = states.reduce((sum, b) => sum + (counts.get(b.node) ?? 0), 0);
  const listeners = fw.listeners.map((l) => listenerView(fw, l, index));
  const first = listeners[0];
  const paths = input.forward ? memberPaths(input.forward, plan.members) : undefined;
  const nodes = states.map(
    (b, i): DashboardNode => ({
      node: b.node,
      zone: b.zone,
      state: b.state,
      reason: b.healthReason ?? b.reason,
      weight: b.weight,
      active: b.active,
      connections: counts.get(b.node) ?? 0,
      connectionShare: total === 0 ? 0 : round((counts.get(b.node) ?? 0) / total),
      slotShare: first?.maglev.slotShares[i] ?? 0,
      ...(paths?.has(b.node) && { path: paths.get(b.node)! }),
    }),
  );
  return {
    service: plan.service,
    policy: plan.externalTrafficPolicy,
    weighted: plan.weighted,
    zonalAffinity: plan.zonalAffinity,
    sessionAffinity: plan.sessionAffinity.type,
    sourceRanges: plan.sourceRanges,
    vips: plan.vips.map((v) => ({
      address: v.address,
      family: v.family,
      pool: v.pool ?? null,
      source: v.source,
    })),
    listeners,
    nodes,
    connections: total,
    issues: [...plan.issues],
  };
}

function listenerView(
  fw: ServiceForwarding,
  l: ListenerForwarding,
  index: ReadonlyMap<string, number>,
): DashboardListener {
  const planned = fw.plan.listeners.find((p) => p.protocol === l.protocol && p.port === l.port);
  const check = fw.plan.healthChecks.find((h) => h.listeners.includes(l.listener));
  const table = l.table;
  const owner = table.backends.map((name) => index.get(name) ?? -1);
  const cells = Math.min(STRIP_CELLS, table.size);
  const strip: [number, number][] = [];
  for (let c = 0; c < cells; c++) {
    const slot = table.slots[Math.floor((c * table.size) / cells)]!;
    const who = slot === NO_BACKEND ? -1 : (owner[slot] ?? -1);
    const last = strip.at(-1);
    if (last && last[0] === who) last[1]++;
    else strip.push([who, 1]);
  }
  const shares = new Array<number>(index.size).fill(0);
  for (const s of slotShares(table)) {
    const i = index.get(s.name);
    if (i !== undefined) shares[i] = round(s.share);
  }
  return {
    listener: l.listener,
    name: planned?.name ?? "",
    protocol: l.protocol,
    port: l.port,
    nodePort: planned?.nodePort ?? null,
    failOpen: l.failOpen,
    activeBackends: l.backends.length,
    healthCheck: check
      ? { id: check.id, protocol: check.protocol, port: check.port, path: check.path }
      : null,
    maglev: {
      size: table.size,
      cells,
      strip,
      slotShares: shares,
      zoneTables: [...l.zoneTables].map(([zone, t]) => ({ zone, size: t.size })),
    },
  };
}
