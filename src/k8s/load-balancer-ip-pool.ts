/**
 * LoadBalancerIPPool (`passlb.io/v1alpha1`, cluster-scoped, plural `loadbalancerippools`,
 * short name `lbippool`): the address pools of Kubernetes mode, as a zod schema, and their
 * mapping onto the planner's `Pool` so IPAM (plan/ipam.ts) is the same code in both modes.
 * The CRD YAML in deploy/ is written from exactly this shape.
 *
 * Pool semantics follow MetalLB's IPAddressPool (addresses as CIDRs or `a-b` ranges,
 * autoAssign, namespace and Service selectors). Status totals are decimal strings because an
 * IPv6 pool can hold more than 2^53 addresses. Deliberately not here: deciding the status
 * (controller/pool-status.ts) or reading the objects (the cluster source).
 */
import { z } from "zod";
import { ConditionSchema, LabelSelectorSchema, ObjectMetaSchema, type Pool } from "./objects.ts";

export const POOL_GROUP = "passlb.io";
export const POOL_VERSION = "v1alpha1";
export const POOL_PLURAL = "loadbalancerippools";
export const POOL_KIND = "LoadBalancerIPPool";

const FamilyUsageSchema = z.looseObject({
  /** every address of the family in the pool, as a decimal string */
  total: z.string().regex(/^[0-9]+$/),
  /** distinct addresses held by Services */
  used: z.number().int().min(0),
});

export const PoolConflictSchema = z.looseObject({
  address: z.string(),
  services: z.array(z.string()),
  /** a plan issue code (plan/issue-codes.ts) */
  reason: z.string(),
});
export type PoolConflict = z.infer<typeof PoolConflictSchema>;

export const LoadBalancerIPPoolStatusSchema = z.looseObject({
  ipv4: FamilyUsageSchema.optional(),
  ipv6: FamilyUsageSchema.optional(),
  conflicts: z.array(PoolConflictSchema).optional(),
  conditions: z.array(ConditionSchema).optional(),
});
export type LoadBalancerIPPoolStatus = z.infer<typeof LoadBalancerIPPoolStatusSchema>;

export const LoadBalancerIPPoolSchema = z.looseObject({
  apiVersion: z.literal(`${POOL_GROUP}/${POOL_VERSION}`),
  kind: z.literal(POOL_KIND),
  metadata: ObjectMetaSchema,
  spec: z.looseObject({
    /** CIDRs, `first-last` ranges or single addresses, IPv4 and IPv6 */
    addresses: z.array(z.string()).min(1),
    autoAssign: z.boolean().default(true),
    /** only Services in these namespaces (all when unset or empty) */
    namespaces: z.array(z.string()).optional(),
    serviceSelector: LabelSelectorSchema.optional(),
    /** out of service: no Service keeps or gets an address from it */
    disabled: z.boolean().default(false),
  }),
  status: LoadBalancerIPPoolStatusSchema.optional(),
});
export type LoadBalancerIPPool = z.infer<typeof LoadBalancerIPPoolSchema>;

/** The planner's pool for a LoadBalancerIPPool (named after the object). */
export function poolFromResource(resource: LoadBalancerIPPool): Pool {
  const { spec } = resource;
  return {
    name: resource.metadata.name ?? "",
    addresses: spec.addresses,
    autoAssign: spec.autoAssign,
    avoidBuggyIPs: false,
    ...(spec.namespaces ? { namespaces: spec.namespaces } : {}),
    ...(spec.serviceSelector ? { serviceSelector: spec.serviceSelector } : {}),
  };
}

/** Pools in the order IPAM tries them: oldest first, then by name. */
export function orderPools(pools: readonly LoadBalancerIPPool[]): LoadBalancerIPPool[] {
  return [...pools].sort(
    (a, b) =>
      (a.metadata.creationTimestamp ?? "").localeCompare(b.metadata.creationTimestamp ?? "") ||
      (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""),
  );
}
