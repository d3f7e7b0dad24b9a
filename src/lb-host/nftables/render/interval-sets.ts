/**
 * Interval sets of client prefixes (loadBalancerSourceRanges, client zones) in the form nft
 * accepts and prints back. Pure.
 *
 * nft refuses overlapping intervals in one set, so prefixes covered by another are dropped
 * (the set still matches the same addresses); a host prefix is written as a plain address,
 * as nft prints it. Prefixes of the other family are left out (a chain matches one family).
 * Does not: decide what an empty list means (service-part.ts: an empty allow-list drops).
 */
import { type Cidr, cidrRange, formatCidr, parseCidr } from "../../../net/ip.ts";
import { type Fam, familyName } from "./nft-state.ts";

export const intervalDecl = (fam: Fam): string =>
  `type ${fam === 4 ? "ipv4_addr" : "ipv6_addr"}; flags interval;`;

/** Canonical, non-overlapping prefixes of one family, as set elements. */
export function intervalElements(cidrs: readonly string[], fam: Fam): Map<string, string> {
  const parsed: Cidr[] = [];
  for (const text of cidrs) {
    const c = parseCidr(text.includes("/") ? text : `${text}/${fam === 4 ? 32 : 128}`, true);
    if (c && c.family === familyName(fam)) parsed.push(c);
  }
  parsed.sort((a, b) => (a.base < b.base ? -1 : a.base > b.base ? 1 : a.prefix - b.prefix));
  const kept: Cidr[] = [];
  let lastEnd = -1n;
  for (const c of parsed) {
    const r = cidrRange(c);
    if (r.last <= lastEnd) continue; // inside the previous kept prefix
    kept.push(c);
    lastEnd = r.last;
  }
  const out = new Map<string, string>();
  for (const c of kept) {
    const text = formatCidr(c);
    out.set(c.prefix === (fam === 4 ? 32 : 128) ? text.slice(0, text.indexOf("/")) : text, "");
  }
  return out;
}
