/**
 * The writes the controller may make to one Service, and how each applies to an object:
 * used on the object from the snapshot and again on a freshly read one after a 409, so a
 * retried write never undoes someone else's change to fields passlb does not own.
 *
 *   - `add_finalizer` / `remove_finalizer`: `service.kubernetes.io/load-balancer-cleanup`,
 *     the finalizer Kubernetes' service controller uses for the same purpose (KEP-980):
 *     added before an address is assigned, removed once it is released;
 *   - `status`: `status.loadBalancer.ingress` (exactly the given entries) and passlb's
 *     condition (set, or removed when null); other conditions are kept.
 * Pure: the time is an argument.
 */
import type { z } from "zod";
import type { LoadBalancerIngressSchema, Service } from "../k8s/objects.ts";
import {
  type Condition,
  type DesiredCondition,
  hasCondition,
  removeCondition,
  SERVICE_READY_CONDITION,
  setCondition,
} from "./conditions.ts";

export const CLEANUP_FINALIZER = "service.kubernetes.io/load-balancer-cleanup";

export interface IngressEntry {
  readonly ip: string;
  readonly ipMode: "VIP" | "Proxy";
}

export type ServiceWrite =
  | { readonly op: "add_finalizer" }
  | { readonly op: "remove_finalizer" }
  | {
      readonly op: "status";
      readonly ingress: readonly IngressEntry[];
      /** passlb's condition, or null to remove it */
      readonly condition: DesiredCondition | null;
    };

type Ingress = z.infer<typeof LoadBalancerIngressSchema>;

export function hasFinalizer(svc: Service): boolean {
  return (svc.metadata.finalizers ?? []).includes(CLEANUP_FINALIZER);
}

export function sameIngress(
  actual: readonly Ingress[] | null | undefined,
  desired: readonly IngressEntry[],
): boolean {
  const a = actual ?? [];
  return (
    a.length === desired.length &&
    a.every((x, i) => {
      const d = desired[i]!;
      const keys = Object.keys(x).filter((k) => (x as Record<string, unknown>)[k] !== undefined);
      return x.ip === d.ip && x.ipMode === d.ipMode && keys.every((k) => k === "ip" || k === "ipMode");
    })
  );
}

function conditionDone(
  conditions: readonly Condition[] | null | undefined,
  c: DesiredCondition | null,
): boolean {
  if (c === null) return !(conditions ?? []).some((x) => x.type === SERVICE_READY_CONDITION);
  return hasCondition(conditions, c);
}

/** The object with the write applied, or undefined when it already holds. */
export function applyServiceWrite(svc: Service, write: ServiceWrite, nowMs: number): Service | undefined {
  const finalizers = svc.metadata.finalizers ?? [];
  switch (write.op) {
    case "add_finalizer":
      if (finalizers.includes(CLEANUP_FINALIZER)) return undefined;
      return { ...svc, metadata: { ...svc.metadata, finalizers: [...finalizers, CLEANUP_FINALIZER] } };
    case "remove_finalizer":
      if (!finalizers.includes(CLEANUP_FINALIZER)) return undefined;
      return {
        ...svc,
        metadata: { ...svc.metadata, finalizers: finalizers.filter((f) => f !== CLEANUP_FINALIZER) },
      };
    case "status": {
      const status = svc.status ?? {};
      if (
        sameIngress(status.loadBalancer?.ingress, write.ingress) &&
        conditionDone(status.conditions, write.condition)
      )
        return undefined;
      const conditions =
        write.condition === null
          ? removeCondition(status.conditions, SERVICE_READY_CONDITION)
          : setCondition(status.conditions, write.condition, nowMs);
      return {
        ...svc,
        status: {
          ...status,
          loadBalancer: { ...(status.loadBalancer ?? {}), ingress: write.ingress.map((i) => ({ ...i })) },
          conditions,
        },
      };
    }
  }
}
