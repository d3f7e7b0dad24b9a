/**
 * Which Services passlb plans: `type: LoadBalancer` with `spec.loadBalancerClass:
 * passlb.io/l4`, or with no class when PasslbConfig says passlb is the default
 * implementation (Kubernetes API: a Service with a class is ignored by every other
 * implementation; one without is the default implementation's).
 */
import type { PasslbConfigSpec, Service } from "../k8s/objects.ts";

export const PASSLB_CLASS = "passlb.io/l4";

export type Ownership = { readonly owned: true } | { readonly owned: false; readonly reason: string };

export function serviceOwnership(svc: Service, config: PasslbConfigSpec): Ownership {
  if (svc.spec.type !== "LoadBalancer") return { owned: false, reason: `type is ${svc.spec.type}` };
  const cls = svc.spec.loadBalancerClass;
  if (cls === PASSLB_CLASS) return { owned: true };
  if (cls !== undefined)
    return { owned: false, reason: `loadBalancerClass ${cls} belongs to another implementation` };
  if (config.defaultClass) return { owned: true };
  return {
    owned: false,
    reason: `no loadBalancerClass, and PasslbConfig does not set defaultClass: true (use loadBalancerClass: ${PASSLB_CLASS})`,
  };
}
