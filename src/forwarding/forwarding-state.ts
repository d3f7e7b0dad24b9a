/**
 * What every data plane forwards, from plans and health: per Service and listener, the
 * members that may take new connections now, their weights, and the Maglev tables that
 * pick among them (one for everyone, and one per client zone under zonal affinity). The
 * nftables renderer and the userspace proxy both consume this; neither decides policy.
 *
 * Rules (docs/dataplane-nftables.md "What is in the table"; GCP passthrough NLB behaviour):
 *   - a member serves a listener while the health check gating that listener says healthy
 *     (or has not said anything yet: `unknown` counts as healthy, so a fresh LB forwards at
 *     once and the first failed probes take the node out — except a member whose check
 *     appeared after the LB's first plan, which waits for a verdict: `awaitingVerdict`);
 *   - a check that reads `X-Load-Balancing-Endpoint-Weight` replaces the plan's weight;
 *     weight 0 takes no new connections;
 *   - when no member is healthy, all members serve (GCP's fail-open: better to try than
 *     to drop everything) and the table says so;
 *   - zonal affinity: a client zone with a healthy member gets a table of its own zone's
 *     members; other clients use the table of all healthy members.
 * Pure: health arrives as a lookup function, sizes and the seed as arguments.
 */
import type { HealthCheck, LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { listenerKey } from "../plan/load-balancer-plan.ts";
import { type MaglevInput, type MaglevTable, maglevTable } from "./maglev.ts";
import { maglevSizeFor } from "./maglev-size.ts";

export type HealthState = "healthy" | "unhealthy" | "unknown";

export interface MemberHealth {
  readonly state: HealthState;
  /** unknown, and waiting for a first verdict before it takes connections (a target the
   * prober took on after its first plan: src/health/state-machine.ts) */
  readonly awaitingVerdict?: boolean;
  /** the last weight the check reported, when it reads one */
  readonly weight?: number;
  /** why the member is unhealthy when it is not the check itself: `tunnel_check_failed`
   * (the LB host's tunnel check, health/state-tunnel-targets.ts) */
  readonly reason?: string;
}

/** Health of one node for one of a plan's health checks (by `HealthCheck.id`). */
export type HealthLookup = (service: string, checkId: string, node: string) => MemberHealth;

export const ALL_UNKNOWN: HealthLookup = () => ({ state: "unknown" });

export interface ActiveBackend {
  readonly node: string;
  readonly zone: string;
  readonly addresses: { readonly IPv4?: string; readonly IPv6?: string };
  readonly weight: number;
}

/** Who takes new connections behind one health check: the same for every listener (and
 * every Service) with the same members and the same check. */
export interface BackendSelection {
  /** members taking new connections, sorted by node name */
  readonly backends: readonly ActiveBackend[];
  /** true when no member was healthy and all of them serve */
  readonly failOpen: boolean;
  readonly table: MaglevTable;
  /** zone → table of that zone's healthy members (zonal affinity only) */
  readonly zoneTables: ReadonlyMap<string, MaglevTable>;
  /** a name that stays the same across passes while the members, the address families
   * and the check do, whatever health says (set by lb-forwardings.ts, which shares one
   * selection per such name): the XDP maps keep one ring id per name, so a health flip
   * swaps that ring and rewrites no VIP (lb-host/xdp/xdp-maps.ts) */
  readonly group?: string;
}

export interface ListenerForwarding extends BackendSelection {
  /** `TCP/80` */
  readonly listener: string;
  readonly protocol: "TCP" | "UDP" | "SCTP";
  readonly port: number;
}

export interface ServiceForwarding {
  readonly service: string;
  readonly plan: LoadBalancerPlan;
  readonly listeners: readonly ListenerForwarding[];
}

export interface ForwardingOptions {
  readonly seed: number;
  /** table size for a number of backends; default `maglevSizeFor` */
  readonly sizeFor?: (backends: number) => number;
  /** table builder; default `maglevTable` (a memoising one lets equal inputs share a table) */
  readonly tableFor?: (input: MaglevInput) => MaglevTable;
  /** memo hook: may return an earlier selection for an equal plan membership and check
   * (lb-forwardings.ts shares one among Services on the same nodes); default `compute()` */
  readonly select?: (
    plan: LoadBalancerPlan,
    check: HealthCheck | undefined,
    compute: () => BackendSelection,
  ) => BackendSelection;
}

export function serviceForwarding(
  plan: LoadBalancerPlan,
  health: HealthLookup,
  options: ForwardingOptions,
): ServiceForwarding {
  const sizeFor = options.sizeFor ?? ((n: number) => maglevSizeFor(n));
  const listeners = plan.listeners.map((l): ListenerForwarding => {
    const key = listenerKey(l);
    const check = plan.healthChecks.find((h) => h.listeners.includes(key));
    const compute = () => selectBackends(plan, check, health, options, sizeFor);
    const selection = options.select ? options.select(plan, check, compute) : compute();
    return { listener: key, protocol: l.protocol, port: l.port, ...selection };
  });
  return { service: plan.service, plan, listeners };
}

/** The listeners' gating checks of a plan, in `plan.listeners` order (as serviceForwarding
 * finds them). */
export function listenerChecks(plan: LoadBalancerPlan): (HealthCheck | undefined)[] {
  return plan.listeners.map((l) => {
    const key = listenerKey(l);
    return plan.healthChecks.find((h) => h.listeners.includes(key));
  });
}

/** Who takes new connections behind one check: what serviceForwarding gives each listener
 * gated by `check`. */
export function backendSelection(
  plan: LoadBalancerPlan,
  check: HealthCheck | undefined,
  health: HealthLookup,
  options: ForwardingOptions,
): BackendSelection {
  return selectBackends(plan, check, health, options, options.sizeFor ?? ((n: number) => maglevSizeFor(n)));
}

function selectBackends(
  plan: LoadBalancerPlan,
  check: HealthCheck | undefined,
  health: HealthLookup,
  options: ForwardingOptions,
  sizeFor: (n: number) => number,
): BackendSelection {
  const judged = plan.members.map((m) => {
    const h = check ? health(plan.service, check.id, m.node) : { state: "unknown" as const };
    const weight = check?.readsWeight && h.weight !== undefined ? h.weight : m.weight;
    return { m, ok: h.state !== "unhealthy" && h.awaitingVerdict !== true, weight };
  });
  const healthy = judged.filter((j) => j.ok && j.weight > 0);
  const failOpen = healthy.length === 0 && plan.members.length > 0;
  const chosen = failOpen ? judged.map((j) => ({ ...j, weight: Math.max(1, j.weight) })) : healthy;
  const backends = chosen
    .map(({ m, weight }) => ({ node: m.node, zone: m.zone, addresses: m.addresses, weight }))
    .sort((a, b) => (a.node < b.node ? -1 : a.node > b.node ? 1 : 0));
  const build = (list: readonly ActiveBackend[]) =>
    (options.tableFor ?? maglevTable)({
      backends: list.map((b) => ({ name: b.node, weight: b.weight })),
      size: sizeFor(list.length),
      seed: options.seed,
    });
  const zoneTables = new Map<string, MaglevTable>();
  if (plan.zonalAffinity && !failOpen) {
    const zones = [...new Set(backends.map((b) => b.zone))].filter((z) => z !== "").sort();
    for (const z of zones) zoneTables.set(z, build(backends.filter((b) => b.zone === z)));
  }
  return { backends, failOpen, table: build(backends), zoneTables };
}
