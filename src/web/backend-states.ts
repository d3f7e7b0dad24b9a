/**
 * Per Service, each backend node's state as an operator reads it: `excluded` (the plan
 * left it out, with the plan's reason), else the worst health over the checks gating the
 * Service's listeners (`unhealthy` beats `healthy` beats `unknown`), its effective weight
 * (a weight-reading check's last answer, else the plan's; 0 when excluded) and whether it
 * takes new connections on some listener now (fail-open counts).
 *
 * Pure; shared by the metrics gauges and the dashboard view so both say the same thing.
 * Semantics of health and weight are forwarding-state.ts's (docs/dataplane-nftables.md "What is in the table").
 */
import type { HealthLookup, ServiceForwarding } from "../forwarding/forwarding-state.ts";
import type { BackendReason } from "../plan/load-balancer-plan.ts";

export type BackendState = "healthy" | "unhealthy" | "unknown" | "excluded";

export interface BackendStatus {
  readonly node: string;
  readonly zone: string;
  readonly state: BackendState;
  readonly reason: BackendReason;
  /** why it is unhealthy when the health source says (`tunnel_check_failed`) */
  readonly healthReason?: string;
  readonly weight: number;
  readonly active: boolean;
}

/** Without a health lookup, a member is healthy when it is active and not only through fail-open. */
export function backendStates(fw: ServiceForwarding, health?: HealthLookup): BackendStatus[] {
  const plan = fw.plan;
  return plan.backends.map((b): BackendStatus => {
    const base = { node: b.node, zone: b.zone, reason: b.reason };
    if (!b.included) return { ...base, state: "excluded", weight: 0, active: false };
    const activeIn = fw.listeners.flatMap((l) => l.backends.filter((a) => a.node === b.node));
    const active = activeIn.length > 0;
    let state: BackendState = "unknown";
    let weight = activeIn[0]?.weight ?? b.weight;
    let healthReason: string | undefined;
    if (health) {
      for (const check of plan.healthChecks) {
        const h = health(plan.service, check.id, b.node);
        if (h.state === "unhealthy") state = "unhealthy";
        if (h.state === "unhealthy" && h.reason !== undefined) healthReason ??= h.reason;
        else if (h.state === "healthy" && state === "unknown") state = "healthy";
        if (!active && check.readsWeight && h.weight !== undefined) weight = h.weight;
      }
    } else {
      const failOpenOnly = fw.listeners.every(
        (l) => l.failOpen || !l.backends.some((a) => a.node === b.node),
      );
      state = active && !failOpenOnly ? "healthy" : fw.listeners.length > 0 ? "unhealthy" : "unknown";
    }
    return { ...base, state, weight, active, ...(healthReason !== undefined && { healthReason }) };
  });
}
