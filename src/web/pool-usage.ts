/**
 * IP pool usage for the `passlb_ip_pool_addresses{,_used}` gauges: per pool and family, how
 * many addresses the pool's ranges hold (capped at 2^53 − 1 for an IPv6 /64) and how many
 * distinct ones the plans use as VIPs (a shared VIP counts once). Pure.
 */
import type { Pool } from "../k8s/objects.ts";
import type { IpFamily } from "../net/ip.ts";
import { addressPools, poolSize } from "../plan/address-pools.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";

export interface PoolUsage {
  readonly pool: string;
  readonly family: IpFamily;
  readonly size: number;
  readonly used: number;
}

const FAMILIES: readonly IpFamily[] = ["IPv4", "IPv6"];

export function poolUsage(pools: readonly Pool[], plans: readonly LoadBalancerPlan[]): PoolUsage[] {
  const used = new Map<string, Set<string>>();
  for (const plan of plans)
    for (const v of plan.vips) {
      if (v.pool === undefined) continue;
      const key = `${v.pool} ${v.family}`;
      const set = used.get(key) ?? new Set<string>();
      set.add(v.address);
      used.set(key, set);
    }
  const out: PoolUsage[] = [];
  for (const pool of addressPools(pools))
    for (const family of FAMILIES) {
      const size = poolSize(pool, family);
      if (size === 0n) continue;
      const capped = size > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(size);
      out.push({
        pool: pool.name,
        family,
        size: capped,
        used: used.get(`${pool.name} ${family}`)?.size ?? 0,
      });
    }
  return out;
}
