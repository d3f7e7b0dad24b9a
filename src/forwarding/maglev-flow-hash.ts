// The flow hash the userspace proxy feeds to `lookupBackend`: a seeded murmur3 over a fixed
// byte encoding of a connection's 5-tuple, or of the client address alone (ClientIP
// affinity, Kubernetes `sessionAffinity: ClientIP`).
//
// Encoding (stable; changing it moves flows between backends on upgrade):
//   five-tuple: 0x01, len(src), src bytes, len(dst), dst bytes, srcPort (BE u16),
//               dstPort (BE u16), IANA protocol number (TCP 6, UDP 17, SCTP 132)
//   client:     0x02, len(src), src bytes
// Addresses are IPv4 (4 bytes) or IPv6 (16 bytes); an IPv4-mapped IPv6 address
// (::ffff:a.b.c.d, what a dual-stack socket reports) hashes as the IPv4 address, and an
// IPv6 zone (%eth0) is ignored because it is local to one node.
//
// Does not: match the kernel data plane's `jhash` (landscape.md §4.5) bit for bit. A flow
// served by the nftables path and later by the userspace fallback may pick another backend;
// conntrack and the proxy's own connection state are what keep established flows in place.

import { murmur3 } from "./maglev-hash.ts";

/** IANA protocol numbers for the protocols a Kubernetes Service port may use. */
export const PROTOCOL_NUMBERS = { TCP: 6, UDP: 17, SCTP: 132 } as const;

export type FlowProtocol = keyof typeof PROTOCOL_NUMBERS;

/** One connection as the proxy sees it. Addresses are textual IPv4 or IPv6. */
export type FiveTuple = {
  readonly protocol: FlowProtocol;
  readonly srcAddr: string;
  readonly srcPort: number;
  readonly dstAddr: string;
  readonly dstPort: number;
};

/** Only the client address: every connection from one client maps to one backend. */
export type ClientAddress = { readonly srcAddr: string };

export type FlowKey = FiveTuple | ClientAddress;

/** Room for the longest encoding: two IPv6 addresses with their lengths, ports and protocol. */
const scratch = new Uint8Array(3 + 16 + 16 + 5);

/**
 * Seeded 32-bit hash of a flow key (unsigned). Throws TypeError on a malformed address or port.
 * Runs once per new connection, so it encodes into one reused buffer: no allocation for
 * IPv4 keys.
 */
export function flowHash(key: FlowKey, seed: number): number {
  const bytes = scratch;
  if (!("protocol" in key)) {
    bytes[0] = 0x02;
    const n = writeAddress(bytes, 2, key.srcAddr);
    bytes[1] = n;
    return murmur3(bytes, seed, 2 + n);
  }
  let at = 0;
  bytes[at++] = 0x01;
  const src = writeAddress(bytes, at + 1, key.srcAddr);
  bytes[at] = src;
  at += 1 + src;
  const dst = writeAddress(bytes, at + 1, key.dstAddr);
  bytes[at] = dst;
  at += 1 + dst;
  at = writePort(bytes, at, key.srcPort);
  at = writePort(bytes, at, key.dstPort);
  const protocol = PROTOCOL_NUMBERS[key.protocol];
  if (protocol === undefined) throw new TypeError(`flowHash: unknown protocol ${String(key.protocol)}`);
  bytes[at] = protocol;
  return murmur3(bytes, seed, at + 1);
}

/** Writes the address bytes at `at`; returns how many (4 or 16). */
function writeAddress(into: Uint8Array, at: number, text: string): number {
  if (writeIpv4(into, at, text)) return 4;
  const b = addressBytes(text);
  into.set(b, at);
  return b.length;
}

/**
 * The dotted-quad fast path, same rules as `ipv4Bytes` (four 1–3 digit parts, each ≤ 255,
 * no leading zero) without a regular expression; false sends the caller to the full parser.
 */
function writeIpv4(into: Uint8Array, at: number, text: string): boolean {
  const length = text.length;
  if (length < 7 || length > 15) return false;
  let part = 0;
  let value = 0;
  let digits = 0;
  let first = 0;
  for (let i = 0; i <= length; i++) {
    const c = i === length ? 0x2e : text.charCodeAt(i);
    if (c === 0x2e) {
      if (digits === 0 || value > 255 || (digits > 1 && first === 0x30) || part > 3) return false;
      into[at + part] = value;
      part++;
      value = 0;
      digits = 0;
    } else if (c >= 0x30 && c <= 0x39) {
      if (digits === 0) first = c;
      if (++digits > 3) return false;
      value = value * 10 + (c - 0x30);
    } else return false;
  }
  return part === 4;
}

function writePort(bytes: Uint8Array, at: number, port: number): number {
  if (!Number.isInteger(port) || port < 0 || port > 0xffff) {
    throw new TypeError(`flowHash: port must be an integer 0..65535, got ${port}`);
  }
  bytes[at] = port >>> 8;
  bytes[at + 1] = port & 0xff;
  return at + 2;
}

const IPV4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/;
const HEX_GROUP = /^[0-9a-fA-F]{1,4}$/;

/** Network-order bytes of a textual IPv4 (4 bytes) or IPv6 (16 bytes) address. */
export function addressBytes(text: string): Uint8Array {
  const v4 = ipv4Bytes(text);
  if (v4 !== undefined) return v4;
  const v6 = ipv6Bytes(text);
  if (v6 === undefined) throw new TypeError(`flowHash: not an IPv4 or IPv6 address: ${JSON.stringify(text)}`);
  const mapped = v6.subarray(0, 10).every((b) => b === 0) && v6[10] === 0xff && v6[11] === 0xff;
  return mapped ? v6.slice(12) : v6;
}

function ipv4Bytes(text: string): Uint8Array | undefined {
  const match = IPV4.exec(text);
  if (match === null) return undefined;
  const bytes = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    const part = match[i + 1]!;
    const value = Number(part);
    if (value > 255 || (part.length > 1 && part.startsWith("0"))) return undefined;
    bytes[i] = value;
  }
  return bytes;
}

function ipv6Bytes(input: string): Uint8Array | undefined {
  const zone = input.indexOf("%");
  const text = zone === -1 ? input : input.slice(0, zone);
  const halves = text.split("::");
  if (halves.length > 2) return undefined;
  const head = groups(halves[0]!);
  const tail = halves.length === 2 ? groups(halves[1]!) : [];
  if (head === undefined || tail === undefined) return undefined;
  const total = head.length + tail.length;
  if (halves.length === 1 ? total !== 8 : total > 7) return undefined;
  const words = [...head, ...new Array<number>(8 - total).fill(0), ...tail];
  const bytes = new Uint8Array(16);
  words.forEach((word, i) => {
    bytes[2 * i] = word >>> 8;
    bytes[2 * i + 1] = word & 0xff;
  });
  return bytes;
}

/** 16-bit groups of one side of "::"; a trailing dotted quad counts as two groups. */
function groups(text: string): number[] | undefined {
  if (text === "") return [];
  const parts = text.split(":");
  const words: number[] = [];
  for (let i = 0; i < parts.length; i++) {
    const part = parts[i]!;
    if (i === parts.length - 1 && part.includes(".")) {
      const v4 = ipv4Bytes(part);
      if (v4 === undefined) return undefined;
      words.push((v4[0]! << 8) | v4[1]!, (v4[2]! << 8) | v4[3]!);
    } else if (HEX_GROUP.test(part)) {
      words.push(Number.parseInt(part, 16));
    } else {
      return undefined;
    }
  }
  return words;
}
