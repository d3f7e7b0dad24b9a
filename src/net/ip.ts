/**
 * IP addresses, CIDRs and ranges as plain values: parse, print canonically, compare and
 * iterate. Pure; no DNS, no sockets. IPv4 is held as a 32-bit bigint, IPv6 as a 128-bit
 * bigint, so one code path serves both families.
 *
 * Canonical text follows RFC 5952 for IPv6 (lower case, longest zero run compressed, a
 * single zero group not compressed) — the form `net.JoinHostPort`/kube-proxy print.
 */

export type IpFamily = "IPv4" | "IPv6";

export interface IpAddress {
  readonly family: IpFamily;
  readonly value: bigint;
}

export interface Cidr {
  readonly family: IpFamily;
  /** network address (host bits cleared) */
  readonly base: bigint;
  readonly prefix: number;
}

export interface IpRange {
  readonly family: IpFamily;
  readonly first: bigint;
  readonly last: bigint;
}

export const familyBits = (family: IpFamily): number => (family === "IPv4" ? 32 : 128);

/** The 32-bit value of a dotted quad, or undefined. Leading zeros are refused, as
 * Kubernetes' strict IP parsing does since 1.20 (they used to mean octal). */
function parseIPv4Number(text: string): number | undefined {
  let value = 0;
  let octet = 0;
  let digits = 0;
  let dots = 0;
  for (let i = 0; i <= text.length; i++) {
    const c = i < text.length ? text.charCodeAt(i) : 0x2e;
    if (c === 0x2e) {
      if (digits === 0 || octet > 255) return undefined;
      value = value * 256 + octet;
      octet = 0;
      digits = 0;
      dots++;
      continue;
    }
    if (c < 0x30 || c > 0x39 || (digits === 1 && octet === 0) || digits === 3) return undefined;
    octet = octet * 10 + (c - 0x30);
    digits++;
  }
  return dots === 4 ? value : undefined;
}

function parseIPv4(text: string): bigint | undefined {
  const n = parseIPv4Number(text);
  return n === undefined ? undefined : BigInt(n);
}

function isHexGroup(g: string): boolean {
  if (g.length === 0 || g.length > 4) return false;
  for (let i = 0; i < g.length; i++) {
    const c = g.charCodeAt(i) | 0x20; // fold A-F to a-f
    if (!((c >= 0x30 && c <= 0x39) || (c >= 0x61 && c <= 0x66))) return false;
  }
  return true;
}

/** The eight 16-bit words of an IPv6 address, or undefined. */
function parseIPv6Words(text: string): number[] | undefined {
  if (text.includes("%")) return undefined; // zones are not valid in Kubernetes addresses
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const head = halves[0] === "" ? [] : (halves[0] ?? "").split(":");
  const tail = halves.length === 2 && halves[1] !== "" ? (halves[1] ?? "").split(":") : [];
  const words: number[] = [];
  const tailWords: number[] = [];
  const push = (groups: string[], target: number[]): boolean => {
    for (let i = 0; i < groups.length; i++) {
      const g = groups[i] ?? "";
      if (i === groups.length - 1 && g.includes(".")) {
        const v4 = parseIPv4(g);
        if (v4 === undefined) return false;
        target.push(Number(v4 >> 16n), Number(v4 & 0xffffn));
        continue;
      }
      if (!isHexGroup(g)) return false;
      target.push(Number.parseInt(g, 16));
    }
    return true;
  };
  if (!push(head, words) || !push(tail, tailWords)) return undefined;
  if (halves.length === 2) {
    const missing = 8 - words.length - tailWords.length;
    if (missing < 1) return undefined;
    for (let i = 0; i < missing; i++) words.push(0);
  }
  for (const w of tailWords) words.push(w);
  return words.length === 8 ? words : undefined;
}

function parseIPv6(text: string): bigint | undefined {
  const words = parseIPv6Words(text);
  if (!words) return undefined;
  return BigInt(`0x${words.map((w) => w.toString(16).padStart(4, "0")).join("")}`);
}

/** RFC 5952 text of eight words. */
function formatIPv6Words(words: ArrayLike<number>): string {
  // longest run of zero words (length ≥ 2), first one on ties
  let bestStart = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && words[j] === 0) j++;
    if (j - i > bestLen && j - i >= 2) {
      bestStart = i;
      bestLen = j - i;
    }
    i = j;
  }
  if (bestStart < 0) return hexGroups(words, 0, 8);
  return `${hexGroups(words, 0, bestStart)}::${hexGroups(words, bestStart + bestLen, 8)}`;
}

/** words[from..to) as hex groups joined by ":". */
function hexGroups(words: ArrayLike<number>, from: number, to: number): string {
  let out = "";
  for (let i = from; i < to; i++) out += i === from ? words[i]!.toString(16) : `:${words[i]!.toString(16)}`;
  return out;
}

/** Parses an IPv4 or IPv6 address; undefined when the text is not one. */
export function parseIp(text: string): IpAddress | undefined {
  if (text.includes(":")) {
    const value = parseIPv6(text);
    return value === undefined ? undefined : { family: "IPv6", value };
  }
  const value = parseIPv4(text);
  return value === undefined ? undefined : { family: "IPv4", value };
}

const formatWords = new Int32Array(8);

export function formatIp(ip: IpAddress): string {
  if (ip.family === "IPv4") {
    const v = Number(ip.value);
    return `${(v >>> 24) & 255}.${(v >>> 16) & 255}.${(v >>> 8) & 255}.${v & 255}`;
  }
  // the eight words from the hex digits (right-aligned: missing leading digits are zeros)
  const hex = ip.value.toString(16);
  const words = formatWords;
  words.fill(0);
  for (let i = hex.length - 1, digit = 0; i >= 0 && digit < 32; i--, digit++) {
    const c = hex.charCodeAt(i);
    const d = c <= 0x39 ? c - 0x30 : c - 0x57;
    words[7 - (digit >> 2)]! |= d << ((digit & 3) * 4);
  }
  return formatIPv6Words(words);
}

const scanWords = new Int32Array(8);

/**
 * Whether the text is a valid IPv6 address already in RFC 5952 form, exactly as
 * `formatIPv6Words` would print it: lower-case hex groups without leading zeros, and
 * `::` only for the first longest run of two or more zero words. One pass over the
 * characters, nothing allocated. False means "not known to be canonical" (upper case,
 * an IPv4 tail, a zone, invalid text …): the caller takes the general path.
 */
function isCanonicalIPv6(text: string): boolean {
  const n = text.length;
  const words = scanWords;
  let count = 0;
  let gapAt = -1;
  let i = 0;
  if (n >= 2 && text.charCodeAt(0) === 0x3a && text.charCodeAt(1) === 0x3a) {
    gapAt = 0;
    i = 2;
  }
  while (i < n) {
    let value = 0;
    let digits = 0;
    let leadingZero = false;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      let d: number;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x57;
      else break;
      if (digits === 0 && d === 0) leadingZero = true;
      value = value * 16 + d;
      digits++;
    }
    if (digits === 0 || digits > 4 || (leadingZero && digits > 1) || count === 8) return false;
    words[count++] = value;
    if (i === n) break;
    if (text.charCodeAt(i) !== 0x3a || ++i === n) return false;
    if (text.charCodeAt(i) === 0x3a) {
      if (gapAt >= 0) return false;
      gapAt = count;
      i++;
    }
  }
  if (gapAt < 0) {
    if (count !== 8) return false;
    for (let w = 1; w < 8; w++) if (words[w] === 0 && words[w - 1] === 0) return false;
    return true;
  }
  const missing = 8 - count;
  if (missing < 2) return false;
  // the compressed run must be exactly the gap (non-zero neighbours), and the first longest
  if ((gapAt > 0 && words[gapAt - 1] === 0) || (gapAt < count && words[gapAt] === 0)) return false;
  let run = 0;
  for (let w = 0; w < count; w++) {
    run = words[w] === 0 ? run + 1 : 0;
    if (run >= 2 && (w < gapAt ? run >= missing : run > missing)) return false;
  }
  return true;
}

// canonicalIp is called for every endpoint on every plan; the same strings come back each
// time, so answers are remembered (a pure function's cache: bounded, cleared when full).
const canonicalCache = new Map<string, string | null>();
const CANONICAL_CACHE_LIMIT = 1 << 20;

/** The canonical text of an address, or undefined when it does not parse. */
export function canonicalIp(text: string): string | undefined {
  // valid IPv4 text is canonical already, and checking it is cheaper than a cache lookup
  if (!text.includes(":")) return parseIPv4Number(text) === undefined ? undefined : text;
  // so is recognising IPv6 text that is canonical already (what the API server stores)
  if (isCanonicalIPv6(text)) return text;
  const hit = canonicalCache.get(text);
  if (hit !== undefined) return hit ?? undefined;
  let out: string | undefined;
  if (text.includes(":")) {
    const words = parseIPv6Words(text);
    out = words ? formatIPv6Words(words) : undefined;
  } else out = parseIPv4Number(text) === undefined ? undefined : text; // valid IPv4 text is canonical
  if (canonicalCache.size >= CANONICAL_CACHE_LIMIT) canonicalCache.clear();
  canonicalCache.set(text, out ?? null);
  return out;
}

/** Parses `a.b.c.d/n` or `x::/n`. Host bits must be zero unless `loose` (Kubernetes'
 * loadBalancerSourceRanges accept host bits; the network is what counts). */
export function parseCidr(text: string, loose = false): Cidr | undefined {
  const slash = text.indexOf("/");
  if (slash < 0) return undefined;
  const ip = parseIp(text.slice(0, slash));
  const prefixText = text.slice(slash + 1);
  if (!ip || !/^[0-9]{1,3}$/.test(prefixText)) return undefined;
  const prefix = Number(prefixText);
  const bits = familyBits(ip.family);
  if (prefix > bits) return undefined;
  const hostMask = (1n << BigInt(bits - prefix)) - 1n;
  if (!loose && (ip.value & hostMask) !== 0n) return undefined;
  return { family: ip.family, base: ip.value & ~hostMask & ((1n << BigInt(bits)) - 1n), prefix };
}

export function formatCidr(cidr: Cidr): string {
  return `${formatIp({ family: cidr.family, value: cidr.base })}/${cidr.prefix}`;
}

export function cidrRange(cidr: Cidr): IpRange {
  const size = 1n << BigInt(familyBits(cidr.family) - cidr.prefix);
  return { family: cidr.family, first: cidr.base, last: cidr.base + size - 1n };
}

export function cidrContains(cidr: Cidr, ip: IpAddress): boolean {
  if (cidr.family !== ip.family) return false;
  const r = cidrRange(cidr);
  return ip.value >= r.first && ip.value <= r.last;
}

/** Parses `first-last` (both addresses of one family, first ≤ last). */
export function parseIpRange(text: string): IpRange | undefined {
  const dash = text.indexOf("-");
  if (dash < 0) return undefined;
  const first = parseIp(text.slice(0, dash).trim());
  const last = parseIp(text.slice(dash + 1).trim());
  if (!first || !last || first.family !== last.family || first.value > last.value) return undefined;
  return { family: first.family, first: first.value, last: last.value };
}

export function rangeSize(range: IpRange): bigint {
  return range.last - range.first + 1n;
}

/** Sort key that orders IPv4 before IPv6 and addresses numerically. */
export function compareIp(a: IpAddress, b: IpAddress): number {
  if (a.family !== b.family) return a.family === "IPv4" ? -1 : 1;
  return a.value < b.value ? -1 : a.value > b.value ? 1 : 0;
}

/** `ip:port`, with brackets for IPv6 — Go's net.JoinHostPort. */
export function joinHostPort(address: string, port: number): string {
  return address.includes(":") ? `[${address}]:${port}` : `${address}:${port}`;
}

/** The addresses Kubernetes refuses as endpoint IPs (ValidateEndpointIP): unspecified,
 * loopback, link-local unicast and link-local multicast. */
export function isSpecialPurposeEndpointIp(ip: IpAddress): boolean {
  if (ip.family === "IPv4") {
    const top8 = ip.value >> 24n;
    const top16 = ip.value >> 16n;
    const top24 = ip.value >> 8n;
    return ip.value === 0n || top8 === 127n || top16 === 0xa9fen || top24 === 0xe00000n;
  }
  const top16 = ip.value >> 112n;
  const linkLocalUnicast = ip.value >> 118n === 0xfe80n >> 6n; // fe80::/10
  return ip.value === 0n || ip.value === 1n || linkLocalUnicast || top16 === 0xff02n;
}
