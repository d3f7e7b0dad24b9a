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
import type { ServiceForwarding } from "../../forwarding/forwarding-state.ts";
import { type MaglevTable, maglevTable, NO_BACKEND } from "../../forwarding/maglev.ts";
import { canonicalIp, parseCidr } from "../../net/ip.ts";
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

  release(name: string): void {
    const i = this.byName.get(name);
    if (i === undefined) return;
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

/** a plan's VIP keys per family and listener: a plan object is reused while it does not
 * change (lb-forwardings.ts), so are its keys */
const planKeys = new WeakMap<object, Map<string, string[]>[]>();

const FAMILIES: readonly { fam: Family; name: "IPv4" | "IPv6" }[] = [
  { fam: 4, name: "IPv4" },
  { fam: 6, name: "IPv6" },
];

export function renderXdpMaps(input: XdpRenderInput): XdpDesired {
  const { indexes } = input;
  const vips = new Map<string, XdpVip>();
  const rings = new Map<string, RingContent>();
  const srcRanges = new Map<string, string>();
  const zoneRings = new Map<string, string>();
  const live = new Map<string, string>(); // "node/fam" → address
  const seenMembers = new Set<unknown>();
  const nodeIndex = (node: string, fam: Family, address: string): number => {
    const name = `${node}/${fam}`;
    live.set(name, address);
    const known = indexes.nodes.get(name);
    if (known !== undefined) return known;
    const i = indexes.nodes.allocate(name);
    indexes.gens.set(i, ++indexes.lastGen);
    return i;
  };
  for (const f of input.forwarding) {
    const plan = f.plan;
    const service = indexes.services.allocate(plan.service);
    // Services on the same nodes share one members list (lb-forwardings.ts): walk each once
    if (!seenMembers.has(plan.members)) {
      seenMembers.add(plan.members);
      for (const m of plan.members)
        for (const { fam, name } of FAMILIES) {
          const a = m.addresses[name];
          if (a !== undefined) nodeIndex(m.node, fam, a);
        }
    }
    const known = planKeys.get(plan) ?? [new Map(), new Map()];
    planKeys.set(plan, known);
    for (const { fam, name } of FAMILIES) {
      const addresses = plan.vips.filter((v) => v.family === name).map((v) => canonicalVip(v.address));
      if (addresses.length === 0) continue;
      const keysOf = known[fam === 4 ? 0 : 1]!;
      for (const l of f.listeners) {
        const proto = l.protocol === "TCP" ? PROTO.TCP : l.protocol === "UDP" ? PROTO.UDP : undefined;
        if (proto === undefined) continue;
        const ringOf = (t: MaglevTable) => ringContent(input, l.backends, t, fam, nodeIndex);
        const global = ringOf(l.table);
        if (global) rings.set(global.key, global);
        let flags = 0;
        if (plan.sourceRanges.length > 0) flags |= VIP_FLAGS.sourceRanges;
        if (plan.sessionAffinity.type === "ClientIP") flags |= VIP_FLAGS.clientIp;
        const zoneEntries: [string, string][] = [];
        if (global)
          for (const [zone, table] of l.zoneTables) {
            const content = ringOf(table);
            const cidrs = input.zones.find((z) => z.name === zone)?.clientCIDRs ?? [];
            if (!content || cidrs.length === 0) continue;
            rings.set(content.key, content);
            for (const c of cidrs) zoneEntries.push([c, content.key]);
          }
        if (zoneEntries.length > 0) flags |= VIP_FLAGS.zones;
        let keys = keysOf.get(l.listener);
        if (!keys) {
          keys = addresses.flatMap((address) =>
            address === undefined ? [] : [encodeVipKey({ family: fam, proto, port: l.port, address })],
          );
          keysOf.set(l.listener, keys);
        }
        for (const key of keys) {
          const listener = indexes.listeners.allocate(key);
          vips.set(key, { key, listener, service, ring: global?.key, flags });
          if (flags & VIP_FLAGS.sourceRanges) addRanges(srcRanges, listener, plan.sourceRanges, fam, "01");
          for (const [cidr, ring] of zoneEntries) addRanges(zoneRings, listener, [cidr], fam, ring);
        }
      }
    }
  }
  const liveServices = new Set(input.forwarding.map((f) => f.plan.service));
  return {
    vips,
    rings,
    srcRanges,
    zoneRings,
    ...nodeMaps(input, live),
    liveNodes: new Set(live.keys()),
    liveServices,
  };
}

function nodeMaps(input: XdpRenderInput, live: ReadonlyMap<string, string>) {
  const nodes = new Map<string, string>();
  const nodeNames = new Map<string, string>();
  const txPorts = new Map<string, string>();
  for (const [name, index] of input.indexes.nodes.byName) {
    const gen = input.indexes.gens.get(index) ?? 1;
    const address = live.get(name);
    const hop = address === undefined ? undefined : input.nextHops.get(canonicalIp(address) ?? address);
    const flags = (address !== undefined ? NODE_FLAGS.live : 0) | (hop?.xdp ? NODE_FLAGS.xdp : 0);
    nodes.set(
      encodeU32(index),
      encodeNode({
        ifindex: hop?.ifindex ?? 0,
        flags,
        gen,
        mtu: hop?.mtu ?? 0,
        dmac: hop?.dmac ?? "00:00:00:00:00:00",
        smac: hop?.smac ?? "00:00:00:00:00:00",
      }),
    );
    nodeNames.set(encodeU32(index), encodeName(name));
    if (hop?.xdp) txPorts.set(encodeU32(hop.ifindex), encodeU32(hop.ifindex));
  }
  const svcNames = new Map<string, string>();
  for (const [service, index] of input.indexes.services.byName)
    svcNames.set(encodeU32(index), encodeName(service));
  return { nodes, nodeNames, svcNames, txPorts };
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
