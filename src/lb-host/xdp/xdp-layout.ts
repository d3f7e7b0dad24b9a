/**
 * The byte layout of the XDP program's maps (src/lb-host/xdp/passlb-xdp.c), as encoders
 * and decoders between plain values and the hex bytes `bpftool map update … key hex …`
 * takes and `bpftool -j map dump` gives back. Integers are host order (little-endian on
 * every architecture we ship for: x86-64, arm64), addresses and ports network order, as
 * the program reads them from the packet.
 *
 * Pure. Does not decide what goes into the maps (xdp-maps.ts) or run bpftool (drivers/bpftool.ts).
 */
import { addressBytes } from "../../forwarding/maglev-flow-hash.ts";

/** Map names, as pinned under `<pin dir>/maps/`. */
export const XDP_MAPS = [
  "vips",
  "rings",
  "nodes",
  "flows",
  "src_ranges",
  "zone_rings",
  "ring_ids",
  "tx_ports",
  "config",
  "node_names",
  "svc_names",
  "svc_stats",
  "node_stats",
  "reasons",
  "syn_rates",
] as const;
export type XdpMapName = (typeof XDP_MAPS)[number];

/** Capacities compiled into the program (passlb-xdp.c MAX_*, RING_SLOTS). */
export const XDP_LIMITS = {
  listeners: 65536,
  nodes: 16384,
  services: 65536,
  ringSlots: 1 << 22,
  ringIds: 65536,
  flows: 262144,
  sourceRanges: 262144,
  zoneRanges: 65536,
  txPorts: 256,
} as const;

export const VIP_FLAGS = { sourceRanges: 1, clientIp: 2, zones: 4 } as const;
export const NODE_FLAGS = { live: 1, xdp: 2 } as const;

/** passlb-xdp.c `enum reason`, in order: the index of each counter in `reasons`. */
export const XDP_REASONS = [
  "pass_not_ip",
  "pass_not_vip",
  "pass_ip_options",
  "pass_fragment",
  "pass_l4",
  "pass_ttl",
  "pass_mtu",
  "pass_node",
  "drop_source",
  "drop_no_nodes",
  "fwd_tx",
  "fwd_redirect",
  "flow_new",
  "flow_hit",
  "flow_replaced",
  "syn_rate",
] as const;
export type XdpReason = (typeof XDP_REASONS)[number];

export type Family = 4 | 6;
export const PROTO = { TCP: 6, UDP: 17 } as const;

export interface VipKey {
  readonly family: Family;
  readonly proto: number;
  readonly port: number;
  readonly address: string;
}

export interface VipValue {
  readonly listener: number;
  readonly service: number;
  /** key of ring_ids; 0: no node (the listener drops) */
  readonly ringId: number;
  readonly flags: number;
}

export interface XdpNode {
  readonly ifindex: number;
  readonly flags: number;
  readonly gen: number;
  readonly mtu: number;
  /** aa:bb:cc:dd:ee:ff */
  readonly dmac: string;
  readonly smac: string;
}

export interface XdpConfig {
  readonly seed: number;
  readonly udpTimeoutS: number;
  readonly maxSynPerCpu: number;
  /** the last node generation handed out (kept for the next process) */
  readonly lastGen?: number;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, "0"));
const hex = (b: Uint8Array): string => {
  let out = HEX[b[0] ?? 0]!;
  for (let i = 1; i < b.length; i++) out += ` ${HEX[b[i]!]}`;
  return out;
};

function u32(out: Uint8Array, at: number, v: number): void {
  new DataView(out.buffer, out.byteOffset).setUint32(at, v >>> 0, true);
}

function addr16(address: string): Uint8Array {
  const b = addressBytes(address);
  const out = new Uint8Array(16);
  out.set(b);
  return out;
}

function mac(text: string): Uint8Array {
  const parts = text.split(":");
  if (parts.length !== 6 || parts.some((p) => !/^[0-9a-fA-F]{2}$/.test(p)))
    throw new TypeError(`not a MAC address: ${JSON.stringify(text)}`);
  return Uint8Array.from(parts, (p) => Number.parseInt(p, 16));
}

/** Encodings are memoised where the same values recur every pass (10 000 Services re-render
 * their VIP keys and names on every change): fewer strings built, less garbage. */
class Memo {
  readonly #m = new Map<string, string>();
  constructor(readonly limit: number) {}
  get(key: string, make: () => string): string {
    let v = this.#m.get(key);
    if (v === undefined) {
      if (this.#m.size >= this.limit) this.#m.clear();
      v = make();
      this.#m.set(key, v);
    }
    return v;
  }
}
const SMALL_U32 = 1 << 17;
const u32Memo: (string | undefined)[] = [];
const vipKeyMemo = new Memo(1 << 18);
const vipValueMemo = new Memo(1 << 18);
const nameMemo = new Memo(1 << 18);

export function encodeU32(v: number): string {
  if (v >= 0 && v < SMALL_U32) {
    const known = u32Memo[v];
    if (known !== undefined) return known;
  }
  const out = new Uint8Array(4);
  u32(out, 0, v);
  const text = hex(out);
  if (v >= 0 && v < SMALL_U32) u32Memo[v] = text;
  return text;
}

export function encodeVipKey(k: VipKey): string {
  return vipKeyMemo.get(`${k.family}|${k.proto}|${k.port}|${k.address}`, () => vipKeyBytes(k));
}

function vipKeyBytes(k: VipKey): string {
  const out = new Uint8Array(20);
  out[0] = k.family;
  out[1] = k.proto;
  out[2] = k.port >>> 8;
  out[3] = k.port & 0xff;
  out.set(addr16(k.address), 4);
  return hex(out);
}

export function encodeVipValue(v: VipValue): string {
  return vipValueMemo.get(`${v.listener}|${v.service}|${v.ringId}|${v.flags}`, () => vipValueBytes(v));
}

function vipValueBytes(v: VipValue): string {
  const out = new Uint8Array(20);
  [v.listener, v.service, v.ringId, 0, v.flags].forEach((x, i) => {
    u32(out, 4 * i, x);
  });
  return hex(out);
}

/** LPM key: prefix length 32 + the CIDR's, the listener big-endian, the address. */
export function encodeLpmKey(listener: number, address: string, prefix: number): string {
  const out = new Uint8Array(24);
  u32(out, 0, 32 + prefix);
  new DataView(out.buffer).setUint32(4, listener, false);
  out.set(addr16(address), 8);
  return hex(out);
}

export function encodeRingRef(base: number, size: number): string {
  const out = new Uint8Array(8);
  u32(out, 0, base);
  u32(out, 4, size);
  return hex(out);
}

export function encodeNode(n: XdpNode): string {
  const out = new Uint8Array(28);
  [n.ifindex, n.flags, n.gen, n.mtu].forEach((x, i) => {
    u32(out, 4 * i, x);
  });
  out.set(mac(n.dmac), 16);
  out.set(mac(n.smac), 22);
  return hex(out);
}

export function encodeConfig(c: XdpConfig): string {
  const out = new Uint8Array(16);
  [c.seed, c.udpTimeoutS, c.maxSynPerCpu, c.lastGen ?? 0].forEach((x, i) => {
    u32(out, 4 * i, x);
  });
  return hex(out);
}

export function encodeName(text: string): string {
  return nameMemo.get(text, () => nameBytes(text));
}

function nameBytes(text: string): string {
  const bytes = new TextEncoder().encode(text);
  if (bytes.length > 127) throw new RangeError(`name longer than 127 bytes: ${text}`);
  const out = new Uint8Array(128);
  out.set(bytes);
  return hex(out);
}

// ── decoders, for what bpftool -j dumps (arrays of "0x.." strings) ──────────────────────

export const bytesOf = (hexBytes: readonly string[]): Uint8Array =>
  Uint8Array.from(hexBytes, (h) => Number.parseInt(h, 16));

const le32 = (b: Uint8Array, at: number): number => new DataView(b.buffer, b.byteOffset).getUint32(at, true);

export const decodeU32 = (b: Uint8Array): number => le32(b, 0);

export function decodeVipValue(b: Uint8Array): VipValue {
  return {
    listener: le32(b, 0),
    service: le32(b, 4),
    ringId: le32(b, 8),
    flags: le32(b, 16),
  };
}

export function decodeConfig(b: Uint8Array): Required<XdpConfig> {
  return { seed: le32(b, 0), udpTimeoutS: le32(b, 4), maxSynPerCpu: le32(b, 8), lastGen: le32(b, 12) };
}

export function decodeNode(b: Uint8Array): XdpNode {
  const m = (at: number) =>
    Array.from(b.subarray(at, at + 6), (x) => x.toString(16).padStart(2, "0")).join(":");
  return {
    ifindex: le32(b, 0),
    flags: le32(b, 4),
    gen: le32(b, 8),
    mtu: le32(b, 12),
    dmac: m(16),
    smac: m(22),
  };
}

export function decodeName(b: Uint8Array): string {
  const end = b.indexOf(0);
  return new TextDecoder().decode(end === -1 ? b : b.subarray(0, end));
}

/** {packets, bytes} of one per-CPU counter value (16 bytes). */
export function decodeCounter(b: Uint8Array): { packets: number; bytes: number } {
  const v = new DataView(b.buffer, b.byteOffset);
  return { packets: Number(v.getBigUint64(0, true)), bytes: Number(v.getBigUint64(8, true)) };
}

/** The flow key's family byte (first byte): 4 or 6. */
export const flowFamily = (key: Uint8Array): number => key[0] ?? 0;

/** hex text ("aa bb …") → bytes, for tests and the fake */
export const hexBytes = (text: string): Uint8Array =>
  Uint8Array.from(text.split(" ").filter(Boolean), (h) => Number.parseInt(h, 16));

export interface FlowKey {
  readonly family: Family;
  readonly proto: number;
  readonly src: string;
  readonly sport: number;
  readonly dst: string;
  readonly dport: number;
}

export function encodeFlowKey(k: FlowKey): string {
  const out = new Uint8Array(40);
  out[0] = k.family;
  out[1] = k.proto;
  out[2] = k.sport >>> 8;
  out[3] = k.sport & 0xff;
  out[4] = k.dport >>> 8;
  out[5] = k.dport & 0xff;
  out.set(addr16(k.src), 8);
  out.set(addr16(k.dst), 24);
  return hex(out);
}

/** A flow entry: node index, its generation, last-seen time (ns, CLOCK_MONOTONIC). */
export function encodeFlow(node: number, gen: number, atimeNs = 0n): string {
  const out = new Uint8Array(16);
  u32(out, 0, node);
  u32(out, 4, gen);
  new DataView(out.buffer).setBigUint64(8, atimeNs, true);
  return hex(out);
}

export function decodeFlow(b: Uint8Array): { node: number; gen: number } {
  return { node: le32(b, 0), gen: le32(b, 4) };
}
