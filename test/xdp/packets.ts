/**
 * Crafted frames for BPF_PROG_TEST_RUN (`bpftool prog run … data_in`): Ethernet + IPv4
 * (RFC 791, header checksum RFC 1071) or IPv6 (RFC 8200) + TCP (RFC 9293 flags) or UDP, and
 * their fields read back from `data_out`. Test addresses only (docs/lab.md).
 */
import { addressBytes } from "../../src/forwarding/maglev-flow-hash.ts";

export interface Frame {
  readonly src: string;
  readonly dst: string;
  readonly proto: "tcp" | "udp";
  readonly sport: number;
  readonly dport: number;
  /** TCP flags byte; default SYN */
  readonly flags?: number;
  readonly ttl?: number;
  /** IPv4 only: more-fragments set */
  readonly fragment?: boolean;
  /** IPv4 only: an options word (ihl 6) */
  readonly options?: boolean;
  readonly payload?: number;
}

export const SYN = 0x02;
export const ACK = 0x10;
export const CLIENT_MAC = "02:00:00:00:00:0c";
export const LB_MAC = "02:00:00:00:00:01";

export const macBytes = (m: string) => Buffer.from(m.split(":").map((h) => Number.parseInt(h, 16)));

export function ipv4Checksum(header: Buffer): number {
  let sum = 0;
  for (let i = 0; i < header.length; i += 2) sum += header.readUInt16BE(i);
  while (sum > 0xffff) sum = (sum & 0xffff) + (sum >>> 16);
  return ~sum & 0xffff;
}

export function frame(f: Frame): Buffer {
  const v6 = f.src.includes(":");
  const l4 = Buffer.alloc((f.proto === "tcp" ? 20 : 8) + (f.payload ?? 0));
  l4.writeUInt16BE(f.sport, 0);
  l4.writeUInt16BE(f.dport, 2);
  if (f.proto === "tcp") {
    l4[12] = 0x50;
    l4[13] = f.flags ?? SYN;
    l4.writeUInt16BE(65535, 14);
  } else l4.writeUInt16BE(l4.length, 4);
  const proto = f.proto === "tcp" ? 6 : 17;
  let ip: Buffer;
  if (v6) {
    ip = Buffer.alloc(40);
    ip.writeUInt32BE(0x60000000, 0);
    ip.writeUInt16BE(l4.length, 4);
    ip[6] = proto;
    ip[7] = f.ttl ?? 64;
    Buffer.from(addressBytes(f.src)).copy(ip, 8);
    Buffer.from(addressBytes(f.dst)).copy(ip, 24);
  } else {
    const ihl = f.options ? 6 : 5;
    ip = Buffer.alloc(ihl * 4);
    ip[0] = 0x40 | ihl;
    ip.writeUInt16BE(ip.length + l4.length, 2);
    if (f.fragment) ip.writeUInt16BE(0x2000, 6);
    ip[8] = f.ttl ?? 64;
    ip[9] = proto;
    Buffer.from(addressBytes(f.src)).copy(ip, 12);
    Buffer.from(addressBytes(f.dst)).copy(ip, 16);
    ip.writeUInt16BE(ipv4Checksum(ip), 10);
  }
  const eth = Buffer.concat([
    macBytes(LB_MAC),
    macBytes(CLIENT_MAC),
    Buffer.from(v6 ? [0x86, 0xdd] : [0x08, 0x00]),
  ]);
  return Buffer.concat([eth, ip, l4]);
}

/** An ARP request (not IP: the program must pass it). */
export function arp(): Buffer {
  const eth = Buffer.concat([Buffer.alloc(6, 0xff), macBytes(CLIENT_MAC), Buffer.from([0x08, 0x06])]);
  return Buffer.concat([eth, Buffer.alloc(28)]);
}

const mac = (b: Buffer, at: number) =>
  Array.from(b.subarray(at, at + 6), (x) => x.toString(16).padStart(2, "0")).join(":");

/** What a test reads back from an output frame. */
export function readFrame(b: Buffer) {
  const v6 = b.readUInt16BE(12) === 0x86dd;
  const ip = b.subarray(14, v6 ? 54 : 14 + (b[14]! & 0x0f) * 4);
  return {
    dmac: mac(b, 0),
    smac: mac(b, 6),
    ttl: v6 ? ip[7]! : ip[8]!,
    checksumOk: v6 ? true : ipv4Checksum(ip) === 0,
  };
}
