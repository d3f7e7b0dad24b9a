/**
 * From plans to probes and back, as data.
 *
 * `probeTargets(plans)`: one target per distinct (protocol, address, port, path) over
 * every plan, however many Services and checks share it — the node's `:10256/healthz` is
 * one probe per node for all eTP Cluster Services (ingress-gce pkg/l4/healthchecks). Only included
 * backends are probed, once per address family the plan serves. When checks with
 * different parameters share a target, the strictest win: the shortest interval, timeout
 * and unhealthy threshold, the highest healthy threshold; the timeout never exceeds the
 * interval (Google Cloud requires timeout ≤ interval). The weight is read if any user
 * asks for it.
 *
 * Data-path check (`passlb.io/health-check-data-path: "true"` on the Service): a TCP
 * connect to the node's nodePort of every TCP listener, gating that listener, with the
 * parameters of the check that already gates it. A node whose pod network is dead still
 * answers `/healthz` with 200 (kubernetes/kubernetes#134648); a connect through the
 * nodePort is forwarded to a pod and fails. UDP listeners get none (a connect proves
 * nothing there).
 *
 * `backendHealth(plans, targets, states)`: per (Service, node), whether each listener may
 * take new connections (every check gating it, on every family, admits traffic) and the
 * weight (the last one a weight-reading check returned, else the planned one).
 *
 * Pure. Not here: scheduling and sockets (prober.ts), the state machine (state-machine.ts).
 */
import type { Service } from "../k8s/objects.ts";
import type { IpFamily } from "../net/ip.ts";
import { joinHostPort } from "../net/ip.ts";
import type { HealthCheck, HealthCheckProtocol, LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { listenerKey } from "../plan/load-balancer-plan.ts";
import { admitsTraffic, type HealthState, type TargetHealth } from "./state-machine.ts";

export const DATA_PATH_ANNOTATION = "passlb.io/health-check-data-path";

export interface TargetUser {
  /** `namespace/name` */
  readonly service: string;
  readonly check: string;
  readonly node: string;
}

export interface ProbeTarget {
  /** `HTTP 192.0.2.11:10256/healthz`, `TCP [fd00::1]:30080` */
  readonly key: string;
  readonly protocol: HealthCheckProtocol;
  readonly family: IpFamily;
  readonly address: string;
  readonly port: number;
  readonly path: string | null;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly healthyThreshold: number;
  readonly unhealthyThreshold: number;
  readonly readsWeight: boolean;
  /** sorted by service, check, node */
  readonly users: readonly TargetUser[];
  /** `tunnel`: a TCP connect through the LB host's tunnel to a routed node
   * (state-tunnel-targets.ts); absent: the node's own address, routed as usual */
  readonly via?: "tunnel";
}

export function wantsDataPathCheck(service: Service): boolean {
  return service.metadata.annotations?.[DATA_PATH_ANNOTATION] === "true";
}

/** The TCP checks to nodePorts the data-path annotation adds to a plan. */
export function dataPathChecks(plan: LoadBalancerPlan): HealthCheck[] {
  const out: HealthCheck[] = [];
  for (const l of plan.listeners) {
    if (l.protocol !== "TCP" || l.nodePort === null || l.nodePort === 0) continue;
    const key = listenerKey(l);
    const gate = plan.healthChecks.find((c) => c.listeners.includes(key));
    out.push({
      id: `data-path-${l.protocol}-${l.port}`,
      protocol: "TCP",
      port: l.nodePort,
      path: null,
      intervalSeconds: gate?.intervalSeconds ?? 5,
      timeoutSeconds: gate?.timeoutSeconds ?? 5,
      healthyThreshold: gate?.healthyThreshold ?? 2,
      unhealthyThreshold: gate?.unhealthyThreshold ?? 2,
      listeners: [key],
      readsWeight: false,
      origin: `${DATA_PATH_ANNOTATION}: TCP connect through nodePort ${l.nodePort}`,
    });
  }
  return out;
}

/** the checks a plan's backends are probed with: its own plus the data-path ones */
export function effectiveChecks(plan: LoadBalancerPlan, dataPath: ReadonlySet<string>): HealthCheck[] {
  return dataPath.has(plan.service)
    ? [...plan.healthChecks, ...dataPathChecks(plan)]
    : [...plan.healthChecks];
}

export function targetKey(t: {
  protocol: HealthCheckProtocol;
  address: string;
  port: number;
  path: string | null;
}): string {
  return `${t.protocol} ${joinHostPort(t.address, t.port)}${t.protocol === "TCP" ? "" : (t.path ?? "/")}`;
}

/** the request path a check probes: none for TCP, "/" when an HTTP check names none */
function checkPath(check: HealthCheck): string | null {
  return check.protocol === "TCP" ? null : (check.path ?? "/");
}

function backendAddresses(plan: LoadBalancerPlan, addresses: { IPv4?: string; IPv6?: string }) {
  const families: readonly IpFamily[] = plan.ipFamilies.length > 0 ? plan.ipFamilies : ["IPv4", "IPv6"];
  const out: { family: IpFamily; address: string }[] = [];
  for (const family of families) {
    const address = addresses[family];
    if (address !== undefined) out.push({ family, address });
  }
  return out;
}

export function probeTargets(
  plans: readonly LoadBalancerPlan[],
  dataPath: ReadonlySet<string> = new Set(),
): ProbeTarget[] {
  const byKey = new Map<
    string,
    { -readonly [K in keyof ProbeTarget]: ProbeTarget[K] } & { users: TargetUser[] }
  >();
  for (const plan of plans)
    for (const check of effectiveChecks(plan, dataPath))
      for (const backend of plan.backends) {
        if (!backend.included) continue;
        for (const { family, address } of backendAddresses(plan, backend.addresses)) {
          const path = checkPath(check);
          const key = targetKey({ protocol: check.protocol, address, port: check.port, path });
          const user = { service: plan.service, check: check.id, node: backend.node };
          const intervalMs = check.intervalSeconds * 1000;
          const timeoutMs = Math.min(check.timeoutSeconds * 1000, intervalMs);
          const existing = byKey.get(key);
          if (!existing) {
            byKey.set(key, {
              key,
              protocol: check.protocol,
              family,
              address,
              port: check.port,
              path,
              intervalMs,
              timeoutMs,
              healthyThreshold: check.healthyThreshold,
              unhealthyThreshold: check.unhealthyThreshold,
              readsWeight: check.readsWeight,
              users: [user],
            });
            continue;
          }
          existing.intervalMs = Math.min(existing.intervalMs, intervalMs);
          existing.timeoutMs = Math.min(existing.timeoutMs, timeoutMs, existing.intervalMs);
          existing.healthyThreshold = Math.max(existing.healthyThreshold, check.healthyThreshold);
          existing.unhealthyThreshold = Math.min(existing.unhealthyThreshold, check.unhealthyThreshold);
          existing.readsWeight ||= check.readsWeight;
          existing.users.push(user);
        }
      }
  const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);
  return [...byKey.values()]
    .map((t) => ({
      ...t,
      users: t.users.sort(
        (a, b) => cmp(a.service, b.service) || cmp(a.check, b.check) || cmp(a.node, b.node),
      ),
    }))
    .sort((a, b) => cmp(a.key, b.key));
}

export interface BackendHealth {
  readonly service: string;
  readonly node: string;
  /** per listener key (`TCP/80`): may it take new connections? */
  readonly listeners: Readonly<Record<string, boolean>>;
  /** per check id: the worst state over the node's families */
  readonly checks: Readonly<Record<string, HealthState>>;
  readonly weight: number;
}

const WORSE: Record<HealthState, number> = { healthy: 0, unknown: 1, unhealthy: 2 };

/** Folds target states back onto plans; targets without a state count as unknown. */
export function backendHealth(
  plans: readonly LoadBalancerPlan[],
  states: ReadonlyMap<string, TargetHealth>,
  dataPath: ReadonlySet<string> = new Set(),
): BackendHealth[] {
  const out: BackendHealth[] = [];
  for (const plan of plans) {
    const checks = effectiveChecks(plan, dataPath);
    for (const backend of plan.backends) {
      if (!backend.included) continue;
      const addresses = backendAddresses(plan, backend.addresses);
      const checkStates: Record<string, HealthState> = {};
      const waiting = new Set<string>();
      let weight: number | undefined;
      for (const check of checks) {
        let worst: HealthState = "healthy";
        let seen = false;
        let awaiting = false;
        for (const { address } of addresses) {
          const h = states.get(
            targetKey({ protocol: check.protocol, address, port: check.port, path: checkPath(check) }),
          );
          const state = h?.state ?? "unknown";
          seen = true;
          if (state === "unknown" && h?.admitsBeforeVerdict === false) awaiting = true;
          if (WORSE[state] > WORSE[worst]) worst = state;
          if (check.readsWeight && weight === undefined && h?.weight !== undefined) weight = h.weight;
        }
        checkStates[check.id] = seen ? worst : "unknown";
        if (awaiting) waiting.add(check.id);
      }
      const listeners: Record<string, boolean> = {};
      for (const l of plan.listeners) {
        const key = listenerKey(l);
        listeners[key] = checks
          .filter((c) => c.listeners.includes(key))
          .every((c) => admitsTraffic(checkStates[c.id] ?? "unknown", !waiting.has(c.id)));
      }
      out.push({
        service: plan.service,
        node: backend.node,
        listeners,
        checks: checkStates,
        weight: weight ?? backend.weight,
      });
    }
  }
  return out;
}
