/**
 * PROXY protocol version 2 (HAProxy's "The PROXY protocol", version 2, section 2.2): the
 * binary header a proxy sends first on a connection (or in front of every datagram) so
 * the next hop learns the original client and destination addresses.
 *
 * Layout: the 12-byte signature; one byte version (high nibble 2) and command (0 LOCAL,
 * 1 PROXY); one byte address family (high nibble: 1 INET, 2 INET6) and transport (low
 * nibble: 1 STREAM, 2 DGRAM); a 16-bit big-endian length of what follows; then source
 * address, destination address, source port, destination port (12 bytes for IPv4, 36
 * for IPv6). No TLVs are written; a decoder skips any that arrive.
 *
 * Pure: bytes in, bytes or values out.
 */
import { addressBytes } from "../../forwarding/maglev-flow-hash.ts";

export const PROXY_V2_SIGNATURE = Uint8Array.from([
  0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a,
]);

export interface ProxyAddresses {
  readonly transport: "TCP" | "UDP";
  readonly srcAddr: string;
  readonly srcPort: number;
  readonly dstAddr: string;
  readonly dstPort: number;
}

/** The header for a proxied connection or datagram (command PROXY). */
export function encodeProxyV2(a: ProxyAddresses): Buffer {
  const src = addressBytes(a.srcAddr);
  const dst = addressBytes(a.dstAddr);
  if (src.length !== dst.length) throw new TypeError("encodeProxyV2: source and destination families differ");
  const v6 = src.length === 16;
  const bodyLength = v6 ? 36 : 12;
  const out = Buffer.alloc(16 + bodyLength);
  out.set(PROXY_V2_SIGNATURE, 0);
  out[12] = 0x21; // version 2, command PROXY
  out[13] = ((v6 ? 0x2 : 0x1) << 4) | (a.transport === "TCP" ? 0x1 : 0x2);
  out.writeUInt16BE(bodyLength, 14);
  out.set(src, 16);
  out.set(dst, 16 + src.length);
  out.writeUInt16BE(a.srcPort, 16 + 2 * src.length);
  out.writeUInt16BE(a.dstPort, 18 + 2 * src.length);
  return out;
}

/** The header of a connection the proxy opens on its own behalf (command LOCAL). */
export function encodeProxyV2Local(): Buffer {
  const out = Buffer.alloc(16);
  out.set(PROXY_V2_SIGNATURE, 0);
  out[12] = 0x20;
  out[13] = 0x00;
  out.writeUInt16BE(0, 14);
  return out;
}

export type ProxyV2Decode =
  /** more bytes are needed */
  | { readonly kind: "incomplete" }
  /** not a PROXY v2 header */
  | { readonly kind: "invalid"; readonly reason: string }
  /** a header of `length` bytes; addresses undefined for LOCAL or an unknown family */
  | { readonly kind: "header"; readonly length: number; readonly addresses: ProxyAddresses | undefined };

/** Decodes a header at the start of `bytes`. */
export function decodeProxyV2(bytes: Uint8Array): ProxyV2Decode {
  const have = Math.min(bytes.length, 12);
  for (let i = 0; i < have; i++)
    if (bytes[i] !== PROXY_V2_SIGNATURE[i]) return { kind: "invalid", reason: "no PROXY v2 signature" };
  if (bytes.length < 16) return { kind: "incomplete" };
  const verCmd = bytes[12]!;
  if (verCmd >> 4 !== 2) return { kind: "invalid", reason: `version ${verCmd >> 4}` };
  const length = 16 + ((bytes[14]! << 8) | bytes[15]!);
  if (bytes.length < length) return { kind: "incomplete" };
  const command = verCmd & 0x0f;
  const family = bytes[13]! >> 4;
  const transport = bytes[13]! & 0x0f;
  if (command === 0 || (family !== 1 && family !== 2) || (transport !== 1 && transport !== 2))
    return { kind: "header", length, addresses: undefined };
  const n = family === 1 ? 4 : 16;
  if (length < 16 + 2 * n + 4) return { kind: "invalid", reason: "address block too short" };
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  return {
    kind: "header",
    length,
    addresses: {
      transport: transport === 1 ? "TCP" : "UDP",
      srcAddr: formatAddress(bytes.subarray(16, 16 + n)),
      dstAddr: formatAddress(bytes.subarray(16 + n, 16 + 2 * n)),
      srcPort: view.readUInt16BE(16 + 2 * n),
      dstPort: view.readUInt16BE(18 + 2 * n),
    },
  };
}

function formatAddress(b: Uint8Array): string {
  if (b.length === 4) return `${b[0]}.${b[1]}.${b[2]}.${b[3]}`;
  const groups: string[] = [];
  for (let i = 0; i < 16; i += 2) groups.push(((b[i]! << 8) | b[i + 1]!).toString(16));
  // compress the longest run of zero groups (RFC 5952)
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== "0") {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === "0") j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  if (best < 0) return groups.join(":");
  return `${groups.slice(0, best).join(":")}::${groups.slice(best + bestLen).join(":")}`;
}
