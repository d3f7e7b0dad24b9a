/**
 * What one LB host exports to each of its BGP peers, from the LoadBalancerBGPAdvertisements
 * (docs/vip-announce.md "The LoadBalancerBGPAdvertisement object"). Pure: advertisements,
 * pools, this host's Node labels and its sessions in; per session the export rules (rendered
 * into that session's BIRD export filter by bird-config.ts), the aggregation prefixes of the
 * host (`aggregates`: which routes go into the kernel table for a VIP) and a verdict per
 * advertisement out.
 *
 * Semantics are MetalLB's (metallb/metallb speaker/bgp_controller.go SetBalancer,
 * internal/config/config.go bgpAdvertisementFromCR, validateBGPAdvPerPool):
 * - an advertisement applies on this host when its `nodeSelectors` is empty or one matches;
 *   to the pools named or selected (none of either: every pool); to the peers named (none:
 *   every peer of the host);
 * - the announced prefix is the VIP masked to `aggregationLength` (IPv4, default 32) or
 *   `aggregationLengthV6` (default 128); a pool CIDR more specific than that length is
 *   refused (the aggregate would cover addresses of no pool);
 * - communities add up over every advertisement matching a route (FRR `additive`);
 *   two advertisements giving one route different localPref values is refused for the later
 *   one by name (MetalLB BGPAdvertisementsHaveCompatibleLocalPref);
 * - LOCAL_PREF is sent to internal peers only (RFC 4271 §5.1.5): not rendered for eBGP.
 * Without any advertisement object, the implicit one of earlier passlb versions applies:
 * every pool, host routes only, every peer.
 *
 * The filters depend on pools and advertisements only, never on which VIPs exist, so a VIP
 * coming or going changes the kernel table alone: no `birdc configure` at all. An aggregate
 * is in the kernel table exactly while at least one of its VIPs is ready on this host (the
 * announcer's `routesFor`), so it is withdrawn with the last one.
 */
import type { LoadBalancerBGPAdvertisement } from "../../k8s/load-balancer-bgp-advertisement.ts";
import { BGP_ADVERTISEMENT_KIND, communityValue } from "../../k8s/load-balancer-bgp-advertisement.ts";
import type { LabelSelector } from "../../k8s/objects.ts";
import { type Cidr, cidrContains, formatCidr, formatIp, type IpRange, parseIp } from "../../net/ip.ts";
import { poolAddressRange, selectorMatches } from "../../plan/address-pools.ts";
import type { ExportRule, IpFamily } from "./bgp-types.ts";

export interface AdvertisedPool {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly addresses: readonly string[];
}

export interface AdvertisedSession {
  /** LoadBalancerBGPPeer name */
  readonly name: string;
  readonly families: readonly IpFamily[];
  readonly internal: boolean;
}

/** One (pool CIDR, length) pair in force on this host: a VIP inside `cidr` is announced as its `length` mask. */
export interface Aggregate {
  readonly cidr: Cidr;
  readonly length: number;
}

export interface AdvertisementVerdict {
  readonly name: string;
  readonly accepted: boolean;
  /** why refused, or what was not applied */
  readonly messages: readonly string[];
}

export interface HostExports {
  readonly bySession: ReadonlyMap<string, Partial<Record<IpFamily, ExportRule[]>>>;
  readonly aggregates: readonly Aggregate[];
  readonly verdicts: readonly AdvertisementVerdict[];
}

const ANY: Record<IpFamily, Cidr> = {
  IPv4: { family: "IPv4", base: 0n, prefix: 0 },
  IPv6: { family: "IPv6", base: 0n, prefix: 0 },
};
const BITS: Record<IpFamily, number> = { IPv4: 32, IPv6: 128 };

/** The smallest list of CIDRs covering a range exactly (MetalLB's cidrsPerAddresses does the same). */
export function rangeCidrs(r: IpRange): Cidr[] {
  const bits = BITS[r.family];
  const out: Cidr[] = [];
  let first = r.first;
  while (first <= r.last) {
    let size = 0;
    while (size < bits) {
      const next = 1n << BigInt(size + 1);
      if (first % next !== 0n || first + next - 1n > r.last) break;
      size++;
    }
    out.push({ family: r.family, base: first, prefix: bits - size });
    first += 1n << BigInt(size);
  }
  return out;
}

function poolCidrs(pool: AdvertisedPool): Cidr[] {
  return pool.addresses.flatMap((a) => {
    const r = poolAddressRange(a);
    return r ? rangeCidrs(r) : [];
  });
}

const matchesAny = (
  selectors: readonly LabelSelector[] | undefined,
  labels: Readonly<Record<string, string>>,
) => (selectors ?? []).some((s) => selectorMatches(s, labels));

export function hostExports(input: {
  readonly advertisements: readonly LoadBalancerBGPAdvertisement[];
  readonly pools: readonly AdvertisedPool[];
  /** undefined: this host has no Node, so only advertisements without nodeSelectors apply */
  readonly labels: Readonly<Record<string, string>> | undefined;
  readonly sessions: readonly AdvertisedSession[];
}): HostExports {
  const bySession = new Map<string, Partial<Record<IpFamily, ExportRule[]>>>();
  for (const s of input.sessions) bySession.set(s.name, {});
  const aggregates: Aggregate[] = [];
  const verdicts: AdvertisementVerdict[] = [];
  const ads = [...input.advertisements].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  if (ads.length === 0) {
    for (const s of input.sessions)
      for (const f of s.families)
        bySession.get(s.name)![f] = [
          { from: "implicit", prefixes: [`${formatCidr(ANY[f])}{${BITS[f]},${BITS[f]}}`], communities: [] },
        ];
    for (const f of ["IPv4", "IPv6"] as const) aggregates.push({ cidr: ANY[f], length: BITS[f] });
    return { bySession, aggregates, verdicts };
  }
  const prefs: {
    session: string;
    family: IpFamily;
    length: number;
    cidr: string;
    value: number;
    from: string;
  }[] = [];
  for (const ad of ads) {
    const verdict = applyAdvertisement(ad, input, bySession, aggregates, prefs);
    verdicts.push(verdict);
  }
  return { bySession, aggregates, verdicts };
}

function applyAdvertisement(
  ad: LoadBalancerBGPAdvertisement,
  input: Parameters<typeof hostExports>[0],
  bySession: Map<string, Partial<Record<IpFamily, ExportRule[]>>>,
  aggregates: Aggregate[],
  prefs: { session: string; family: IpFamily; length: number; cidr: string; value: number; from: string }[],
): AdvertisementVerdict {
  const s = ad.spec;
  const name = ad.metadata.name;
  const from = `${BGP_ADVERTISEMENT_KIND} ${name}`;
  const messages: string[] = [];
  if ((s.nodeSelectors ?? []).length > 0 && !(input.labels && matchesAny(s.nodeSelectors, input.labels)))
    return { name, accepted: true, messages: ["spec.nodeSelectors: this host is not selected"] };
  const allPools = (s.ipAddressPools ?? []).length === 0 && (s.ipAddressPoolSelectors ?? []).length === 0;
  for (const p of s.ipAddressPools ?? [])
    if (!input.pools.some((x) => x.name === p))
      messages.push(`spec.ipAddressPools: no LoadBalancerIPPool ${p}`);
  const pools = allPools
    ? undefined
    : input.pools.filter(
        (p) => (s.ipAddressPools ?? []).includes(p.name) || matchesAny(s.ipAddressPoolSelectors, p.labels),
      );
  const cidrs: Cidr[] = pools === undefined ? [ANY.IPv4, ANY.IPv6] : pools.flatMap(poolCidrs);
  const length = (f: IpFamily) =>
    f === "IPv4" ? (s.aggregationLength ?? 32) : (s.aggregationLengthV6 ?? 128);
  for (const c of cidrs)
    if (c.prefix > length(c.family))
      return {
        name,
        accepted: false,
        messages: [
          `spec.${c.family === "IPv4" ? "aggregationLength" : "aggregationLengthV6"} ${length(c.family)}: pool prefix ${formatCidr(c)} is more specific, so the aggregate would cover addresses of no pool (MetalLB refuses it too)`,
        ],
      };
  const peers = s.peers ?? [];
  for (const p of peers)
    if (!input.sessions.some((x) => x.name === p))
      messages.push(`spec.peers: ${p} has no session on this host`);
  const communities = (s.communities ?? []).map((c) => communityValue(c)!);
  const localPref = s.localPref !== undefined && s.localPref > 0 ? s.localPref : undefined;
  for (const c of cidrs) aggregates.push({ cidr: c, length: length(c.family) });
  for (const session of input.sessions) {
    if (peers.length > 0 && !peers.includes(session.name)) continue;
    for (const family of session.families) {
      const mine = cidrs.filter((c) => c.family === family);
      if (mine.length === 0) continue;
      const len = length(family);
      let pref = localPref;
      if (pref !== undefined && !session.internal) {
        messages.push(
          `spec.localPref ${pref}: not sent to ${session.name}, an external peer (RFC 4271 §5.1.5)`,
        );
        pref = undefined;
      }
      if (pref !== undefined) {
        const clash = prefs.find(
          (x) =>
            x.session === session.name &&
            x.family === family &&
            x.length === len &&
            x.value !== pref &&
            mine.some((c) => formatCidr(c) === x.cidr || x.cidr.endsWith("/0")),
        );
        if (clash) {
          messages.push(
            `spec.localPref ${pref}: ${clash.from} already gives ${clash.value} to these routes toward ${session.name}; not applied`,
          );
          pref = undefined;
        } else
          for (const c of mine)
            prefs.push({
              session: session.name,
              family,
              length: len,
              cidr: formatCidr(c),
              value: pref,
              from,
            });
      }
      const rules = bySession.get(session.name)!;
      const list = rules[family] ?? [];
      rules[family] = list;
      list.push({
        from,
        prefixes: mine.map((c) => `${formatCidr(c)}{${len},${len}}`),
        communities,
        ...(pref !== undefined && { localPref: pref }),
      });
    }
  }
  return { name, accepted: true, messages };
}

/** The kernel-table routes of a VIP on this host: its host route and every aggregate of it, as
 * route keys (`ADDR` for a host route, `ADDR/LEN` otherwise; kernel-vip-routes.ts). */
export function routesFor(vip: string, aggregates: readonly Aggregate[]): string[] {
  const ip = parseIp(vip);
  if (!ip) return [vip];
  // the host route is always in the table (the announcer's "announced" needs it); the
  // export filters decide whether any peer is told of it
  const out = new Set<string>([vip]);
  for (const a of aggregates) {
    if (!cidrContains(a.cidr, ip)) continue;
    const bits = BITS[ip.family];
    if (a.length === bits) continue;
    const mask = ((1n << BigInt(bits)) - 1n) ^ ((1n << BigInt(bits - a.length)) - 1n);
    out.add(`${formatIp({ family: ip.family, value: ip.value & mask })}/${a.length}`);
  }
  return [...out].sort();
}
