/**
 * Address pools as ranges, and the questions IPAM asks of them: which pool holds an
 * address, which pools a Service may draw from and in what order, and how big a pool is.
 * Pure. Pool semantics follow MetalLB's IPAddressPool (CIDRs and ranges, autoAssign,
 * avoidBuggyIPs, serviceAllocation), with Cilium's first/last reservation and kube-vip's
 * implicit sharing for `passlb import` (docs/migrate.md "`passlb import`").
 *
 * Not here: who holds an address (address-ledger.ts) or which address is chosen (ipam.ts).
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
  /** MetalLB serviceAllocation priority: lower first; 0 or unset last */
  readonly priority: number;
  /** keyless Services share IPv4 addresses on disjoint port numbers (kube-vip allow-share) */
  readonly implicitSharing: boolean;
  readonly pool: Pool;
}

/** The labels of a namespace, by name: what namespace selectors are matched against. */
export type NamespaceLabels = (namespace: string) => Readonly<Record<string, string>>;

/** Without Namespace objects only the label the API server sets on every namespace is
 * known (`kubernetes.io/metadata.name`, KEP-2161). */
export const nameOnlyNamespaceLabels: NamespaceLabels = (ns) => ({ "kubernetes.io/metadata.name": ns });

export function addressPools(pools: readonly Pool[]): AddressPool[] {
  return pools.map((pool) => ({
    name: pool.name,
    autoAssign: pool.autoAssign,
    priority: pool.allocation?.priority ?? 0,
    implicitSharing: pool.implicitSharing === "portDisjoint",
    pool,
    ranges: pool.addresses.flatMap((text): IpRange[] => {
      const r = poolAddressRange(text, pool.avoidBuggyIPs, pool.reserveFirstLast);
      return r ? [r] : [];
    }),
  }));
}

/** One `addresses` entry (CIDR, `first-last` range or single address) as a range;
 * undefined when it does not parse. MetalLB allows spaces around the dash of a range. */
export function poolAddressRange(
  text: string,
  avoidBuggyIPs = false,
  reserveFirstLast = false,
): IpRange | undefined {
  const t = text.trim();
  if (t.includes("-")) return parseIpRange(t.replace(/\s*-\s*/, "-"));
  if (t.includes("/")) {
    const c = parseCidr(t);
    if (!c) return undefined;
    const r = cidrRange(c);
    const bits = c.family === "IPv4" ? 32 : 128;
    // Cilium allowFirstLastIPs: No reserves the first and last address of a CIDR, except
    // /31, /32, /127, /128 (operator/pkg/lbipam range_store.go; compat.md §3)
    if (reserveFirstLast && c.prefix < bits - 1)
      return { family: r.family, first: r.first + 1n, last: r.last - 1n };
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

export function selectorMatches(
  selector: LabelSelector,
  labels: Readonly<Record<string, string | undefined>>,
): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const value = labels[e.key];
    const has = value !== undefined;
    const values = e.values ?? [];
    if (e.operator === "Exists" && !has) return false;
    if (e.operator === "DoesNotExist" && has) return false;
    if (e.operator === "In" && (!has || !values.includes(value))) return false;
    if (e.operator === "NotIn" && has && values.includes(value)) return false;
  }
  return true;
}

/** A Service's labels plus Cilium's virtual labels `io.kubernetes.service.{namespace,name}`
 * (Documentation/network/lb-ipam.rst, "Service Selectors"), which pool selectors may use. */
function serviceLabels(svc: Service): Readonly<Record<string, string | undefined>> {
  return {
    ...svc.metadata.labels,
    "io.kubernetes.service.namespace": svc.metadata.namespace ?? "default",
    "io.kubernetes.service.name": svc.metadata.name ?? "",
  };
}

/** Whether the pool's namespaces, serviceSelector and allocation rules admit the Service. */
export function poolAdmits(
  pool: AddressPool,
  svc: Service,
  namespaceLabels: NamespaceLabels = nameOnlyNamespaceLabels,
): boolean {
  const p = pool.pool;
  const ns = svc.metadata.namespace ?? "default";
  if (p.namespaces && p.namespaces.length > 0 && !p.namespaces.includes(ns)) return false;
  if (p.serviceSelector && !selectorMatches(p.serviceSelector, serviceLabels(svc))) return false;
  const a = p.allocation;
  if (!a) return true;
  // MetalLB pinnedPoolsForService / ipaddresspool_types.go: (namespaces ∪ namespaceSelectors)
  // AND any serviceSelector; an empty list does not restrict
  const byName = a.namespaces ?? [];
  const bySelector = a.namespaceSelectors ?? [];
  if (byName.length > 0 || bySelector.length > 0) {
    const labels = bySelector.length > 0 ? namespaceLabels(ns) : {};
    if (!byName.includes(ns) && !bySelector.some((s) => selectorMatches(s, labels))) return false;
  }
  const services = a.serviceSelectors ?? [];
  if (services.length > 0 && !services.some((s) => selectorMatches(s, serviceLabels(svc)))) return false;
  return true;
}

/**
 * The pools a Service may draw from, in the order they are tried (MetalLB allocator.go
 * `Allocate`): first the pools whose `allocation` selects it, by priority (lower first; 0
 * or unset last; ties in pool order, where MetalLB picks at random: passlb stays
 * deterministic), then the pools without `allocation`, in pool order.
 */
export function candidatePools(
  pools: readonly AddressPool[],
  svc: Service,
  namespaceLabels?: NamespaceLabels,
): AddressPool[] {
  const pinned: AddressPool[] = [];
  const general: AddressPool[] = [];
  for (const p of pools) {
    if (!poolAdmits(p, svc, namespaceLabels)) continue;
    (p.pool.allocation ? pinned : general).push(p);
  }
  if (pinned.length === 0) return general;
  const rank = (p: AddressPool) => (p.priority > 0 ? p.priority : Number.MAX_SAFE_INTEGER);
  // Array.prototype.sort is stable: equal ranks keep pool order
  return [...pinned.sort((a, b) => rank(a) - rank(b)), ...general];
}

export function poolSize(pool: AddressPool, family: IpFamily): bigint {
  return pool.ranges.filter((r) => r.family === family).reduce((n, r) => n + (r.last - r.first + 1n), 0n);
}
