/**
 * The cluster's LoadBalancerIPPools (src/k8s/load-balancer-ip-pool.ts) as PasslbConfig
 * `spec.pools` entries, in the order IPAM tries them (oldest first, then by name), so
 * `kubectl passlb plan` sends them through the same decoding and validation as `passlb plan
 * -f`. Disabled pools are left out — the controller neither keeps nor assigns their
 * addresses — and named, as are objects that do not decode. Pure.
 */
import {
  type LoadBalancerIPPool,
  LoadBalancerIPPoolSchema,
  orderPools,
  poolOf,
} from "../k8s/load-balancer-ip-pool.ts";
import type { Pool } from "../k8s/objects.ts";

export interface PoolsFromCluster {
  readonly pools: readonly Pool[];
  /** `LoadBalancerIPPool NAME: path: message` for each object left out */
  readonly problems: readonly string[];
  /** names of disabled pools (left out) */
  readonly disabled: readonly string[];
}

/** The items of `kubectl get loadbalancerippools -o json` as planner pools. */
export function poolsFromCluster(items: readonly unknown[]): PoolsFromCluster {
  const decoded: LoadBalancerIPPool[] = [];
  const problems: string[] = [];
  for (const item of items) {
    const parsed = LoadBalancerIPPoolSchema.safeParse(item);
    if (parsed.success) decoded.push(parsed.data);
    else {
      const name = (item as { metadata?: { name?: unknown } } | null)?.metadata?.name;
      for (const issue of parsed.error.issues)
        problems.push(
          `LoadBalancerIPPool ${typeof name === "string" ? name : "<unnamed>"}: ${issue.path.join(".")}: ${issue.message}`,
        );
    }
  }
  const ordered = orderPools(decoded);
  return {
    pools: ordered.filter((p) => !p.spec.disabled).map(poolOf),
    problems,
    disabled: ordered.filter((p) => p.spec.disabled).map((p) => p.metadata.name ?? ""),
  };
}
