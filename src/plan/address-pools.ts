/**
 * Address pools from PasslbConfig as ranges, and the questions IPAM asks of them: which
 * pool holds an address, which pools a Service may draw from, and the n-th address of a
 * pool. Pure. Pool semantics follow MetalLB's IPAddressPool (CIDRs and ranges, autoAssign,
 * avoidBuggyIPs, namespace and Service selectors).
 */
import type { LabelSelector, Pool, Service } from "../k8s/objects.ts";
import {
  cidrRange,
  type IpAddress,
  type IpFamily,
  type IpRange,
  parseCidr,
  parseIp,
  parseIpRange,
} from "../net/ip.ts";

export interface AddressPool {
  readonly name: string;
  readonly autoAssign: boolean;
  readonly ranges: readonly IpRange[];
  readonly pool: Pool;
}

export function addressPools(pools: readonly Pool[]): AddressPool[] {
  return pools.map((pool) => ({
    name: pool.name,
    autoAssign: pool.autoAssign,
    pool,
    ranges: pool.addresses.flatMap((text): IpRange[] => {
      const r = poolAddressRange(text, pool.avoidBuggyIPs);
      return r ? [r] : [];
    }),
  }));
}

/** One `addresses` entry (CIDR, `first-last` range or single address) as a range;
 * undefined when it does not parse. */
export function poolAddressRange(text: string, avoidBuggyIPs = false): IpRange | undefined {
  const t = text.trim();
  if (t.includes("-")) return parseIpRange(t);
  if (t.includes("/")) {
    const c = parseCidr(t);
    if (!c) return undefined;
    const r = cidrRange(c);
    // avoidBuggyIPs: skip the .0 and .255 addresses of IPv4 CIDRs (old CPE drops them)
    if (avoidBuggyIPs && c.family === "IPv4" && c.prefix <= 30)
      return { family: r.family, first: r.first + 1n, last: r.last - 1n };
    return r;
  }
  const ip = parseIp(t);
  return ip ? { family: ip.family, first: ip.value, last: ip.value } : undefined;
}

export function poolContains(pool: AddressPool, ip: IpAddress): boolean {
  return pool.ranges.some((r) => r.family === ip.family && ip.value >= r.first && ip.value <= r.last);
}

function selectorMatches(selector: LabelSelector, labels: Readonly<Record<string, string>>): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, e.key);
    const value = labels[e.key];
    const values = e.values ?? [];
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
    if (e.operator === "In" && (!has || !values.includes(value ?? ""))) return false;
    if (e.operator === "NotIn" && has && values.includes(value ?? "")) return false;
  }
  return true;
}

/** Whether the pool's namespace and Service selectors admit the Service. */
export function poolAdmits(pool: AddressPool, svc: Service): boolean {
  const ns = svc.metadata.namespace ?? "default";
  if (pool.pool.namespaces && pool.pool.namespaces.length > 0 && !pool.pool.namespaces.includes(ns))
    return false;
  if (pool.pool.serviceSelector && !selectorMatches(pool.pool.serviceSelector, svc.metadata.labels ?? {}))
    return false;
  return true;
}

export function poolSize(pool: AddressPool, family: IpFamily): bigint {
  return pool.ranges.filter((r) => r.family === family).reduce((n, r) => n + (r.last - r.first + 1n), 0n);
}
