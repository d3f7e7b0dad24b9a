/**
 * The XDP program's map contents, from the same forwarding state the nftables renderer
 * consumes (forwarding/forwarding-state.ts): one `vips` entry per VIP . protocol . port, a
 * Maglev ring per distinct slot content (the very `MaglevTable` the nft slot maps are built
 * from, node names replaced by node indexes), node entries with their next hop, the source
 * ranges and zone rings as LPM entries. Pure: the next hops, the indexes kept from earlier
 * passes and the ring pool arrive as arguments.
 *
 * Rules shared with the nftables path (lb-host/nftables/render/service-part.ts):
 *   - a listener without backends drops (ring size 0);
 *   - a table whose members lack an address of the VIP's family is rebuilt over the members
 *     that have one, same seed and size (maglevTable, not a second implementation);
 *   - loadBalancerSourceRanges is an allow-list per family;
 *   - ClientIP affinity hashes the client address only;
 *   - a node stays `live` (its flows follow it) while it is a member of any plan.
 * Only TCP and UDP listeners get `vips` entries: SCTP goes to the stack (nftables).
 * Zonal affinity: a client address in a zone's clientCIDRs uses the zone's ring; where two
 * zones' CIDRs overlap the longest prefix wins (nft: the first zone by name).
 *
 * Does not: allocate ring blocks (xdp-rings.ts), diff against the kernel (xdp-plan.ts), or
 * resolve next hops (xdp-next-hops.ts).
 */
import type { ListenerForwarding, ServiceForwarding } from "../../forwarding/forwarding-state.ts";
import { type MaglevTable, maglevTable, NO_BACKEND } from "../../forwarding/maglev.ts";
import { canonicalIp, parseCidr } from "../../net/ip.ts";
import type { LoadBalancerPlan } from "../../plan/load-balancer-plan.ts";
import {
  encodeLpmKey,
  encodeName,
  encodeNode,
  encodeU32,
  encodeVipKey,
  type Family,
  NODE_FLAGS,
  PROTO,
  VIP_FLAGS,
  XDP_LIMITS,
} from "./xdp-layout.ts";

/** How this host reaches one node address: on its segment (XDP forwards) or not. */
export interface NextHop {
  /** XDP can forward: same segment, neighbour resolved; false → XDP_PASS to nftables */
  readonly xdp: boolean;
  readonly ifindex: number;
  readonly mtu: number;
  readonly dmac: string;
  readonly smac: string;
}

export interface ZoneCidrs {
  readonly name: string;
  readonly clientCIDRs: readonly string[];
}

/** Names → small indexes, lowest free first; an index keeps its name until released. */
export class IndexPool {
  readonly byName = new Map<string, number>();
  readonly #used = new Set<number>();
  #low = 0;
  readonly limit: number;
  readonly what: string;

  constructor(limit: number, what: string) {
    this.limit = limit;
    this.what = what;
  }

  get(name: string): number | undefined {
    return this.byName.get(name);
  }

  /** Takes `index` for `name` (adopting what the kernel holds). */
  set(name: string, index: number): void {
    this.byName.set(name, index);
    this.#used.add(index);
  }

  allocate(name: string): number {
    const found = this.byName.get(name);
    if (found !== undefined) return found;
    while (this.#used.has(this.#low)) this.#low++;
    if (this.#low >= this.limit)
      throw new RangeError(`the XDP program holds at most ${this.limit} ${this.what}`);
    this.set(name, this.#low);
    return this.#low;
  }

  /** how many names were released so far (an index named before a release may now name
   * another) */
  releases = 0;

  release(name: string): void {
    const i = this.byName.get(name);
    if (i === undefined) return;
    this.releases++;
    this.byName.delete(name);
    this.#used.delete(i);
    if (i < this.#low) this.#low = i;
  }
}

/** Indexes that must stay stable across passes and restarts (flows and counters name them). */
export interface XdpIndexes {
  /** "node/4" | "node/6" → node index */
  readonly nodes: IndexPool;
  /** node index → generation: a fresh one, from one counter, whenever an index is given to a
   * name, so a flow entry of an earlier holder never matches */
  readonly gens: Map<number, number>;
  /** the last generation handed out */
  lastGen: number;
  /** Service → its counter index */
  readonly services: IndexPool;
  /** vips key hex → listener id (the LPM keys' prefix) */
  readonly listeners: IndexPool;
}

export const emptyIndexes = (): XdpIndexes => ({
  nodes: new IndexPool(XDP_LIMITS.nodes, "nodes"),
  gens: new Map(),
  lastGen: 0,
  services: new IndexPool(XDP_LIMITS.services, "Services"),
  listeners: new IndexPool(XDP_LIMITS.listeners, "listeners"),
});

/** One ring: the node index per slot. */
export interface RingContent {
  readonly key: string;
  readonly slots: Uint32Array;
}

export interface XdpVip {
  readonly key: string;
  readonly listener: number;
  readonly service: number;
  /** the global ring (undefined: no backend, the listener drops) */
  readonly ring: string | undefined;
  readonly flags: number;
}

export interface XdpDesired {
  readonly vips: ReadonlyMap<string, XdpVip>;
  readonly rings: ReadonlyMap<string, RingContent>;
  /** nodes key hex → value hex (every allocated index, live or not) */
  readonly nodes: ReadonlyMap<string, string>;
  readonly nodeNames: ReadonlyMap<string, string>;
  readonly svcNames: ReadonlyMap<string, string>;
  readonly srcRanges: ReadonlyMap<string, string>;
  /** zone LPM key hex → ring content key */
  readonly zoneRings: ReadonlyMap<string, string>;
  /** devmap: egress ifindexes */
  readonly txPorts: ReadonlyMap<string, string>;
  /** "node/fam" of every member of a plan, and the Services rendered (pruneIndexes) */
  readonly liveNodes: ReadonlySet<string>;
  readonly liveServices: ReadonlySet<string>;
}

export interface XdpRenderInput {
  readonly forwarding: readonly ServiceForwarding[];
  readonly zones: readonly ZoneCidrs[];
  /** by node address (canonical text); absent → not forwardable by XDP */
  readonly nextHops: ReadonlyMap<string, NextHop>;
  readonly seed: number;
  readonly indexes: XdpIndexes;
  /** ring contents remembered per table object (equal tables are shared across Services) */
  readonly memo?: WeakMap<MaglevTable, Map<Family, RingContent | undefined>>;
  /** each Service's entries and the ring groups' keys from the last pass */
  readonly renderMemo?: XdpRenderMemo;
}

const canonical = new Map<string, string | undefined>();
/** canonicalIp, memoised: the same VIPs are canonicalised on every pass */
function canonicalVip(address: string): string | undefined {
  if (canonical.has(address)) return canonical.get(address);
  if (canonical.size > 1 << 18) canonical.clear();
  const c = canonicalIp(address);
  canonical.set(address, c);
  return c;
}

const FAMILIES: readonly { fam: Family; name: "IPv4" | "IPv6" }[] = [
  { fam: 4, name: "IPv4" },
  { fam: 6, name: "IPv6" },
];

/** What one Service contributed to the maps last pass, kept while its plan object and the
 * ring groups its listeners name stay the same (a health flip under eTP Cluster changes
 * neither: the shared ring moves under its group, and no Service is rendered again). */
interface ServiceEntries {
  readonly name: string;
  readonly service: number;
  /** the listener pool's release count when it was rendered */
  readonly releases: number;
  /** the zones' CIDRs it was rendered with */
  readonly zones: string;
  readonly groups: readonly (string | undefined)[];
  readonly vips: readonly XdpVip[];
  readonly srcRanges: readonly (readonly [string, string])[];
  readonly zoneRings: readonly (readonly [string, string])[];
}

/** The entry maps assembled from every Service's entries (kept whole while none changed). */
interface EntryMaps {
  readonly vips: ReadonlyMap<string, XdpVip>;
  readonly srcRanges: ReadonlyMap<string, string>;
  readonly zoneRings: ReadonlyMap<string, string>;
  readonly liveServices: ReadonlySet<string>;
}

/** What the renderer keeps across passes (XdpDataplane holds one). */
export interface XdpRenderMemo {
  /** each Service's entries from the last pass, by plan object */
  readonly services: WeakMap<LoadBalancerPlan, ServiceEntries>;
  /** selection group → family (and zone) → the ring group's key string */
  readonly groupKeys: Map<string, Map<number | string, string>>;
  /** the last pass's Services' entries, in order, and the maps made of them */
  last?: { readonly entries: readonly ServiceEntries[]; readonly maps: EntryMaps };
}

export const emptyRenderMemo = (): XdpRenderMemo => ({ services: new WeakMap(), groupKeys: new Map() });

export function renderXdpMaps(input: XdpRenderInput): XdpDesired {
  const pass = new RenderPass(input);
  const memo = input.renderMemo;
  const last = memo?.last;
  const zones = JSON.stringify(input.zones);
  const entries = input.forwarding.map((f) => pass.service(f, zones));
  // a health flip under eTP Cluster keeps every Service's entries: the maps stay as they are
  const same =
    last !== undefined &&
    last.entries.length === entries.length &&
    last.entries.every((e, i) => e === entries[i]);
  const maps = same ? last.maps : entryMaps(entries);
  if (memo) memo.last = { entries, maps };
  pass.prune();
  return { ...maps, rings: pass.rings, ...nodeMaps(input, pass.live), liveNodes: new Set(pass.live.keys()) };
}

function entryMaps(entries: readonly ServiceEntries[]): EntryMaps {
  const vips = new Map<string, XdpVip>();
  const srcRanges = new Map<string, string>();
  const zoneRings = new Map<string, string>();
  const liveServices = new Set<string>();
  for (const e of entries) {
    liveServices.add(e.name);
    for (const v of e.vips) vips.set(v.key, v);
    for (const [k, v] of e.srcRanges) srcRanges.set(k, v);
    for (const [k, v] of e.zoneRings) zoneRings.set(k, v);
  }
  return { vips, srcRanges, zoneRings, liveServices };
}

/** One render: the rings and node addresses it met, the Services' entries (kept or new). */
class RenderPass {
  readonly rings = new Map<string, RingContent>();
  /** "node/fam" → address */
  readonly live = new Map<string, string>();
  readonly #input: XdpRenderInput;
  readonly #seenMembers = new Set<unknown>();
  readonly #seenGroups = new Map<string, RingContent>();
  /** a group's key string is kept across passes, so kept entries compare by identity */
  readonly #groupKeys: Map<string, Map<number | string, string>>;

  constructor(input: XdpRenderInput) {
    this.#input = input;
    this.#groupKeys = input.renderMemo?.groupKeys ?? new Map();
  }

  /** a Service's entries: last pass's while its plan, ring groups and indexes are the same */
  service(f: ServiceForwarding, zones: string): ServiceEntries {
    const { indexes, renderMemo } = this.#input;
    const plan = f.plan;
    const service = indexes.services.allocate(plan.service);
    // Services on the same nodes share one members list (lb-forwardings.ts): walk each once
    if (!this.#seenMembers.has(plan.members)) {
      this.#seenMembers.add(plan.members);
      for (const m of plan.members)
        for (const { fam, name } of FAMILIES) {
          const a = m.addresses[name];
          if (a !== undefined) this.nodeIndex(m.node, fam, a);
        }
    }
    const groups = serviceGroups(this.#input, f, this.ringOf);
    const kept = renderMemo?.services.get(plan);
    if (
      kept &&
      kept.zones === zones &&
      sameGroups(kept.groups, groups) &&
      sameIndexes(kept, service, indexes)
    )
      return kept;
    const entries = serviceEntries(this.#input, f, service, groups, zones);
    renderMemo?.services.set(plan, entries);
    return entries;
  }

  readonly nodeIndex = (node: string, fam: Family, address: string): number => {
    const { indexes } = this.#input;
    const name = `${node}/${fam}`;
    this.live.set(name, address);
    const known = indexes.nodes.get(name);
    if (known !== undefined) return known;
    const i = indexes.nodes.allocate(name);
    indexes.gens.set(i, ++indexes.lastGen);
    return i;
  };

  /** a ring's group key (its content's key when the selection has no group), or undefined
   * when no backend has an address of the family */
  readonly ringOf = (
    l: ListenerForwarding,
    table: MaglevTable,
    fam: Family,
    zone: string,
  ): string | undefined => {
    const content = ringContent(this.#input, l.backends, table, fam, this.nodeIndex);
    if (!content) return undefined;
    if (l.group !== undefined) {
      let keys = this.#groupKeys.get(l.group);
      if (!keys) {
        keys = new Map();
        this.#groupKeys.set(l.group, keys);
      }
      const slot = zone === "" ? fam : `${fam}|${zone}`;
      let key = keys.get(slot);
      if (key === undefined) {
        key = `${l.group}|${slot}`;
        keys.set(slot, key);
      }
      const first = this.#seenGroups.get(key);
      if (!first) {
        this.#seenGroups.set(key, content);
        this.rings.set(key, content);
        return key;
      }
      // a Service that kept an older forwarding (lb-forwardings.ts) may hold the group's
      // earlier table: it gets its own ring, by content
      if (first === content || first.key === content.key) return key;
    }
    this.rings.set(content.key, content);
    return content.key;
  };

  /** forget the keys of groups no Service names any more */
  prune(): void {
    if (this.#groupKeys.size > 2 * this.#seenGroups.size + 64) this.#groupKeys.clear();
  }
}

/** The ring group of every (family, listener, zone) a Service's entries name, in the order
 * serviceEntries reads them (undefined: none in that family; zones: "zone=group"). */
function serviceGroups(
  input: XdpRenderInput,
  f: ServiceForwarding,
  ringOf: (l: ListenerForwarding, table: MaglevTable, fam: Family, zone: string) => string | undefined,
): (string | undefined)[] {
  const out: (string | undefined)[] = [];
  for (const { fam, name } of FAMILIES) {
    if (!f.plan.vips.some((v) => v.family === name)) continue;
    for (const l of f.listeners) {
      if (l.protocol === "SCTP") continue;
      const global = ringOf(l, l.table, fam, "");
      out.push(global);
      if (global === undefined) continue;
      for (const [zone, table] of l.zoneTables) {
        const cidrs = input.zones.find((z) => z.name === zone)?.clientCIDRs ?? [];
        if (cidrs.length === 0) continue;
        const ring = ringOf(l, table, fam, zone);
        if (ring !== undefined) out.push(`${zone}=${ring}`);
      }
      out.push(""); // the listener's end: zones present cannot shift into the next one
    }
  }
  return out;
}

/** the indexes kept entries name are still theirs (a Service that left and came back with
 * the same plan object got new ones) */
function sameIndexes(kept: ServiceEntries, service: number, indexes: XdpIndexes): boolean {
  if (kept.service !== service) return false;
  if (kept.releases === indexes.listeners.releases) return true;
  return kept.vips.every((v) => indexes.listeners.get(v.key) === v.listener);
}

function sameGroups(a: readonly (string | undefined)[], b: readonly (string | undefined)[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** One Service's vips, source-range and zone-ring entries, naming the rings `groups` lists. */
function serviceEntries(
  input: XdpRenderInput,
  f: ServiceForwarding,
  service: number,
  groups: readonly (string | undefined)[],
  zones: string,
): ServiceEntries {
  const { indexes } = input;
  const plan = f.plan;
  const vips: XdpVip[] = [];
  const src = new Map<string, string>();
  const zoneRings = new Map<string, string>();
  let at = 0;
  for (const { fam, name } of FAMILIES) {
    const addresses = plan.vips.filter((v) => v.family === name).map((v) => canonicalVip(v.address));
    if (addresses.length === 0) continue;
    for (const l of f.listeners) {
      if (l.protocol === "SCTP") continue;
      const proto = l.protocol === "TCP" ? PROTO.TCP : PROTO.UDP;
      const global = groups[at++];
      const zoneEntries: [string, string][] = [];
      for (let g = global === undefined ? "" : groups[at++]; g !== ""; g = groups[at++]) {
        const [zone, ring] = splitOnce(g!, "=");
        for (const c of input.zones.find((z) => z.name === zone)?.clientCIDRs ?? [])
          zoneEntries.push([c, ring]);
      }
      let flags = 0;
      if (plan.sourceRanges.length > 0) flags |= VIP_FLAGS.sourceRanges;
      if (plan.sessionAffinity.type === "ClientIP") flags |= VIP_FLAGS.clientIp;
      if (zoneEntries.length > 0) flags |= VIP_FLAGS.zones;
      for (const address of addresses) {
        if (address === undefined) continue;
        const key = encodeVipKey({ family: fam, proto, port: l.port, address });
        const listener = indexes.listeners.allocate(key);
        vips.push({ key, listener, service, ring: global, flags });
        if (flags & VIP_FLAGS.sourceRanges) addRanges(src, listener, plan.sourceRanges, fam, "01");
        for (const [cidr, ring] of zoneEntries) addRanges(zoneRings, listener, [cidr], fam, ring);
      }
    }
  }
  return {
    name: plan.service,
    service,
    releases: indexes.listeners.releases,
    zones,
    groups,
    vips,
    srcRanges: [...src],
    zoneRings: [...zoneRings],
  };
}

function splitOnce(text: string, sep: string): [string, string] {
  const i = text.indexOf(sep);
  return [text.slice(0, i), text.slice(i + 1)];
}

function nodeMaps(input: XdpRenderInput, live: ReadonlyMap<string, string>) {
  const nodes = new Map<string, string>();
  const nodeNames = new Map<string, string>();
  const txPorts = new Map<string, string>();
  for (const [name, index] of input.indexes.nodes.byName) {
    const gen = input.indexes.gens.get(index) ?? 1;
    const address = live.get(name);
    const hop = address === undefined ? undefined : input.nextHops.get(canonicalVip(address) ?? address);
    const flags = (address !== undefined ? NODE_FLAGS.live : 0) | (hop?.xdp ? NODE_FLAGS.xdp : 0);
    nodes.set(encodeU32(index), nodeValue(flags, gen, hop));
    nodeNames.set(encodeU32(index), encodeName(name));
    if (hop?.xdp) txPorts.set(encodeU32(hop.ifindex), encodeU32(hop.ifindex));
  }
  const svcNames = new Map<string, string>();
  for (const [service, index] of input.indexes.services.byName)
    svcNames.set(encodeU32(index), encodeName(service));
  return { nodes, nodeNames, svcNames, txPorts };
}

const nodeValues = new Map<string, string>();
/** a `nodes` value, memoised: the same nodes are encoded again on every pass */
function nodeValue(flags: number, gen: number, hop: NextHop | undefined): string {
  const id = `${flags} ${gen} ${hop?.ifindex} ${hop?.mtu} ${hop?.dmac} ${hop?.smac}`;
  let value = nodeValues.get(id);
  if (value === undefined) {
    if (nodeValues.size > 1 << 16) nodeValues.clear();
    value = encodeNode({
      ifindex: hop?.ifindex ?? 0,
      flags,
      gen,
      mtu: hop?.mtu ?? 0,
      dmac: hop?.dmac ?? "00:00:00:00:00:00",
      smac: hop?.smac ?? "00:00:00:00:00:00",
    });
    nodeValues.set(id, value);
  }
  return value;
}

function addRanges(
  into: Map<string, string>,
  listener: number,
  cidrs: readonly string[],
  fam: Family,
  value: string,
): void {
  for (const text of cidrs) {
    const c = parseCidr(text, true);
    if (!c || c.family !== (fam === 4 ? "IPv4" : "IPv6")) continue;
    const bits = fam === 4 ? 32 : 128;
    const hexAddr = c.base.toString(16).padStart(bits / 4, "0");
    const address =
      fam === 4
        ? (hexAddr.match(/../g) ?? []).map((h) => Number.parseInt(h, 16)).join(".")
        : (hexAddr.match(/.{4}/g) ?? []).join(":");
    into.set(encodeLpmKey(listener, address, c.prefix), value);
  }
}

/** node indexes per slot of a table in one family; undefined without a routable backend */
function ringContent(
  input: XdpRenderInput,
  backends: ServiceForwarding["listeners"][number]["backends"],
  table: MaglevTable,
  fam: Family,
  nodeIndex: (node: string, fam: Family, address: string) => number,
): RingContent | undefined {
  const memo = input.memo?.get(table);
  if (memo?.has(fam)) return memo.get(fam);
  const name = fam === 4 ? "IPv4" : "IPv6";
  const address = new Map(backends.flatMap((b) => (b.addresses[name] ? [[b.node, b.addresses[name]]] : [])));
  let t = table;
  if (t.backends.some((n) => !address.has(n))) {
    const routable = backends.filter((b) => address.has(b.node) && table.backends.includes(b.node));
    t = maglevTable({
      backends: routable.map((b) => ({ name: b.node, weight: b.weight })),
      size: table.size,
      seed: input.seed,
    });
  }
  let content: RingContent | undefined;
  if (t.backends.length > 0) {
    const byIndex = t.backends.map((n) => nodeIndex(n, fam, address.get(n)!));
    const slots = new Uint32Array(t.size);
    for (let k = 0; k < t.size; k++) {
      const i = t.slots[k]!;
      slots[k] = i === NO_BACKEND ? 0 : byIndex[i]!;
    }
    content = { key: Buffer.from(slots.buffer).toString("base64"), slots };
  }
  if (input.memo) {
    const perFam = memo ?? new Map<Family, RingContent | undefined>();
    perFam.set(fam, content);
    input.memo.set(table, perFam);
  }
  return content;
}

/** Releases the indexes the last render did not use: nodes that are no longer members of
 * any plan (their flows then miss: the generation check), listeners and Services gone. */
export function pruneIndexes(indexes: XdpIndexes, desired: XdpDesired): void {
  for (const key of [...indexes.listeners.byName.keys()])
    if (!desired.vips.has(key)) indexes.listeners.release(key);
  for (const name of [...indexes.nodes.byName.keys()])
    if (!desired.liveNodes.has(name)) indexes.nodes.release(name);
  for (const name of [...indexes.services.byName.keys()])
    if (!desired.liveServices.has(name)) indexes.services.release(name);
}
