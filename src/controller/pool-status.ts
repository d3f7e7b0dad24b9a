/**
 * LoadBalancerIPPools as IPAM sees them, and the status the controller writes on each:
 *   - order: oldest pool first, then by name (auto-assignment tries pools in this order);
 *   - `disabled: true` takes a pool out of IPAM altogether — its Services are moved to
 *     another pool or lose their address, as when a MetalLB pool is deleted;
 *   - overlapping pools: the later pool gets `passlb.io/Overlapping` True; both stay in
 *     service (IPAM counts an address as used whichever pool it came from, so an overlap
 *     can never give one address to two Services);
 *   - status: per family the total (a decimal string: an IPv6 pool can exceed 2^53) and the
 *     distinct addresses in use, the conflicts, and the conditions (docs/controller.md).
 * Pure: the time is an argument.
 */
import {
  type LoadBalancerIPPool,
  type LoadBalancerIPPoolStatus,
  type PoolConflict,
  poolOf,
} from "../k8s/load-balancer-ip-pool.ts";
import type { Pool, Service } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { formatIp, type IpFamily, type IpRange, parseIp } from "../net/ip.ts";
import { addressPools, poolAddressRange, poolContains, poolSize } from "../plan/address-pools.ts";
import type { VipAssignment } from "../plan/ipam.ts";
import {
  type Condition,
  type DesiredCondition,
  hasCondition,
  POOL_EXHAUSTED_CONDITION,
  POOL_OVERLAP_CONDITION,
  POOL_READY_CONDITION,
  setCondition,
} from "./conditions.ts";

export interface PoolAnalysis {
  readonly resource: LoadBalancerIPPool;
  readonly pool: Pool;
  /** `addresses` entries that do not parse */
  readonly invalid: readonly string[];
  /** earlier pools sharing an address with this one */
  readonly overlaps: readonly string[];
  /** whether IPAM uses it */
  readonly active: boolean;
}

const overlap = (a: IpRange, b: IpRange) => a.family === b.family && a.first <= b.last && b.first <= a.last;

/** `pools` must already be in IPAM order (orderPools). */
export function analysePools(pools: readonly LoadBalancerIPPool[]): PoolAnalysis[] {
  const out: PoolAnalysis[] = [];
  const seen: { name: string; ranges: IpRange[] }[] = [];
  for (const resource of pools) {
    const ranges: IpRange[] = [];
    const invalid: string[] = [];
    for (const text of resource.spec.addresses) {
      const r = poolAddressRange(text);
      if (r) ranges.push(r);
      else invalid.push(text);
    }
    const name = resource.metadata.name ?? "";
    const overlaps = seen
      .filter((s) => s.ranges.some((a) => ranges.some((b) => overlap(a, b))))
      .map((s) => s.name);
    if (!resource.spec.disabled) seen.push({ name, ranges });
    out.push({
      resource,
      pool: poolOf(resource),
      invalid,
      overlaps,
      active: !resource.spec.disabled,
    });
  }
  return out;
}

/**
 * Addresses a Service asks for but was not given because another Service holds them, by
 * pool. Reasons are plan issue codes: `port_clash_on_shared_ip` (same sharing key, clashing
 * ports) or `address_in_use`. An address in a Service's status that another Service keeps
 * is not listed: the Service is moved to a free address in the same pass (an Event says
 * so), so the conflict lasts only until that write.
 */
export function poolConflicts(
  analysis: readonly PoolAnalysis[],
  owned: readonly Service[],
  assignments: ReadonlyMap<string, VipAssignment>,
): Map<string, PoolConflict[]> {
  const pools = addressPools(analysis.filter((a) => a.active).map((a) => a.pool));
  const holders = new Map<string, string[]>();
  for (const [svc, a] of assignments)
    for (const v of a.vips) holders.set(v.address, [...(holders.get(v.address) ?? []), svc]);
  const byKey = new Map(owned.map((s) => [objectKey(s.metadata), s]));
  const found = new Map<string, PoolConflict>();
  const note = (address: string, service: string, reason: string) => {
    const others = holders.get(address)?.filter((h) => h !== service) ?? [];
    const ip = parseIp(address);
    const pool = ip && pools.find((p) => poolContains(p, ip));
    if (others.length === 0 || !pool) return;
    const key = `${pool.name}|${address}|${reason}`;
    const services = new Set([...(found.get(key)?.services ?? []), ...others, service]);
    found.set(key, { address, services: [...services].sort(), reason });
  };
  for (const [name, a] of [...assignments].sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0))) {
    const svc = byKey.get(name);
    if (!svc) continue;
    const granted = new Set(a.vips.map((v) => v.address));
    const key = a.request?.sharing?.id;
    for (const ip of a.request?.addresses ?? []) {
      const address = formatIp(ip);
      if (granted.has(address)) continue;
      const holderKeys = (holders.get(address) ?? []).map((h) => assignments.get(h)?.request?.sharing?.id);
      const sameKey = key !== undefined && holderKeys.every((k) => k === key);
      note(address, name, sameKey ? "port_clash_on_shared_ip" : "address_in_use");
    }
  }
  const out = new Map<string, PoolConflict[]>();
  for (const [key, c] of found) {
    const pool = key.slice(0, key.indexOf("|"));
    out.set(pool, [...(out.get(pool) ?? []), c]);
  }
  for (const list of out.values())
    list.sort((a, b) => a.address.localeCompare(b.address) || a.reason.localeCompare(b.reason));
  return out;
}

const FAMILIES: readonly [IpFamily, "ipv4" | "ipv6"][] = [
  ["IPv4", "ipv4"],
  ["IPv6", "ipv6"],
];

/** The pool conditions (docs/controller.md, "Pool status"). */
export function poolConditions(
  a: PoolAnalysis,
  usage: ReadonlyMap<IpFamily, { total: bigint; used: number }>,
): DesiredCondition[] {
  const generation = a.resource.metadata.generation;
  const g = generation === undefined ? {} : { observedGeneration: generation };
  const ready: DesiredCondition = a.resource.spec.disabled
    ? {
        type: POOL_READY_CONDITION,
        status: "False",
        reason: "Disabled",
        message: "spec.disabled is true: IPAM does not use this pool",
        ...g,
      }
    : a.invalid.length > 0
      ? {
          type: POOL_READY_CONDITION,
          status: "False",
          reason: "InvalidAddresses",
          message: `not an address, CIDR or range: ${a.invalid.join(", ")}`,
          ...g,
        }
      : {
          type: POOL_READY_CONDITION,
          status: "True",
          reason: "Ready",
          message: "IPAM assigns addresses from this pool",
          ...g,
        };
  const overlapping: DesiredCondition =
    a.overlaps.length > 0
      ? {
          type: POOL_OVERLAP_CONDITION,
          status: "True",
          reason: "OverlapsPool",
          message: `shares addresses with the earlier pool(s) ${a.overlaps.join(", ")}`,
          ...g,
        }
      : {
          type: POOL_OVERLAP_CONDITION,
          status: "False",
          reason: "NoOverlap",
          message: "no address is in another pool",
          ...g,
        };
  const full = [...usage].filter(([, u]) => u.total > 0n && BigInt(u.used) >= u.total).map(([f]) => f);
  const exhausted: DesiredCondition =
    full.length > 0
      ? {
          type: POOL_EXHAUSTED_CONDITION,
          status: "True",
          reason: "AllAddressesInUse",
          message: `every ${full.join(" and ")} address is in use`,
          ...g,
        }
      : {
          type: POOL_EXHAUSTED_CONDITION,
          status: "False",
          reason: "AddressesAvailable",
          message: "free addresses remain",
          ...g,
        };
  return [ready, overlapping, exhausted];
}

/** The status a pool should have, and whether it differs from what it has. */
export function desiredPoolStatus(
  a: PoolAnalysis,
  assignments: ReadonlyMap<string, VipAssignment>,
  conflicts: readonly PoolConflict[],
  nowMs: number,
): { status: LoadBalancerIPPoolStatus; changed: boolean } {
  const name = a.resource.metadata.name ?? "";
  const [addressPool] = addressPools([a.pool]);
  const used = new Map<IpFamily, Set<string>>();
  if (a.active)
    for (const asg of assignments.values())
      for (const v of asg.vips)
        if (v.pool === name) used.set(v.family, (used.get(v.family) ?? new Set()).add(v.address));
  const usage = new Map<IpFamily, { total: bigint; used: number }>();
  for (const [family] of FAMILIES) {
    const total = addressPool ? poolSize(addressPool, family) : 0n;
    if (total > 0n) usage.set(family, { total, used: used.get(family)?.size ?? 0 });
  }
  const desired = poolConditions(a, usage);
  const actual = a.resource.status;
  let conditions: Condition[] = [...(actual?.conditions ?? [])];
  for (const d of desired) conditions = setCondition(conditions, d, nowMs);
  const status: LoadBalancerIPPoolStatus = { ...(actual ?? {}), conditions };
  delete status.ipv4;
  delete status.ipv6;
  for (const [family, field] of FAMILIES) {
    const u = usage.get(family);
    if (u) status[field] = { total: u.total.toString(), used: u.used };
  }
  if (conflicts.length > 0) status.conflicts = [...conflicts];
  else delete status.conflicts;
  const changed =
    !desired.every((d) => hasCondition(actual?.conditions, d)) ||
    usageAndConflicts(actual) !== usageAndConflicts(status);
  return { status, changed };
}

/** The non-condition part of a pool status as a canonical string (key order ignored). */
function usageAndConflicts(s: LoadBalancerIPPoolStatus | undefined): string {
  const u = (x: { total: string; used: number } | undefined) => (x ? [x.total, x.used] : null);
  const c = (s?.conflicts ?? []).map((x) => [x.address, x.services, x.reason]);
  return JSON.stringify([u(s?.ipv4), u(s?.ipv6), c]);
}
