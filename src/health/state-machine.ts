/**
 * The health state of one probe target, as a pure state machine over probe outcomes.
 *
 * States: `unknown` (no verdict yet), `healthy`, `unhealthy`. Passing the threshold of
 * consecutive successes (healthyThreshold) makes a target healthy; the threshold of
 * consecutive failures (unhealthyThreshold) makes it unhealthy; an opposite result resets
 * the streak, so a flapping target keeps its state (hysteresis). These are the
 * thresholds of Google Cloud health checks (ingress-gce pkg/l4/healthchecks) and Azure probes
 * (cloud-provider-azure `pkg/provider/azure_loadbalancer_healthprobe.go`).
 *
 * Decision (docs/health.md): `unknown` admits traffic, like a healthy target, until its
 * first failure streak reaches the unhealthy threshold — for the targets of the prober's
 * first plan (`admitsBeforeVerdict`). A restarted load balancer therefore does not drop
 * every connection while the first probes run; the price is that a backend that is dead
 * from the start gets new connections until its failures reach the threshold (within
 * interval × unhealthyThreshold with the prober's fast re-probe, fast-interval.ts).
 * A target that appears later (a node that gets its first pod of an eTP Local Service, a
 * node added to the cluster) waits for its first verdict instead: its node may not have
 * programmed the Service yet, or its pod may not be ready (issue 16, rolling replacement:
 * 1 % of new connections lost when such a node was admitted at once). Its health server
 * answers 200 only once it has (kube-proxy: 200 iff localEndpoints ≠ 0, after a sync;
 * kubernetes pkg/proxy/healthcheck/service_health.go). The planner already left out nodes that are known to
 * be unfit (deleting, no local endpoints).
 *
 * The weight is the last value an answer carried (X-Load-Balancing-Endpoint-Weight);
 * answers without one keep it. Pure: time is an argument.
 */

export type HealthState = "unknown" | "healthy" | "unhealthy";

export interface ProbeOutcome {
  readonly ok: boolean;
  /** short words: `HTTP 200`, `HTTP 503`, `connection refused`, `timeout after 1000 ms` */
  readonly reason: string;
  /** the weight the answer carried, when it carried a valid one */
  readonly weight?: number | undefined;
}

export interface Thresholds {
  readonly healthyThreshold: number;
  readonly unhealthyThreshold: number;
}

export interface TargetHealth {
  readonly state: HealthState;
  /** consecutive successes (0 after a failure) */
  readonly successes: number;
  /** consecutive failures (0 after a success) */
  readonly failures: number;
  readonly weight: number | undefined;
  /** when the state last changed (or the target was first seen) */
  readonly since: number;
  readonly lastReason: string;
  /** `unknown` admits traffic (a target of the prober's first plan), or waits for a verdict */
  readonly admitsBeforeVerdict: boolean;
}

export interface HealthTransition {
  readonly from: HealthState;
  readonly to: HealthState;
  readonly reason: string;
}

export interface ProbeStep {
  readonly health: TargetHealth;
  readonly transition: HealthTransition | undefined;
  readonly weightChange: { readonly from: number | undefined; readonly to: number } | undefined;
}

export function initialHealth(now: number, admitsBeforeVerdict = true): TargetHealth {
  return {
    state: "unknown",
    successes: 0,
    failures: 0,
    weight: undefined,
    since: now,
    lastReason: "not probed yet",
    admitsBeforeVerdict,
  };
}

/** Does a target in this state receive new connections? (unknown: see above) */
export function admitsTraffic(state: HealthState, admitsBeforeVerdict = true): boolean {
  return state === "healthy" || (state === "unknown" && admitsBeforeVerdict);
}

export function recordProbe(
  health: TargetHealth,
  outcome: ProbeOutcome,
  thresholds: Thresholds,
  now: number,
): ProbeStep {
  const successes = outcome.ok ? health.successes + 1 : 0;
  const failures = outcome.ok ? 0 : health.failures + 1;
  let state = health.state;
  if (outcome.ok && state !== "healthy" && successes >= thresholds.healthyThreshold) state = "healthy";
  if (!outcome.ok && state !== "unhealthy" && failures >= thresholds.unhealthyThreshold) state = "unhealthy";
  const weight = outcome.weight ?? health.weight;
  const transition =
    state === health.state
      ? undefined
      : {
          from: health.state,
          to: state,
          reason: `${outcome.ok ? successes : failures} consecutive ${outcome.ok ? "successes" : "failures"} (threshold ${outcome.ok ? thresholds.healthyThreshold : thresholds.unhealthyThreshold}), last: ${outcome.reason}`,
        };
  return {
    health: {
      state,
      successes,
      failures,
      weight,
      since: transition ? now : health.since,
      lastReason: outcome.reason,
      admitsBeforeVerdict: health.admitsBeforeVerdict,
    },
    transition,
    weightChange:
      weight !== undefined && weight !== health.weight ? { from: health.weight, to: weight } : undefined,
  };
}
