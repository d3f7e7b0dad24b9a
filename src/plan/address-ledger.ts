/**
 * The ledger of one IPAM pass: which Services hold each address, which addresses Services
 * still show in their status, the allocation cursors per pool and family, and the one
 * question every step asks — may this Service take this address? Pure; made and used
 * within one `assignVips` call.
 *
 * An address another Service still shows in `status.loadBalancer.ingress` is never handed
 * out, whether that Service is passlb's or not: it is free only once that status no longer
 * holds it (compat.md §0.2; the churn of metallb#2723 and cilium#43131).
 */
import { formatIp, type IpAddress, type IpFamily } from "../net/ip.ts";
import type { AddressPool } from "./address-pools.ts";
import type { Vip } from "./load-balancer-plan.ts";
import { type Sharer, type SharingRefusal, sharingRefusal } from "./sharing-rules.ts";

// hex, not decimal: a 128-bit bigint prints in linear time in a power-of-two radix
export const ipKey = (ip: IpAddress) => `${ip.family}|${ip.value.toString(16)}`;

interface Usage {
  readonly holders: Sharer[];
  readonly pool: string;
}

export interface Ledger {
  readonly used: Map<string, Usage>;
  /** address → the first Service (`namespace/name`) showing it in status */
  readonly shown: Map<string, string>;
  /** sharing id → the addresses its Services hold, in the order taken */
  readonly bySharingId: Map<string, IpAddress[]>;
  /** pool name → addresses held by implicit (keyless) sharers of that pool */
  readonly implicitByPool: Map<string, IpAddress[]>;
  readonly cursors: Map<string, { range: number; offset: bigint }>;
}

export function createLedger(): Ledger {
  return {
    used: new Map(),
    shown: new Map(),
    bySharingId: new Map(),
    implicitByPool: new Map(),
    cursors: new Map(),
  };
}

/** Records that `name` shows `ip` in its status (the first to show it is remembered). */
export function noteShown(ledger: Ledger, ip: IpAddress, name: string): void {
  const k = ipKey(ip);
  if (!ledger.shown.has(k)) ledger.shown.set(k, name);
}

/** A Sharer as it would hold an address of `pool`: implicit when keyless in an
 * implicit-sharing pool (IPv4 only, as kube-vip-cloud-provider). */
export function asHolder(s: Sharer, pool: AddressPool, family: IpFamily): Sharer {
  const implicit = s.sharing === undefined && pool.implicitSharing && family === "IPv4";
  return implicit === s.implicit ? s : { ...s, implicit };
}

/** Why the Service may not take the address, or undefined when it may. */
export function blocker(
  ledger: Ledger,
  s: Sharer,
  ip: IpAddress,
  pool: AddressPool | undefined,
): SharingRefusal | undefined {
  const k = ipKey(ip);
  const u = ledger.used.get(k);
  if (!u) {
    const shownBy = ledger.shown.get(k);
    if (shownBy !== undefined && shownBy !== s.name)
      return {
        code: "address_in_use",
        message: `${formatIp(ip)} is still in the status of Service ${shownBy}`,
      };
    return undefined;
  }
  return sharingRefusal(u.holders, pool ? asHolder(s, pool, ip.family) : s, formatIp(ip));
}

/** Gives the address to the Service; the Vip to record. */
export function take(
  ledger: Ledger,
  s: Sharer,
  ip: IpAddress,
  pool: AddressPool,
  source: Vip["source"],
): Vip {
  const k = ipKey(ip);
  const u = ledger.used.get(k);
  const holder = asHolder(s, pool, ip.family);
  if (u) u.holders.push(holder);
  else {
    ledger.used.set(k, { holders: [holder], pool: pool.name });
    if (s.sharing) push(ledger.bySharingId, s.sharing.id, ip);
    else if (holder.implicit) push(ledger.implicitByPool, pool.name, ip);
  }
  return {
    family: ip.family,
    address: formatIp(ip),
    pool: pool.name,
    source: u !== undefined && source === "allocated" ? "shared" : source,
  };
}

function push(map: Map<string, IpAddress[]>, key: string, ip: IpAddress): void {
  const list = map.get(key);
  if (list) list.push(ip);
  else map.set(key, [ip]);
}

/** An address of the Service's sharing key (or its pool's implicit sharing) it may join. */
export function sharedCandidate(
  ledger: Ledger,
  s: Sharer,
  family: IpFamily,
  allowed: readonly AddressPool[],
  contains: (pool: AddressPool, ip: IpAddress) => boolean,
): { ip: IpAddress; pool: AddressPool } | undefined {
  if (s.sharing) {
    for (const ip of ledger.bySharingId.get(s.sharing.id) ?? []) {
      if (ip.family !== family) continue;
      const pool = allowed.find((p) => contains(p, ip));
      if (pool && !blocker(ledger, s, ip, pool)) return { ip, pool };
    }
    return undefined;
  }
  for (const pool of allowed) {
    if (!pool.implicitSharing || family !== "IPv4") continue;
    for (const ip of ledger.implicitByPool.get(pool.name) ?? [])
      if (!blocker(ledger, s, ip, pool)) return { ip, pool };
  }
  return undefined;
}

/** The first address of the pools, in order, that nobody holds or shows in status. */
export function firstFree(
  ledger: Ledger,
  s: Sharer,
  family: IpFamily,
  allowed: readonly AddressPool[],
): { ip: IpAddress; pool: AddressPool } | undefined {
  for (const pool of allowed) {
    const cursorKey = `${pool.name}|${family}`;
    const cursor = ledger.cursors.get(cursorKey) ?? { range: 0, offset: 0n };
    const ranges = pool.ranges.filter((r) => r.family === family);
    for (let r = cursor.range; r < ranges.length; r++) {
      const range = ranges[r]!;
      for (let v = range.first + (r === cursor.range ? cursor.offset : 0n); v <= range.last; v++) {
        const ip = { family, value: v };
        const k = ipKey(ip);
        // an address in some Service's status is kept by adoption or not at all: a status
        // address its own Service did not adopt is one it must leave (ipam.ts)
        if (ledger.used.has(k) || ledger.shown.has(k)) continue;
        ledger.cursors.set(cursorKey, { range: r, offset: v - range.first });
        if (!blocker(ledger, s, ip, pool)) return { ip, pool };
      }
    }
    ledger.cursors.set(cursorKey, { range: ranges.length, offset: 0n });
  }
  return undefined;
}
