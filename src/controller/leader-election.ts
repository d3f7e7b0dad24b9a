/**
 * Leader election over a coordination.k8s.io/v1 Lease, as a pure state machine: given what
 * the elector last saw, the Lease as read now (or its absence) and `now`, decide whether to
 * create, take over, renew or wait, and whether this replica may act as leader.
 *
 * Semantics follow client-go's leaderelection package (tryAcquireOrRenew):
 *   - expiry is judged by the local clock from when this replica last saw the record
 *     change, never from the holder's timestamps (clocks across hosts may differ);
 *   - a holder that let go (empty holderIdentity) can be replaced at once;
 *   - the leader renews every retry period and stops leading when no renewal succeeded
 *     for the renew deadline — before the lease duration runs out for everyone else, so
 *     two replicas never both believe they lead (renewDeadline < leaseDuration);
 *   - a write that loses the race (409) means not leading.
 * Defaults are client-go's: 15 s lease, 10 s renew deadline, 2 s retry period.
 * Deliberately not here: the API calls and timers (lease-elector.ts).
 */

export interface LeaseSpec {
  readonly holderIdentity?: string | null | undefined;
  readonly leaseDurationSeconds?: number | null | undefined;
  readonly acquireTime?: string | null | undefined;
  readonly renewTime?: string | null | undefined;
  readonly leaseTransitions?: number | null | undefined;
}

export interface ElectionConfig {
  readonly identity: string;
  readonly leaseDurationMs: number;
  readonly renewDeadlineMs: number;
  readonly retryPeriodMs: number;
}

export const DEFAULT_ELECTION_TIMING = {
  leaseDurationMs: 15_000,
  renewDeadlineMs: 10_000,
  retryPeriodMs: 2_000,
} as const;

export interface ElectorState {
  /** the record last read, as a comparable string, and when (local clock) it changed */
  readonly observed?: { readonly record: string; readonly atMs: number } | undefined;
  /** when this replica last wrote the lease as holder (acquire or renew) */
  readonly renewedAtMs?: number | undefined;
}

export type LeaseDecision =
  | { readonly action: "create"; readonly spec: LeaseSpec }
  | { readonly action: "update"; readonly spec: LeaseSpec; readonly takeover: boolean }
  | { readonly action: "wait"; readonly holder: string; readonly expiresInMs: number };

/** MicroTime: RFC 3339 with microseconds. */
export function microTime(nowMs: number): string {
  return new Date(nowMs).toISOString().replace(/\.(\d{3})Z$/, ".$1000Z");
}

const recordKey = (s: LeaseSpec | undefined) =>
  JSON.stringify([
    s?.holderIdentity ?? "",
    s?.renewTime ?? "",
    s?.acquireTime ?? "",
    s?.leaseTransitions ?? 0,
  ]);

/** One election step from the Lease as read (undefined: it does not exist). */
export function leaseStep(
  state: ElectorState,
  lease: LeaseSpec | undefined,
  nowMs: number,
  config: ElectionConfig,
): { state: ElectorState; decision: LeaseDecision } {
  const durationSeconds = Math.max(1, Math.ceil(config.leaseDurationMs / 1000));
  const mine = (acquireTime: string, transitions: number): LeaseSpec => ({
    holderIdentity: config.identity,
    leaseDurationSeconds: durationSeconds,
    acquireTime,
    renewTime: microTime(nowMs),
    leaseTransitions: transitions,
  });
  if (lease === undefined)
    return {
      state: { ...state, observed: undefined },
      decision: { action: "create", spec: mine(microTime(nowMs), 0) },
    };

  const key = recordKey(lease);
  const observed = state.observed?.record === key ? state.observed : { record: key, atMs: nowMs };
  const next: ElectorState = { ...state, observed };
  const holder = lease.holderIdentity ?? "";
  const transitions = lease.leaseTransitions ?? 0;
  if (holder === config.identity)
    return {
      state: next,
      decision: {
        action: "update",
        spec: mine(lease.acquireTime ?? microTime(nowMs), transitions),
        takeover: false,
      },
    };
  const leaseMs = (lease.leaseDurationSeconds ?? durationSeconds) * 1000;
  const expiresInMs = observed.atMs + leaseMs - nowMs;
  if (holder !== "" && expiresInMs > 0)
    return { state: { ...next, renewedAtMs: undefined }, decision: { action: "wait", holder, expiresInMs } };
  return {
    state: next,
    decision: { action: "update", spec: mine(microTime(nowMs), transitions + 1), takeover: true },
  };
}

/** After the create/update was sent: success makes (or keeps) this replica the leader;
 * a failure leaves the renewal time alone, so leadership ends at the renew deadline. */
export function afterLeaseWrite(
  state: ElectorState,
  written: LeaseSpec | undefined,
  nowMs: number,
  outcome: "ok" | "conflict" | "error",
): ElectorState {
  if (outcome === "ok") return { observed: { record: recordKey(written), atMs: nowMs }, renewedAtMs: nowMs };
  if (outcome === "conflict") return { ...state, renewedAtMs: undefined };
  return state;
}

/** Whether this replica may write now. */
export function isLeading(state: ElectorState, nowMs: number, config: ElectionConfig): boolean {
  return state.renewedAtMs !== undefined && nowMs - state.renewedAtMs < config.renewDeadlineMs;
}

/** The spec that gives the lease up on shutdown (client-go's ReleaseOnCancel): no holder,
 * a one-second duration, so a follower takes over at its next retry. */
export function releasedLease(lease: LeaseSpec, nowMs: number): LeaseSpec {
  return {
    ...lease,
    holderIdentity: "",
    leaseDurationSeconds: 1,
    renewTime: microTime(nowMs),
  };
}
