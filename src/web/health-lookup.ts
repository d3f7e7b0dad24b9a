/**
 * From the prober's per-(Service, node) verdicts (state-probe-targets.ts `backendHealth`)
 * to the `HealthLookup` the forwarding state and the dashboard read. Pure.
 */
import type { HealthLookup, MemberHealth } from "../forwarding/forwarding-state.ts";
import type { BackendHealth } from "../health/state-probe-targets.ts";

export function healthLookup(verdicts: readonly BackendHealth[]): HealthLookup {
  const byKey = new Map(verdicts.map((v) => [`${v.service}\u0000${v.node}`, v]));
  return (service, checkId, node): MemberHealth => {
    const v = byKey.get(`${service}\u0000${node}`);
    const state = v?.checks[checkId] ?? "unknown";
    return v === undefined ? { state } : { state, weight: v.weight };
  };
}
