/**
 * LoadBalancerIPPool objects (passlb.io/v1alpha1, deploy/crd-loadbalancerippools.yaml) as
 * the planner's pools: the same PasslbConfig `spec.pools` entries `passlb plan -f` reads, so
 * the cluster goes through the same decoding and validation (duplicate names, addresses).
 * Disabled pools are left out: the controller assigns nothing from them, and a Service
 * already holding one of their addresses keeps it as an address no pool holds (planner
 * issue). Pure; reading the objects is the caller's job.
 *
 * Until the controller's own schema lands this holds the minimal one kubectl passlb needs;
 * the CRD's openAPIV3Schema is the authority on the wire.
 */
import { z } from "zod";

const selector = z.looseObject({
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z
    .array(
      z.looseObject({
        key: z.string(),
        operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
        values: z.array(z.string()).optional(),
      }),
    )
    .optional(),
});

export const LoadBalancerIPPoolSchema = z.looseObject({
  apiVersion: z.literal("passlb.io/v1alpha1"),
  kind: z.literal("LoadBalancerIPPool"),
  metadata: z.looseObject({ name: z.string().min(1) }),
  spec: z.looseObject({
    addresses: z.array(z.string().min(1)).min(1),
    autoAssign: z.boolean().default(true),
    namespaces: z.array(z.string()).optional(),
    serviceSelector: selector.optional(),
    disabled: z.boolean().optional(),
  }),
});
export type LoadBalancerIPPool = z.infer<typeof LoadBalancerIPPoolSchema>;

export interface PoolsFromCluster {
  /** PasslbConfig `spec.pools` entries, in name order */
  readonly pools: readonly Record<string, unknown>[];
  /** `LoadBalancerIPPool NAME: path: message` for each object left out */
  readonly problems: readonly string[];
  /** names of disabled pools (left out) */
  readonly disabled: readonly string[];
}

/** The items of `kubectl get loadbalancerippools -o json` as planner pools. */
export function poolsFromCluster(items: readonly unknown[]): PoolsFromCluster {
  const pools: Record<string, unknown>[] = [];
  const problems: string[] = [];
  const disabled: string[] = [];
  for (const item of items) {
    const parsed = LoadBalancerIPPoolSchema.safeParse(item);
    if (!parsed.success) {
      const name = (item as { metadata?: { name?: unknown } } | null)?.metadata?.name;
      for (const issue of parsed.error.issues)
        problems.push(
          `LoadBalancerIPPool ${typeof name === "string" ? name : "<unnamed>"}: ${issue.path.join(".")}: ${issue.message}`,
        );
      continue;
    }
    const { metadata, spec } = parsed.data;
    if (spec.disabled === true) {
      disabled.push(metadata.name);
      continue;
    }
    pools.push({
      name: metadata.name,
      addresses: spec.addresses,
      autoAssign: spec.autoAssign,
      ...(spec.namespaces !== undefined && { namespaces: spec.namespaces }),
      ...(spec.serviceSelector !== undefined && { serviceSelector: spec.serviceSelector }),
    });
  }
  pools.sort((a, b) => String(a.name).localeCompare(String(b.name)));
  return { pools, problems, disabled: disabled.sort() };
}
