/**
 * Which LB host holds which VIP on a shared L2 segment (docs/vip-announce.md "Election").
 * Rendezvous (highest-random-weight) hashing: every live host scores every VIP with a hash
 * of (host, VIP); the highest score holds it, ties go to the smaller host name. Every host
 * that sees the same live set computes the same owners without talking to anyone, VIPs
 * spread evenly over the hosts, and when a host leaves only its own VIPs move (each to the
 * host that scored second for it); when one joins, it takes only the VIPs it now wins
 * (Thaler & Ravishankar, "Using name-based mappings to increase hit rates", 1998 — the
 * same rule MetalLB's layer-2 mode applies to its speakers, see its layer2 docs).
 *
 * Pure: members and VIPs in, owners out. It does not decide who is live (peer-liveness.ts)
 * and does not touch an address (vip-addresses.ts).
 */

/** VIP → the host that holds it; a VIP is absent when there is no live member. */
export type VipOwners = ReadonlyMap<string, string>;

export function vipOwners(members: Iterable<string>, vips: Iterable<string>): VipOwners {
  const hosts = [...new Set(members)].sort();
  const owners = new Map<string, string>();
  if (hosts.length === 0) return owners;
  for (const vip of new Set(vips)) {
    let best = hosts[0]!;
    let bestScore = score(best, vip);
    for (let i = 1; i < hosts.length; i++) {
      const h = hosts[i]!;
      const s = score(h, vip);
      // hosts are sorted, so a strictly greater score is needed: ties keep the smaller name
      if (s > bestScore) {
        best = h;
        bestScore = s;
      }
    }
    owners.set(vip, best);
  }
  return owners;
}

/**
 * Every member in the order it is preferred for `vip`: the owner first (the same host
 * `vipOwners` names), then the host that takes over when the owner leaves, and so on. The
 * keepalived engine turns this order into VRRP priorities (keepalived-config.ts).
 */
export function vipRanking(members: Iterable<string>, vip: string): string[] {
  const hosts = [...new Set(members)].sort();
  const scores = new Map(hosts.map((h) => [h, score(h, vip)]));
  // stable sort of the sorted names: equal scores keep the smaller name first, as vipOwners
  return hosts.sort((a, b) => scores.get(b)! - scores.get(a)!);
}

/** The VIPs one host must hold. */
export function vipsOf(owners: VipOwners, host: string): string[] {
  return [...owners].filter(([, h]) => h === host).map(([v]) => v);
}

/**
 * A well-mixed 32-bit score of (host, VIP): FNV-1a over the UTF-16 code units of
 * `host \0 vip`, then murmur3's fmix32 finaliser so that similar names (lb-1, lb-2) do not
 * give correlated scores.
 */
export function score(host: string, vip: string): number {
  let h = 0x811c9dc5;
  const text = `${host}\u0000${vip}`;
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
