/**
 * A step of a pure planner: the value it decided and what it found on the way. Issues carry
 * no subject; the planner that assembles the steps adds it once (most Services have none).
 */
import type { PlanIssue } from "./load-balancer-plan.ts";

export type StepIssue = Omit<PlanIssue, "subject">;

export interface PlanStep<T> {
  readonly value: T;
  readonly issues: readonly StepIssue[];
}

/** shared by steps that found nothing, so a clean Service allocates no issue arrays */
export const NO_ISSUES: readonly StepIssue[] = Object.freeze([]);

export function step<T>(value: T, issues: readonly StepIssue[] = NO_ISSUES): PlanStep<T> {
  return { value, issues };
}
