/**
 * The Events `passlb controller` records, with stable reasons. Where the meaning is the
 * same, the reason is the one Kubernetes' service controller uses on GKE and elsewhere
 * (k8s.io/cloud-provider controllers/service: EnsuringLoadBalancer, EnsuredLoadBalancer,
 * SyncLoadBalancerFailed, DeletingLoadBalancer, DeletedLoadBalancer); address problems use
 * the plan issue code in CamelCase (`pool_exhausted` → `PoolExhausted`, see
 * plan/issue-codes.ts). Pure data; the adapter turns them into core/v1 Events.
 */
import type { Severity } from "../plan/load-balancer-plan.ts";
import { reasonFromCode } from "./conditions.ts";

export const CONTROLLER_EVENT_REASONS = {
  EnsuringLoadBalancer: ["Normal", "assigning or changing the Service's addresses"],
  EnsuredLoadBalancer: ["Normal", "the Service's addresses are in its status"],
  SyncLoadBalancerFailed: ["Warning", "the Service could not get an address, or a write failed"],
  DeletingLoadBalancer: ["Normal", "releasing the address of a deleted or disowned Service"],
  DeletedLoadBalancer: ["Normal", "the address is released and the finalizer removed"],
} as const satisfies Record<string, readonly ["Normal" | "Warning", string]>;

export type ControllerEventReason = keyof typeof CONTROLLER_EVENT_REASONS;

export interface EventTarget {
  readonly kind: "Service" | "LoadBalancerIPPool";
  readonly apiVersion: string;
  readonly namespace: string | undefined;
  readonly name: string;
  readonly uid: string | undefined;
}

export interface ControllerEvent {
  readonly target: EventTarget;
  readonly type: "Normal" | "Warning";
  /** a CONTROLLER_EVENT_REASONS key, or a plan issue code in CamelCase */
  readonly reason: string;
  readonly message: string;
}

export function controllerEvent(
  target: EventTarget,
  reason: ControllerEventReason,
  message: string,
): ControllerEvent {
  return { target, type: CONTROLLER_EVENT_REASONS[reason][0], reason, message };
}

/** An Event for a plan issue: Warning for errors and warnings, Normal for information. */
export function issueEvent(
  target: EventTarget,
  issue: { code: string; severity: Severity; message: string },
): ControllerEvent {
  return {
    target,
    type: issue.severity === "info" ? "Normal" : "Warning",
    reason: reasonFromCode(issue.code),
    message: issue.message,
  };
}
