/**
 * A LoadBalancerPlan as it is serialised (`passlb plan -o json|yaml`, `kubectl passlb plan`;
 * the schema and its key order are docs/plan.md "JSON and YAML output"): every field of the
 * plan but `members`, which repeats the included part of `backends`. Pure.
 *
 * The view is built field by field, so what the output holds is read here, not inferred
 * from which of the plan's properties happen to be enumerable.
 */
import type { LoadBalancerPlan } from "./load-balancer-plan.ts";

/** A plan as it is serialised: every field but `members`. */
export type LoadBalancerPlanJson = Omit<LoadBalancerPlan, "members">;

export function planJson(plan: LoadBalancerPlan): LoadBalancerPlanJson {
  return {
    service: plan.service,
    uid: plan.uid,
    externalTrafficPolicy: plan.externalTrafficPolicy,
    ipFamilies: plan.ipFamilies,
    vips: plan.vips,
    ...(plan.foreignKeys !== undefined && { foreignKeys: plan.foreignKeys }),
    listeners: plan.listeners,
    backends: plan.backends,
    healthChecks: plan.healthChecks,
    weighted: plan.weighted,
    zonalAffinity: plan.zonalAffinity,
    sessionAffinity: plan.sessionAffinity,
    sourceRanges: plan.sourceRanges,
    ipMode: plan.ipMode,
    issues: plan.issues,
  };
}
