/**
 * LoadBalancerIPPool (`passlb.io/v1alpha1`, cluster-scoped, plural `loadbalancerippools`,
 * short name `lbippool`): one address pool per object, with the fields of a PasslbConfig
 * pool (objects.ts PoolSchema; semantics in docs/config.md and plan/address-pools.ts) plus
 * `disabled`, and the status the controller writes (docs/controller.md). In Kubernetes mode
 * the pools come from these objects instead of a PasslbConfig file; the CRD YAML in deploy/
 * is written from this shape.
 *
 * Pool semantics follow MetalLB's IPAddressPool (addresses as CIDRs or `a-b` ranges,
 * autoAssign, avoidBuggyIPs, serviceAllocation as `allocation`), plus what a lossless
 * `passlb import` of Cilium and kube-vip pools needs (docs/migrate.md "`passlb import`"):
 * `reserveFirstLast` and `implicitSharing`. Status totals are decimal strings because an
 * IPv6 pool can hold more than 2^53 addresses. A status that does not decode is dropped,
 * never the pool: a bad status must not take addresses away. Deliberately loose: unknown
 * fields pass through.
 */
import { z } from "zod";
import {
  ConditionSchema,
  LabelSelectorSchema,
  ObjectMetaSchema,
  type Pool,
  PoolAllocationSchema,
} from "./objects.ts";

export const POOL_GROUP = "passlb.io";
export const POOL_VERSION = "v1alpha1";
export const POOL_API_VERSION = `${POOL_GROUP}/${POOL_VERSION}`;
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
  apiVersion: z.literal(POOL_API_VERSION),
  kind: z.literal(POOL_KIND),
  metadata: ObjectMetaSchema.extend({ name: z.string().min(1) }),
  spec: z.looseObject({
    /** CIDRs, `first-last` ranges or single addresses, IPv4 and IPv6 */
    addresses: z.array(z.string()).min(1),
    autoAssign: z.boolean().default(true),
    avoidBuggyIPs: z.boolean().default(false),
    /** only Services in these namespaces (all when unset or empty) */
    namespaces: z.array(z.string()).optional(),
    serviceSelector: LabelSelectorSchema.optional(),
    /** out of service: no Service keeps or gets an address from it */
    disabled: z.boolean().default(false),
    /** skip the first and last address of each CIDR (Cilium `allowFirstLastIPs: No`) */
    reserveFirstLast: z.boolean().optional(),
    /** MetalLB serviceAllocation: priority, namespaces, namespaceSelectors, serviceSelectors */
    allocation: PoolAllocationSchema.optional(),
    /** kube-vip `allow-share`: keyless Services share an IPv4 address on disjoint ports */
    implicitSharing: z.enum(["none", "portDisjoint"]).optional(),
  }),
  status: LoadBalancerIPPoolStatusSchema.optional().catch(undefined),
});
export type LoadBalancerIPPool = z.infer<typeof LoadBalancerIPPoolSchema>;

/** The planner's pool for a LoadBalancerIPPool object (its name is the object's). */
export function poolOf(obj: LoadBalancerIPPool): Pool {
  const { addresses, autoAssign, avoidBuggyIPs, namespaces, serviceSelector } = obj.spec;
  const { reserveFirstLast, allocation, implicitSharing } = obj.spec;
  return {
    name: obj.metadata.name,
    addresses,
    autoAssign,
    avoidBuggyIPs,
    ...(reserveFirstLast !== undefined && { reserveFirstLast }),
    ...(implicitSharing !== undefined && { implicitSharing }),
    ...(namespaces !== undefined && { namespaces }),
    ...(serviceSelector !== undefined && { serviceSelector }),
    ...(allocation !== undefined && { allocation }),
  };
}

/** Pools in the order IPAM tries them: oldest first, then by name. */
export function orderPools(pools: readonly LoadBalancerIPPool[]): LoadBalancerIPPool[] {
  return [...pools].sort(
    (a, b) =>
      (a.metadata.creationTimestamp ?? "").localeCompare(b.metadata.creationTimestamp ?? "") ||
      a.metadata.name.localeCompare(b.metadata.name),
  );
}
