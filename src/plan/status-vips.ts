/**
 * VIPs from `status.loadBalancer.ingress` only: what an LB host uses in Kubernetes mode,
 * where the controller (the one writer of that status) has already run address management
 * and every LB host must program exactly the addresses it published (issue #8 §3).
 *
 * Per family the first ingress `ip` of a family the Service wants (ipFamilies /
 * ipFamilyPolicy, as ipam.ts reads them); hostnames are ignored. The pool is the first
 * configured pool that contains the address, or undefined. Deliberately no requests,
 * no allocation and no conflict checks: deciding those is the controller's job.
 */
import type { Service } from "../k8s/objects.ts";
import { objectKey, type Snapshot } from "../k8s/snapshot.ts";
import { type IpFamily, parseIp } from "../net/ip.ts";
import { type AddressPool, poolContains } from "./address-pools.ts";
import { type VipAssignment, wantedFamilies } from "./ipam.ts";
import type { Vip } from "./load-balancer-plan.ts";
import { serviceOwnership } from "./ownership.ts";

export function statusVips(
  services: readonly Service[],
  pools: readonly AddressPool[],
): Map<string, VipAssignment> {
  const out = new Map<string, VipAssignment>();
  for (const svc of services) {
    const { families } = wantedFamilies(svc);
    const byFamily = new Map<IpFamily, Vip>();
    for (const ing of svc.status?.loadBalancer?.ingress ?? []) {
      const ip = ing.ip ? parseIp(ing.ip) : undefined;
      if (!ip || !families.includes(ip.family) || byFamily.has(ip.family)) continue;
      const pool = pools.find((p) => poolContains(p, ip))?.name;
      byFamily.set(ip.family, { family: ip.family, address: ing.ip ?? "", pool, source: "status" });
    }
    const vips = families.flatMap((f) => {
      const v = byFamily.get(f);
      return v ? [v] : [];
    });
    out.set(objectKey(svc.metadata), { families, vips, issues: [] });
  }
  return out;
}

/** True when the Service's status holds an address statusVips would use. */
export function hasStatusAddress(svc: Service): boolean {
  const { families } = wantedFamilies(svc);
  return (svc.status?.loadBalancer?.ingress ?? []).some((ing) => {
    const ip = ing.ip ? parseIp(ing.ip) : undefined;
    return ip !== undefined && families.includes(ip.family);
  });
}

/**
 * The snapshot an LB host plans in Kubernetes mode: owned Services without a status
 * address are left out (the controller has not assigned one yet, or could not) and named
 * in `waiting`, sorted; everything else is passed through untouched (same arrays when
 * nothing is left out, so the planner's memo holds).
 */
export function withStatusAddresses(snapshot: Snapshot): { snapshot: Snapshot; waiting: string[] } {
  const waiting: string[] = [];
  const kept = snapshot.services.filter((svc) => {
    if (!serviceOwnership(svc, snapshot.config).owned || hasStatusAddress(svc)) return true;
    waiting.push(objectKey(svc.metadata));
    return false;
  });
  if (waiting.length === 0) return { snapshot, waiting };
  return { snapshot: { ...snapshot, services: kept }, waiting: waiting.sort() };
}
