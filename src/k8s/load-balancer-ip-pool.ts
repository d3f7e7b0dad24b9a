/**
 * The LoadBalancerIPPool custom resource (passlb.io/v1alpha1, cluster-scoped): one address
 * pool per object, with the same fields as a PasslbConfig pool (objects.ts PoolSchema;
 * semantics in docs/config.md and plan/address-pools.ts) and a status the controller writes.
 * In Kubernetes mode the pools come from these objects instead of a PasslbConfig file.
 *
 * Deliberately loose: unknown fields pass through, the status is not interpreted here.
 */
import { z } from "zod";
import { LabelSelectorSchema, ObjectMetaSchema, type Pool } from "./objects.ts";

export const POOL_API_VERSION = "passlb.io/v1alpha1";
export const POOL_KIND = "LoadBalancerIPPool";

export const LoadBalancerIPPoolSchema = z.looseObject({
  apiVersion: z.literal(POOL_API_VERSION),
  kind: z.literal(POOL_KIND),
  metadata: ObjectMetaSchema.extend({ name: z.string().min(1) }),
  spec: z.looseObject({
    addresses: z.array(z.string()).min(1),
    autoAssign: z.boolean().default(true),
    avoidBuggyIPs: z.boolean().default(false),
    namespaces: z.array(z.string()).optional(),
    serviceSelector: LabelSelectorSchema.optional(),
  }),
  status: z.looseObject({}).optional(),
});
export type LoadBalancerIPPool = z.infer<typeof LoadBalancerIPPoolSchema>;

/** The planner's pool for a LoadBalancerIPPool object (its name is the object's). */
export function poolOf(obj: LoadBalancerIPPool): Pool {
  const { addresses, autoAssign, avoidBuggyIPs, namespaces, serviceSelector } = obj.spec;
  return {
    name: obj.metadata.name,
    addresses,
    autoAssign,
    avoidBuggyIPs,
    ...(namespaces !== undefined && { namespaces }),
    ...(serviceSelector !== undefined && { serviceSelector }),
  };
}
