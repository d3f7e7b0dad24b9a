/**
 * Which Services passlb plans: `type: LoadBalancer` with `spec.loadBalancerClass:
 * passlb.io/l4`, with a foreign class passlb was told to accept (`acceptClasses`,
 * `--accept-class`: the class is immutable, so a MetalLB/Cilium/kube-vip/PureLB Service can
 * move only this way — docs/migrate.md "Classes: `--accept-class` and `--default-class`"), or with no class
 * when PasslbConfig says passlb is the default implementation (Kubernetes API: a Service with a class is
 * ignored by every other implementation; one without is the default implementation's). No other
 * class is ever touched.
 */
import type { PasslbConfigSpec, Service } from "../k8s/objects.ts";

export const PASSLB_CLASS = "passlb.io/l4";

/** The foreign classes `--accept-class` is meant for (compat.md §1, §7.1). */
export const FOREIGN_CLASSES: readonly string[] = [
  "io.cilium/l2-announcer",
  "io.cilium/bgp-control-plane",
  "kube-vip.io/kube-vip-class",
  "purelb.io/purelb",
  "purelb.io/purelbv2",
];

export type Ownership = { readonly owned: true } | { readonly owned: false; readonly reason: string };

export function serviceOwnership(svc: Service, config: PasslbConfigSpec): Ownership {
  if (svc.spec.type !== "LoadBalancer") return { owned: false, reason: `type is ${svc.spec.type}` };
  const cls = svc.spec.loadBalancerClass;
  if (cls === PASSLB_CLASS) return { owned: true };
  if (cls !== undefined)
    return config.acceptClasses?.includes(cls)
      ? { owned: true }
      : { owned: false, reason: `loadBalancerClass ${cls} belongs to another implementation` };
  if (config.defaultClass) return { owned: true };
  return {
    owned: false,
    reason: `no loadBalancerClass, and PasslbConfig does not set defaultClass: true (use loadBalancerClass: ${PASSLB_CLASS})`,
  };
}
