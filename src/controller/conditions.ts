/**
 * metav1.Condition handling for the objects the controller writes (Service status,
 * LoadBalancerIPPool status): the condition types and reasons passlb owns, and how one
 * condition is set in a list (Kubernetes API conventions, "Typical status properties":
 * `lastTransitionTime` moves only when `status` changes; reasons are CamelCase).
 * Pure: the time is an argument. docs/controller.md lists every type and reason.
 */
import type { z } from "zod";
import type { ConditionSchema } from "../k8s/objects.ts";

export type Condition = z.infer<typeof ConditionSchema> & { observedGeneration?: number };

export interface DesiredCondition {
  readonly type: string;
  readonly status: "True" | "False" | "Unknown";
  readonly reason: string;
  readonly message: string;
  readonly observedGeneration?: number | undefined;
}

/** The Service condition passlb owns. */
export const SERVICE_READY_CONDITION = "passlb.io/LoadBalancerReady";
/** The LoadBalancerIPPool conditions. */
export const POOL_READY_CONDITION = "passlb.io/PoolReady";
export const POOL_OVERLAP_CONDITION = "passlb.io/Overlapping";
export const POOL_EXHAUSTED_CONDITION = "passlb.io/Exhausted";

/** `pool_exhausted` → `PoolExhausted`: a plan issue code as a condition or Event reason. */
export function reasonFromCode(code: string): string {
  return code
    .split("_")
    .filter(Boolean)
    .map((w) => w[0]!.toUpperCase() + w.slice(1))
    .join("");
}

/** metav1.Time: RFC 3339 to the second. */
export function kubeTime(nowMs: number): string {
  return `${new Date(nowMs).toISOString().slice(0, 19)}Z`;
}

/** Whether the list already holds the condition (ignoring lastTransitionTime). */
export function hasCondition(
  conditions: readonly Condition[] | null | undefined,
  d: DesiredCondition,
): boolean {
  const c = conditions?.find((x) => x.type === d.type);
  return (
    c !== undefined &&
    c.status === d.status &&
    c.reason === d.reason &&
    (c.message ?? "") === d.message &&
    c.observedGeneration === d.observedGeneration
  );
}

/** The list with `d` set: same position when present, appended otherwise; the transition
 * time is kept while the status is unchanged. */
export function setCondition(
  conditions: readonly Condition[] | null | undefined,
  d: DesiredCondition,
  nowMs: number,
): Condition[] {
  const list = [...(conditions ?? [])];
  const at = list.findIndex((x) => x.type === d.type);
  const old = at >= 0 ? list[at] : undefined;
  const next: Condition = {
    type: d.type,
    status: d.status,
    ...(d.observedGeneration === undefined ? {} : { observedGeneration: d.observedGeneration }),
    lastTransitionTime:
      old?.status === d.status && old.lastTransitionTime ? old.lastTransitionTime : kubeTime(nowMs),
    reason: d.reason,
    message: d.message,
  };
  if (at >= 0) list[at] = next;
  else list.push(next);
  return list;
}

export function removeCondition(
  conditions: readonly Condition[] | null | undefined,
  type: string,
): Condition[] {
  return (conditions ?? []).filter((c) => c.type !== type);
}
