/**
 * A client's zone from PasslbConfig's zones (`clientCIDRs`), for zonal affinity in the
 * userspace proxy as the kernel paths decide it: the longest prefix that holds the client
 * address wins (XDP's LPM trie, docs/dataplane-xdp.md; where two zones list the same prefix,
 * the first by name). Memoised per address: a client connects many times. Pure.
 */
import { cidrContains, parseCidr, parseIp } from "../../net/ip.ts";

export type ClientZoneOf = (address: string) => string | undefined;

const MEMO_LIMIT = 1 << 16;

export function clientZones(
  zones: readonly { readonly name: string; readonly clientCIDRs: readonly string[] }[],
): ClientZoneOf {
  const prefixes = [...zones]
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0))
    .flatMap((z) =>
      z.clientCIDRs.flatMap((c) => ((p) => (p ? [{ zone: z.name, cidr: p }] : []))(parseCidr(c, true))),
    )
    .sort((a, b) => b.cidr.prefix - a.cidr.prefix);
  const memo = new Map<string, string | undefined>();
  return (address) => {
    if (prefixes.length === 0) return undefined;
    if (memo.has(address)) return memo.get(address);
    const ip = parseIp(address);
    const zone = ip && prefixes.find((p) => cidrContains(p.cidr, ip))?.zone;
    if (memo.size >= MEMO_LIMIT) memo.clear();
    memo.set(address, zone);
    return zone;
  };
}
