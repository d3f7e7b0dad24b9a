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
 *   an RCU barrier, when a ring block was retired (xdp-rings.ts)
 * Entries name a ring group (xdp-maps.ts: the Services behind one backend selection, whose
 * content a health flip changes), and each group keeps its ring id across passes: a group's
 * new content goes into another block and its one `ring_ids` write swaps it for every VIP
 * sharing it — no VIP entry is looked at. A group without an id (a new one, or every group
 * after a restart or a drift, when the ids' groups are unknown) takes over an id when
 * every VIP and zone entry that named it now wants that group, else a fresh one, and the
 * entries that want it are rewritten. Groups of equal content share one block.
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
import type { XdpDesired, XdpVip } from "./xdp-maps.ts";
import type { RingPool } from "./xdp-rings.ts";

/** What the kernel holds, as last written: map → key hex → value hex. */
export interface XdpApplied {
  readonly maps: ReadonlyMap<XdpMapName, ReadonlyMap<string, string>>;
  /** ring id → the ring group it holds (xdp-maps.ts; unknown after a restart or a drift) */
  readonly ringIds: ReadonlyMap<number, string>;
  /** ring id → the content key its block holds */
  readonly contents?: ReadonlyMap<number, string>;
  /** the rendered entry maps the vips, src_ranges and zone_rings contents were made from */
  readonly from?: {
    readonly vips: XdpDesired["vips"];
    readonly srcRanges: XdpDesired["srcRanges"];
    readonly zoneRings: XdpDesired["zoneRings"];
  };
}

export const emptyApplied = (): XdpApplied => ({ maps: new Map(), ringIds: new Map() });

export interface XdpUpdate {
  readonly ops: MapOp[];
  readonly applied: XdpApplied;
  /** ring slots written */
  readonly ringSlots: number;
  /** the ops end with an RCU barrier: once they ran, the blocks retired are free
   * (RingPool.settle) */
  readonly barrier: boolean;
}

/** the array-of-maps the barrier op updates, and the map it sets as its element */
export interface XdpBarrier {
  readonly map: string;
  readonly inner: string;
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
  barrier?: XdpBarrier,
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
  const contents = new Map<number, string>();
  for (const [id, group] of ids.byId) {
    const ring = desired.rings.get(group)!;
    contents.set(id, ring.key);
    // the same content under the same id, still in its block: nothing to place (one
    // Service's change under eTP Local leaves the other 9 999 rings alone)
    const kept = applied.contents?.get(id) === ring.key && pool.find(ring.key) !== undefined;
    const oldRef = kept ? old("ring_ids").get(encodeU32(id)) : undefined;
    if (oldRef !== undefined) {
      refs.set(id, oldRef);
      continue;
    }
    const placed = pool.place(ring.key, ring.slots, now, group);
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
  // the entries, unless they are the very ones last written and every group kept its id
  // (a health flip under eTP Cluster): then not one of the VIPs is looked at
  const same =
    applied.from?.vips === desired.vips &&
    applied.from.srcRanges === desired.srcRanges &&
    applied.from.zoneRings === desired.zoneRings &&
    sameIds(ids.byId, applied.ringIds);
  const { src, zones, vips } = same
    ? { src: old("src_ranges"), zones: old("zone_rings"), vips: old("vips") }
    : entryValues(desired, ids.byGroup);
  // removals: the VIPs first, then what only they used
  const drop = (m: XdpMapName, keep: ReadonlyMap<string, string>) => {
    for (const k of old(m).keys()) if (!keep.has(k)) ops.push({ op: "delete", map: pin(m), key: k });
  };
  if (!same) {
    for (const [k, v] of src) put("src_ranges", k, v);
    for (const [k, v] of zones) put("zone_rings", k, v);
    for (const [k, v] of vips) put("vips", k, v);
    drop("vips", vips);
    drop("src_ranges", src);
    drop("zone_rings", zones);
  }
  drop("ring_ids", ringIds);
  drop("tx_ports", desired.txPorts);
  drop("svc_names", desired.svcNames);
  drop("node_names", desired.nodeNames);
  // array elements cannot be deleted: a node that left is written back to zero
  for (const k of old("nodes").keys())
    if (!desired.nodes.has(k)) ops.push({ op: "update", map: pin("nodes"), key: k, value: ZERO_NODE });
  const wantedContents = new Set<string>();
  for (const ring of desired.rings.values()) wantedContents.add(ring.key);
  let retired = false;
  for (const key of [...pool.keys()]) if (!wantedContents.has(key) && pool.retire(key, now)) retired = true;
  // nothing points at the retired blocks after the ops above: one barrier, and they are free
  if (retired && barrier) ops.push({ op: "barrier", map: barrier.map, inner: barrier.inner });
  next.set("vips", vips);
  next.set("src_ranges", src);
  next.set("zone_rings", zones);
  next.set("ring_ids", ringIds);
  return {
    ops,
    applied: {
      maps: next,
      ringIds: ids.byId,
      contents,
      from: { vips: desired.vips, srcRanges: desired.srcRanges, zoneRings: desired.zoneRings },
    },
    ringSlots,
    barrier: retired && barrier !== undefined,
  };
}

/** the encoded values of the vips, src_ranges and zone_rings entries */
function entryValues(desired: XdpDesired, byGroup: ReadonlyMap<string, number>) {
  const idOf = (group: string | undefined) => (group === undefined ? 0 : byGroup.get(group)!);
  const zones = new Map<string, string>();
  for (const [k, ring] of desired.zoneRings) zones.set(k, encodeU32(idOf(ring)));
  const vips = new Map<string, string>();
  for (const [k, v] of desired.vips) vips.set(k, vipValue(v, idOf(v.ring)));
  return { src: desired.srcRanges, zones, vips };
}

function sameIds(a: ReadonlyMap<number, string>, b: ReadonlyMap<number, string>): boolean {
  if (a.size !== b.size) return false;
  for (const [id, group] of a) if (b.get(id) !== group) return false;
  return true;
}

/** encoded vips values, per entry object and ring id (entries are kept across passes) */
const vipValues = new WeakMap<XdpVip, { ringId: number; value: string }>();

function vipValue(v: XdpVip, ringId: number): string {
  const known = vipValues.get(v);
  if (known?.ringId === ringId) return known.value;
  const value = encodeVipValue({ listener: v.listener, service: v.service, ringId, flags: v.flags });
  vipValues.set(v, { ringId, value });
  return value;
}

/** Each wanted ring group → a ring id (see the head comment). */
function assignRingIds(
  applied: XdpApplied,
  desired: XdpDesired,
): { byId: Map<number, string>; byGroup: Map<string, number> } {
  const byId = new Map<number, string>();
  const byGroup = new Map<string, number>();
  // an id already holding a group keeps it: a health flip changes the group's content, and
  // its id is swapped to the new block (entries that left the group are rewritten)
  for (const [id, group] of applied.ringIds)
    if (desired.rings.has(group) && !byGroup.has(group)) {
      byId.set(id, group);
      byGroup.set(group, id);
    }
  const missing = [...desired.rings.keys()].filter((g) => !byGroup.has(g));
  if (missing.length === 0) return { byId, byGroup };
  // the rest (after a restart or a drift the ids' groups are unknown): an id is taken over
  // by a group when every entry naming it wants that group; otherwise a fresh id
  const { wantedOf, candidates } = entriesByRingId(applied, desired);
  const existing = new Set<number>(wantedOf.keys());
  for (const k of applied.maps.get("ring_ids")?.keys() ?? []) existing.add(hexU32(k, 0));
  for (const id of applied.ringIds.keys()) existing.add(id);
  let fresh = 1;
  for (const group of missing) {
    const free = (c: number) => !byId.has(c);
    const list = candidates.get(group) ?? [];
    let id = list.find((c) => free(c) && [...wantedOf.get(c)!].every((w) => w === undefined || w === group));
    if (id === undefined) {
      while (existing.has(fresh) || byId.has(fresh)) fresh++;
      if (fresh >= XDP_LIMITS.ringIds)
        throw new RangeError(
          `more than ${XDP_LIMITS.ringIds - 1} XDP ring ids in use (distinct Maglev tables)`,
        );
      id = fresh;
    }
    byId.set(id, group);
    byGroup.set(group, id);
  }
  return { byId, byGroup };
}

/** old ring id → the groups its entries (vips and zone_rings) want now (undefined: the
 * entry is gone or has no ring), and group → the old ids of entries that want it */
function entriesByRingId(applied: XdpApplied, desired: XdpDesired) {
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
  return { wantedOf, candidates };
}

/** a little-endian u32 at byte `at` of a "aa bb cc …" hex value */
function hexU32(value: string, at: number): number {
  const byte = (i: number) => Number.parseInt(value.slice(3 * (at + i), 3 * (at + i) + 2), 16);
  return (byte(0) | (byte(1) << 8) | (byte(2) << 16) | (byte(3) << 24)) >>> 0;
}
