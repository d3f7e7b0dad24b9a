/**
 * From the map contents last applied to the wanted ones: the ordered `bpftool batch` lines
 * that get there with every intermediate state consistent (bpftool runs a batch line by
 * line and stops at the first error: it is not a transaction). Order:
 *   config, names, nodes and egress ports  (what rings and flows point at)
 *   ring slots into blocks no packet reads (xdp-rings.ts)
 *   ring_ids entries                       (the one write that swaps a ring for every VIP
 *                                           sharing it)
 *   new source ranges and zone rings       (before the VIP that needs them)
 *   vips entries                           (the one write that switches a listener)
 *   removed vips, then what only they used
 * A ring id keeps its content while entries still want it (those that left are rewritten
 * to other ids), and is swapped to new content when every VIP and zone entry that named it
 * now wants that content (a node's health flipping moves a shared ring as a whole): then the
 * swap is one `ring_ids` write however many VIPs share it. Otherwise the content gets an id
 * no entry names yet, and the entries that want it are rewritten.
 * Node entries are never deleted (an array): a node that left is written with no flags, so
 * its flows miss and take the current choice.
 *
 * Pure: the ring pool and `now` are arguments; the result names the state to remember.
 */
import type { MapOp } from "../../drivers/bpftool.ts";
import {
  encodeConfig,
  encodeRingRef,
  encodeU32,
  encodeVipValue,
  XDP_LIMITS,
  type XdpConfig,
  type XdpMapName,
} from "./xdp-layout.ts";
import type { XdpDesired } from "./xdp-maps.ts";
import type { RingPool } from "./xdp-rings.ts";

/** What the kernel holds, as last written: map → key hex → value hex. */
export interface XdpApplied {
  readonly maps: ReadonlyMap<XdpMapName, ReadonlyMap<string, string>>;
  /** ring id → the content its block holds (unknown after a restart or a drift) */
  readonly ringIds: ReadonlyMap<number, string>;
}

export const emptyApplied = (): XdpApplied => ({ maps: new Map(), ringIds: new Map() });

export interface XdpUpdate {
  readonly ops: MapOp[];
  readonly applied: XdpApplied;
  /** ring slots written */
  readonly ringSlots: number;
}

const KEYED: readonly XdpMapName[] = ["node_names", "svc_names", "nodes", "tx_ports"];
const ZERO_NODE = new Array(28).fill("00").join(" ");

export function planXdpUpdate(
  applied: XdpApplied,
  desired: XdpDesired,
  config: XdpConfig,
  pool: RingPool,
  now: number,
  pin: (map: XdpMapName) => string,
): XdpUpdate {
  const ops: MapOp[] = [];
  const next = new Map<XdpMapName, ReadonlyMap<string, string>>();
  const old = (m: XdpMapName) => applied.maps.get(m) ?? new Map<string, string>();
  const put = (m: XdpMapName, key: string, value: string) => {
    if (old(m).get(key) !== value) ops.push({ op: "update", map: pin(m), key, value });
  };
  const cfg = encodeConfig(config);
  put("config", encodeU32(0), cfg);
  next.set("config", new Map([[encodeU32(0), cfg]]));
  const wanted: Record<string, ReadonlyMap<string, string>> = {
    node_names: desired.nodeNames,
    svc_names: desired.svcNames,
    nodes: desired.nodes,
    tx_ports: desired.txPorts,
  };
  for (const m of KEYED) {
    const want = wanted[m]!;
    for (const [k, v] of want) put(m, k, v);
    next.set(m, want); // rendered fresh each pass: not copied
  }
  const ids = assignRingIds(applied, desired);
  let ringSlots = 0;
  const refs = new Map<number, string>();
  for (const [id, key] of ids.byId) {
    const ring = desired.rings.get(key)!;
    const placed = pool.place(key, ring.slots, now);
    for (const k of placed.writes)
      ops.push({
        op: "update",
        map: pin("rings"),
        key: encodeU32(placed.base + k),
        value: encodeU32(ring.slots[k]!),
      });
    ringSlots += placed.writes.length;
    refs.set(id, encodeRingRef(placed.base, ring.slots.length));
  }
  const ringIds = new Map<string, string>();
  for (const [id, value] of refs) {
    ringIds.set(encodeU32(id), value);
    put("ring_ids", encodeU32(id), value);
  }
  const idOf = (key: string | undefined) => (key === undefined ? 0 : ids.byContent.get(key)!);
  const src = desired.srcRanges;
  const zones = new Map([...desired.zoneRings].map(([k, ring]) => [k, encodeU32(idOf(ring))]));
  for (const [k, v] of src) put("src_ranges", k, v);
  for (const [k, v] of zones) put("zone_rings", k, v);
  const vips = new Map<string, string>();
  for (const [k, v] of desired.vips) {
    const value = encodeVipValue({
      listener: v.listener,
      service: v.service,
      ringId: idOf(v.ring),
      flags: v.flags,
    });
    vips.set(k, value);
    put("vips", k, value);
  }
  // removals: the VIPs first, then what only they used
  const drop = (m: XdpMapName, keep: ReadonlyMap<string, string>) => {
    for (const k of old(m).keys()) if (!keep.has(k)) ops.push({ op: "delete", map: pin(m), key: k });
  };
  drop("vips", vips);
  drop("src_ranges", src);
  drop("zone_rings", zones);
  drop("ring_ids", ringIds);
  drop("tx_ports", desired.txPorts);
  drop("svc_names", desired.svcNames);
  drop("node_names", desired.nodeNames);
  // array elements cannot be deleted: a node that left is written back to zero
  for (const k of old("nodes").keys())
    if (!desired.nodes.has(k)) ops.push({ op: "update", map: pin("nodes"), key: k, value: ZERO_NODE });
  for (const key of [...pool.keys()]) if (!desired.rings.has(key)) pool.retire(key, now);
  next.set("vips", vips);
  next.set("src_ranges", src);
  next.set("zone_rings", zones);
  next.set("ring_ids", ringIds);
  return { ops, applied: { maps: next, ringIds: ids.byId }, ringSlots };
}

/** Each wanted ring content → a ring id (see the head comment). */
function assignRingIds(
  applied: XdpApplied,
  desired: XdpDesired,
): { byId: Map<number, string>; byContent: Map<string, number> } {
  // old id → the contents its entries (vips and zone_rings) want now (undefined: the entry
  // is gone or has no ring), and content → the old ids of entries that want it
  const wantedOf = new Map<number, Set<string | undefined>>();
  const candidates = new Map<string, number[]>();
  const visit = (id: number, want: string | undefined) => {
    if (id === 0) return;
    const set = wantedOf.get(id) ?? new Set<string | undefined>();
    wantedOf.set(id, set);
    set.add(want);
    if (want === undefined) return;
    const list = candidates.get(want);
    if (!list) candidates.set(want, [id]);
    else if (list[list.length - 1] !== id) list.push(id);
  };
  for (const [k, v] of applied.maps.get("vips") ?? []) visit(hexU32(v, 8), desired.vips.get(k)?.ring);
  for (const [k, v] of applied.maps.get("zone_rings") ?? []) visit(hexU32(v, 0), desired.zoneRings.get(k));
  const byId = new Map<number, string>();
  const byContent = new Map<string, number>();
  const existing = new Set<number>(wantedOf.keys());
  for (const k of applied.maps.get("ring_ids")?.keys() ?? []) existing.add(hexU32(k, 0));
  let fresh = 1;
  for (const key of desired.rings.keys()) {
    // an id already holding this content keeps it (entries that left it are rewritten);
    // an id is swapped to it only when every entry naming the id wants it
    const free = (c: number) => !byId.has(c);
    const list = candidates.get(key) ?? [];
    let id =
      list.find((c) => free(c) && applied.ringIds.get(c) === key) ??
      list.find((c) => free(c) && [...wantedOf.get(c)!].every((w) => w === undefined || w === key));
    if (id === undefined) {
      while (existing.has(fresh) || byId.has(fresh)) fresh++;
      if (fresh >= XDP_LIMITS.ringIds)
        throw new RangeError(
          `more than ${XDP_LIMITS.ringIds - 1} XDP ring ids in use (distinct Maglev tables)`,
        );
      id = fresh;
    }
    byId.set(id, key);
    byContent.set(key, id);
  }
  return { byId, byContent };
}

/** a little-endian u32 at byte `at` of a "aa bb cc …" hex value */
function hexU32(value: string, at: number): number {
  const byte = (i: number) => Number.parseInt(value.slice(3 * (at + i), 3 * (at + i) + 2), 16);
  return (byte(0) | (byte(1) << 8) | (byte(2) << 16) | (byte(3) << 24)) >>> 0;
}
