/**
 * Where VIPs may live in the lab: documentation and ULA space no lab host uses
 * (203.0.113.1-63 and 203.0.113.128-254; fd00::/8 outside the lab's own fd00:192::/32,
 * fd00:198::/32 and fd00:203::/32 — docs/lab.md "Addressing"). Pure; the lab rewrite
 * (lab-rewrite.ts) keeps pools and requested addresses inside it and rewrites the others.
 */
import { cidrRange, type IpRange, parseCidr, parseIp } from "../net/ip.ts";

/** A pool entry (CIDR, `a-b` or one address) as a range; undefined when it does not parse. */
export function poolRange(text: string): IpRange | undefined {
  if (text.includes("/")) {
    const c = parseCidr(text, true);
    return c ? cidrRange(c) : undefined;
  }
  const [a, b] = text.split("-").map((x) => x.trim());
  const first = a ? parseIp(a) : undefined;
  const last = b ? parseIp(b) : first;
  if (!first || !last || first.family !== last.family) return undefined;
  return { family: first.family, first: first.value, last: last.value };
}

const v4 = (text: string) => parseIp(text)!.value;
const v6cidr = (text: string) => cidrRange(parseCidr(text)!);
/** where VIPs may live in the lab: documentation/ULA space no lab host uses */
const FREE_V4: readonly (readonly [bigint, bigint])[] = [
  [v4("203.0.113.1"), v4("203.0.113.63")],
  [v4("203.0.113.128"), v4("203.0.113.254")],
];
const ULA = v6cidr("fd00::/8");
const LAB_V6: readonly IpRange[] = ["fd00:192::/32", "fd00:198::/32", "fd00:203::/32"].map(v6cidr);

export function vipSafe(r: IpRange): boolean {
  if (r.first > r.last) return false;
  if (r.family === "IPv4") return FREE_V4.some(([lo, hi]) => r.first >= lo && r.last <= hi);
  if (r.first < ULA.first || r.last > ULA.last) return false;
  return !LAB_V6.some((l) => r.first <= l.last && r.last >= l.first);
}

/** whether a single address is free lab VIP space */
export const safeIp = (text: string): boolean => {
  const ip = parseIp(text);
  return ip !== undefined && vipSafe({ family: ip.family, first: ip.value, last: ip.value });
};
