/**
 * The re-probe interval after a failure (HAProxy's `fastinter`: "the interval between
 * checks when the server is transitioning UP or DOWN", HAProxy configuration manual,
 * section 5.2 "fastinter"). Pure.
 *
 * A target that has failed but not yet reached its unhealthy threshold is probed again
 * `fastIntervalMs` after the failed probe ended, and its grid restarts there, instead of
 * waiting out the rest of its interval. With F = interval − timeout − timeout / (threshold − 1)
 * a node that dies just after a passing probe is judged unhealthy within
 *   interval + timeout                   (the next turn, timing out)
 *   + (threshold − 1) × (F + timeout)    (the re-probes)
 *   = interval × threshold,
 * which leaves the extra second (docs/health.md "Detection bound") to the LB host
 * for programming the change. When the timeout is too long for that (F would be negative),
 * F is 0: re-probe as soon as the failure is known, and the bound is
 * interval + threshold × timeout. Only falling targets get it: recovery keeps the interval.
 *
 * Does not: schedule (prober.ts) or judge (state-machine.ts).
 */
import type { Thresholds } from "./state-machine.ts";

export interface ProbeTiming extends Thresholds {
  readonly intervalMs: number;
  readonly timeoutMs: number;
}

export function fastIntervalMs(t: ProbeTiming): number {
  if (t.unhealthyThreshold <= 1) return t.intervalMs; // the first failure decides
  const f = t.intervalMs - t.timeoutMs - t.timeoutMs / (t.unhealthyThreshold - 1);
  return Math.min(t.intervalMs, Math.max(0, Math.floor(f)));
}

/** The longest time from a target's death to its unhealthy verdict, with fastinter. */
export function detectionBoundMs(t: ProbeTiming): number {
  if (t.unhealthyThreshold <= 1) return t.intervalMs + t.timeoutMs;
  return t.intervalMs + t.timeoutMs + (t.unhealthyThreshold - 1) * (fastIntervalMs(t) + t.timeoutMs);
}
