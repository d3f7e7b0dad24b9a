/**
 * desiredNftState: forwarding state (forwarding-state.ts) in, the NftState passlb's table
 * must hold out. Pure; the previous state is an input so that node marks and slot-map names
 * stay stable across passes and across a restart that adopted the kernel's table.
 *
 * Rules (DESIGN.md "Data path"; issue 6):
 *   - per Service listener and VIP family one chain, reached by one `dispatch` verdict-map
 *     lookup on VIP . protocol . port (kube-proxy's nftables pattern, landscape.md §2.4);
 *   - `loadBalancerSourceRanges`: sources outside the list are dropped; a family with no
 *     listed range drops everything of that family (the list is an allow-list);
 *   - established flows: a conntrack mark that names a live node is copied to the packet
 *     mark and the flow stays on that node; "live" means the node is a member of some plan
 *     (health does not break established flows, as GCP's TCP default);
 *   - new flows: `jhash` of the 5-tuple (or of the client address under ClientIP affinity)
 *     mod M picks a slot of the listener's Maglev table, which maps to the node's mark; the
 *     mark is stored in conntrack;
 *   - zonal affinity: a client whose source is in a zone's `clientCIDRs` uses that zone's
 *     table while it exists (forwarding-state only builds it while the zone has a healthy
 *     member); everyone else uses the global table;
 *   - slot maps are shared by every listener whose table has the same contents; a table
 *     whose contents change reuses a map that is no longer needed as it was (the closest
 *     one), so a health change edits only the slots that moved.
 * A table built over members that lack an address of the chain's family is rebuilt over
 * the members that have one (same seed and size): a slot must route somewhere.
 *
 * Does not: render text (render-ruleset.ts), choose policy or health (forwarding-state.ts).
 */

import { type Cidr, canonicalIp, cidrRange, formatCidr, parseCidr } from "../../net/ip.ts";
import type { ListenerForwarding, ServiceForwarding } from "../forwarding-state.ts";
import { type MaglevTable, maglevTable, NO_BACKEND } from "../maglev.ts";
import {
  chainOf,
  type Fam,
  formatMark,
  MARK_INDEX_LIMIT,
  markFor,
  type NftChain,
  type NftSet,
  type NftState,
  safeName,
  slotContentKey,
} from "./nft-state.ts";

export interface ZoneConfig {
  readonly name: string;
  readonly clientCIDRs: readonly string[];
}

export interface DesiredInput {
  readonly table: string;
  readonly seed: number;
  readonly forwardings: readonly ServiceForwarding[];
  readonly zones: readonly ZoneConfig[];
  readonly previous: NftState;
  /** memo across passes (like PlanCache): optional, never changes the result */
  readonly cache?: DesiredCache;
}

/** Per-table slot marks, remembered by table identity and the marks of its backends. */
export interface DesiredCache {
  readonly referrers: WeakMap<MaglevTable, Map<Fam, { epoch: string; ref: Referrer | undefined }>>;
  readonly parts: WeakMap<ServiceForwarding, { context: string; part: ServicePart }>;
  readonly chains: Map<string, { spec: ChainSpec; names: string; chain: NftChain }>;
}

export const createDesiredCache = (): DesiredCache => ({
  referrers: new WeakMap(),
  parts: new WeakMap(),
  chains: new Map(),
});

const FAMS: readonly Fam[] = [4, 6];
const familyName = (fam: Fam) => (fam === 4 ? "IPv4" : "IPv6");
const ipKey = (fam: Fam) => (fam === 4 ? "ip" : "ip6");
const SLOT_MAP_DECL = "typeof numgen inc mod 2 : meta mark;";
const MAX_REUSE_CANDIDATES = 16;

export const PREROUTING_BASE = "type filter hook prerouting priority mangle; policy accept;";

export function listenerChainName(service: string, protocol: string, port: number, fam: Fam): string {
  return `svc_${safeName(service.replace("/", "."))}_${protocol.toLowerCase()}${port}_${fam}`;
}

/** The hash expression of a listener chain (landscape.md §4.5: jhash … mod M). */
export function hashExpression(fam: Fam, clientOnly: boolean, size: number, seed: number): string {
  const ip = ipKey(fam);
  const fields = clientOnly ? `${ip} saddr` : `${ip} saddr . th sport . ${ip} daddr . th dport`;
  return `jhash ${fields} mod ${size} seed ${formatMark(seed)}`;
}

interface Referrer {
  readonly contentKey: string;
  readonly marks: Uint32Array;
}

export function desiredNftState(input: DesiredInput): NftState {
  const { previous, seed } = input;
  const sets = new Map<string, NftSet>();
  const chains = new Map<string, NftChain>();

  // node marks: keep what the previous state (or the adopted kernel table) assigned
  const addressMarks = { 4: new Map<string, number>(), 6: new Map<string, number>() };
  const nodeMarks = { 4: new Map<string, number>(), 6: new Map<string, number>() };
  const canonical = new Map<string, string | undefined>();
  const canon = (a: string) => {
    if (!canonical.has(a)) canonical.set(a, canonicalIp(a));
    return canonical.get(a);
  };
  for (const fam of FAMS) {
    const nodeAddress = new Map<string, string>();
    for (const f of input.forwardings)
      for (const m of f.plan.members) {
        if (nodeAddress.has(m.node)) continue;
        const a = m.addresses[familyName(fam)];
        const c = a === undefined ? undefined : canon(a);
        if (c !== undefined) nodeAddress.set(m.node, c);
      }
    const wanted = new Set(nodeAddress.values());
    const before = previous.sets.get(`nexthops${fam}`)?.elements ?? new Map<string, string>();
    const used = new Set<number>();
    for (const [markText, addr] of before) {
      if (wanted.has(addr) && !addressMarks[fam].has(addr)) {
        const mark = Number(markText) >>> 0;
        addressMarks[fam].set(addr, mark);
        used.add(mark);
      }
    }
    let next = 1;
    for (const addr of [...wanted].sort()) {
      if (addressMarks[fam].has(addr)) continue;
      while (used.has(markFor(fam, next))) next++;
      if (next >= MARK_INDEX_LIMIT) throw new RangeError("desiredNftState: out of node marks");
      const mark = markFor(fam, next);
      used.add(mark);
      addressMarks[fam].set(addr, mark);
    }
    for (const [node, addr] of nodeAddress) nodeMarks[fam].set(node, addressMarks[fam].get(addr)!);
  }
  const epoch = { 4: markEpoch(nodeMarks[4]), 6: markEpoch(nodeMarks[6]) };
  const live = new Map<string, string>();
  for (const fam of FAMS) {
    const hops = new Map<string, string>();
    const sorted = [...addressMarks[fam]].sort((a, b) => a[1] - b[1]);
    for (const [addr, mark] of sorted) {
      hops.set(formatMark(mark), addr);
      live.set(formatMark(mark), "");
    }
    sets.set(`nexthops${fam}`, {
      name: `nexthops${fam}`,
      decl: `type mark : ${fam === 4 ? "ipv4_addr" : "ipv6_addr"};`,
      isMap: true,
      elements: hops,
    });
  }
  sets.set("live", { name: "live", decl: "type mark;", isMap: false, elements: sortedMap(live) });

  // zones: one interval set per zone and family
  const zoneSet = new Map<string, string>(); // `${zone}/${fam}` → set name (non-empty sets only)
  for (const z of [...input.zones].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    for (const fam of FAMS) {
      const elements = intervalElements(z.clientCIDRs, fam);
      if (elements.size === 0) continue;
      const name = `zone_${safeName(z.name)}_${fam}`;
      sets.set(name, { name, decl: intervalDecl(fam), isMap: false, elements });
      zoneSet.set(`${z.name}/${fam}`, name);
    }
  }

  // listeners: chains, dispatch entries and the slot tables they need (remembered per
  // forwarding object while marks, zones and seed stay the same)
  const dispatch = { 4: new Map<string, string>(), 6: new Map<string, string>() };
  const contents = new Map<string, Uint32Array>();
  const context = `${epoch[4]}|${epoch[6]}|${[...zoneSet].join(",")}|${seed}`;
  const parts: ServicePart[] = [];
  for (const f of [...input.forwardings].sort((a, b) => (a.service < b.service ? -1 : 1))) {
    const memo = input.cache?.parts.get(f);
    let part: ServicePart;
    if (memo && memo.context === context) part = memo.part;
    else {
      part = servicePart(f, { canon, zoneSet, nodeMarks, epoch, seed, cache: input.cache });
      input.cache?.parts.set(f, { context, part });
    }
    parts.push(part);
    for (const set of part.sets) sets.set(set.name, set);
    for (const [fam, key, value] of part.dispatch) dispatch[fam].set(key, value);
    for (const [key, marks] of part.contents) contents.set(key, marks);
  }

  const names = assignSlotMaps(contents, previous);
  for (const [key, name] of names) {
    const marks = contents.get(key)!;
    const before = previous.sets.get(name);
    if (before?.contentKey === key && before.slots && sameArray(before.slots, marks)) {
      sets.set(name, before);
      continue;
    }
    const elements = new Map<string, string>();
    for (let slot = 0; slot < marks.length; slot++) elements.set(String(slot), formatMark(marks[slot]!));
    sets.set(name, { name, decl: SLOT_MAP_DECL, isMap: true, elements, slots: marks, contentKey: key });
  }
  for (const fam of FAMS)
    sets.set(`dispatch${fam}`, {
      name: `dispatch${fam}`,
      decl: `type ${fam === 4 ? "ipv4_addr" : "ipv6_addr"} . inet_proto . inet_service : verdict;`,
      isMap: true,
      elements: sortedMap(dispatch[fam]),
    });
  for (const part of parts)
    for (const c of part.chains) {
      const used = c.refs.map((k) => names.get(k)!);
      const key = used.join(",");
      const memo = input.cache?.chains.get(c.name);
      if (memo && memo.spec === c && memo.names === key) {
        chains.set(c.name, memo.chain);
        continue;
      }
      const chain = chainOf(c.name, c.build(used));
      input.cache?.chains.set(c.name, { spec: c, names: key, chain });
      chains.set(c.name, chain);
    }
  if (input.cache)
    for (const name of input.cache.chains.keys()) if (!chains.has(name)) input.cache.chains.delete(name);
  chains.set(
    "prerouting",
    chainOf(
      "prerouting",
      FAMS.map((fam) => `${ipKey(fam)} daddr . meta l4proto . th dport vmap @dispatch${fam}`),
      PREROUTING_BASE,
    ),
  );
  return { table: input.table, sets: sortedMap(sets), chains };
}

interface ChainSpec {
  readonly name: string;
  /** content keys of the slot maps the rules use, in order */
  readonly refs: readonly string[];
  readonly build: (mapNames: readonly string[]) => string[];
}

interface ServicePart {
  readonly sets: readonly NftSet[];
  readonly dispatch: readonly (readonly [Fam, string, string])[];
  readonly contents: readonly (readonly [string, Uint32Array])[];
  readonly chains: readonly ChainSpec[];
}

interface PartContext {
  readonly canon: (address: string) => string | undefined;
  readonly zoneSet: ReadonlyMap<string, string>;
  readonly nodeMarks: Readonly<Record<Fam, ReadonlyMap<string, number>>>;
  readonly epoch: Readonly<Record<Fam, string>>;
  readonly seed: number;
  readonly cache: DesiredCache | undefined;
}

/** One Service's share of the table: its source-range sets, dispatch entries, slot tables
 * and listener chains (rules wait for the slot maps' names). */
function servicePart(f: ServiceForwarding, ctx: PartContext): ServicePart {
  const { seed } = ctx;
  const plan = f.plan;
  const restricted = plan.sourceRanges.length > 0;
  const sets: NftSet[] = [];
  const dispatch: [Fam, string, string][] = [];
  const contents: [string, Uint32Array][] = [];
  const chains: ChainSpec[] = [];
  for (const fam of FAMS) {
    const vips = plan.vips.filter((v) => v.family === familyName(fam)).map((v) => ctx.canon(v.address));
    if (vips.length === 0) continue;
    const srcName = `src_${safeName(plan.service.replace("/", "."))}_${fam}`;
    if (restricted)
      sets.push({
        name: srcName,
        decl: intervalDecl(fam),
        isMap: false,
        elements: intervalElements(plan.sourceRanges, fam),
      });
    for (const l of f.listeners) {
      const chain = listenerChainName(plan.service, l.protocol, l.port, fam);
      for (const vip of vips)
        if (vip !== undefined)
          dispatch.push([fam, `${vip} . ${l.protocol.toLowerCase()} . ${l.port}`, `goto ${chain}`]);
      const clientOnly = plan.sessionAffinity.type === "ClientIP";
      const ref = (t: MaglevTable) =>
        referrerFor(l, t, fam, ctx.nodeMarks[fam], ctx.epoch[fam], seed, ctx.cache);
      const global = ref(l.table);
      const zoneRefs: { set: string; ref: Referrer; size: number }[] = [];
      for (const [zone, table] of [...l.zoneTables].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
        const set = ctx.zoneSet.get(`${zone}/${fam}`);
        const r = ref(table);
        if (set !== undefined && r !== undefined) zoneRefs.push({ set, ref: r, size: table.size });
      }
      const used = global === undefined ? [] : [...zoneRefs.map((z) => z.ref), global];
      for (const r of used) contents.push([r.contentKey, r.marks]);
      const ip = ipKey(fam);
      chains.push({
        name: chain,
        refs: used.map((r) => r.contentKey),
        build: (mapNames) => {
          const rules: string[] = [];
          if (restricted) rules.push(`${ip} saddr != @${srcName} drop`);
          if (global === undefined) {
            rules.push("drop");
            return rules;
          }
          rules.push("ct mark @live meta mark set ct mark accept");
          // The hash goes to the packet mark first and is then copied to conntrack: a packet
          // conntrack has no entry for (judged invalid, as the ACK of a flow whose replies
          // bypass this host — DSR on a shared segment — or untracked) is still marked and
          // forwarded, statelessly, to the node the hash gives (`ct mark set` on such a
          // packet does nothing; reading `ct mark` would end the rule).
          zoneRefs.forEach((z, i) => {
            rules.push(
              `${ip} saddr @${z.set} meta mark set ${hashExpression(fam, clientOnly, z.size, seed)} map @${mapNames[i]} ct mark set meta mark accept`,
            );
          });
          rules.push(
            `meta mark set ${hashExpression(fam, clientOnly, l.table.size, seed)} map @${mapNames[zoneRefs.length]} ct mark set meta mark accept`,
          );
          return rules;
        },
      });
    }
  }
  return { sets, dispatch, contents, chains };
}

function markEpoch(nodeMarks: ReadonlyMap<string, number>): string {
  return [...nodeMarks]
    .map(([n, m]) => `${n}=${m}`)
    .sort()
    .join(",");
}

/** Marks per slot for one table and family; undefined when the table has no backend.
 * A node's mark depends only on its address, so the result is remembered per table object
 * for as long as the node → mark assignment (`epoch`) stays the same. */
function referrerFor(
  l: ListenerForwarding,
  table: MaglevTable,
  fam: Fam,
  nodeMarks: ReadonlyMap<string, number>,
  epoch: string,
  seed: number,
  cache: DesiredCache | undefined,
): Referrer | undefined {
  const memo = cache?.referrers.get(table)?.get(fam);
  if (memo && memo.epoch === epoch) return memo.ref;
  const byIndex = table.backends.map((n) => nodeMarks.get(n) ?? -1);
  let t = table;
  let routableMarks = byIndex;
  if (byIndex.includes(-1)) {
    const routable = l.backends.filter((b) => nodeMarks.has(b.node) && table.backends.includes(b.node));
    t = maglevTable({
      backends: routable.map((b) => ({ name: b.node, weight: b.weight })),
      size: t.size,
      seed,
    });
    routableMarks = t.backends.map((n) => nodeMarks.get(n)!);
  }
  let ref: Referrer | undefined;
  if (t.backends.length > 0) {
    const out = new Uint32Array(t.size);
    for (let k = 0; k < t.size; k++) {
      const i = t.slots[k]!;
      out[k] = i === NO_BACKEND ? 0 : routableMarks[i]!;
    }
    ref = { contentKey: slotContentKey(out), marks: out };
  }
  if (cache) {
    const perFam = cache.referrers.get(table) ?? new Map();
    perFam.set(fam, { epoch, ref });
    cache.referrers.set(table, perFam);
  }
  return ref;
}

/**
 * Names for slot-map contents: a previous map with the same contents keeps its name; a new
 * content takes over the closest previous map of the same size that nobody else keeps (so
 * the update edits only differing slots); otherwise a fresh `m<n>`.
 */
function assignSlotMaps(contents: ReadonlyMap<string, Uint32Array>, previous: NftState): Map<string, string> {
  const prevMarks = new Map<string, { marks: Uint32Array; key: string }>();
  const byKey = new Map<string, string>();
  for (const s of previous.sets.values()) {
    if (!/^m\d+$/.test(s.name)) continue;
    let marks = s.slots;
    if (!marks) {
      const arr = new Uint32Array(s.elements.size);
      let ok = true;
      for (const [k, v] of s.elements) {
        const slot = Number(k);
        if (!(slot >= 0 && slot < arr.length)) ok = false;
        else arr[slot] = Number(v) >>> 0;
      }
      if (!ok) continue;
      marks = arr;
    }
    const key = s.contentKey ?? slotContentKey(marks);
    prevMarks.set(s.name, { marks, key });
    if (!byKey.has(key)) byKey.set(key, s.name);
  }
  const names = new Map<string, string>();
  const taken = new Set<string>();
  const keys = [...contents.keys()].sort();
  for (const key of keys) {
    const name = byKey.get(key);
    if (name !== undefined && sameArray(prevMarks.get(name)!.marks, contents.get(key)!)) {
      names.set(key, name);
      taken.add(name);
    }
  }
  const allNames = new Set(previous.sets.keys());
  let counter = 1;
  for (const key of keys) {
    if (names.has(key)) continue;
    const want = contents.get(key)!;
    let best: string | undefined;
    let bestDiff = Number.POSITIVE_INFINITY;
    let tried = 0;
    for (const [name, { marks }] of prevMarks) {
      if (taken.has(name) || marks.length !== want.length) continue;
      if (tried++ >= MAX_REUSE_CANDIDATES) break;
      let diff = 0;
      for (let k = 0; k < marks.length; k++) if (marks[k] !== want[k]) diff++;
      if (diff < bestDiff) {
        bestDiff = diff;
        best = name;
      }
    }
    if (best === undefined) {
      while (allNames.has(`m${counter}`) || taken.has(`m${counter}`)) counter++;
      best = `m${counter}`;
    }
    names.set(key, best);
    taken.add(best);
  }
  return names;
}

function sameArray(a: Uint32Array, b: Uint32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

const intervalDecl = (fam: Fam) => `type ${fam === 4 ? "ipv4_addr" : "ipv6_addr"}; flags interval;`;

/** Canonical, non-overlapping prefixes of one family (nft refuses overlapping intervals):
 * prefixes covered by another are dropped; a host prefix is written as a plain address. */
export function intervalElements(cidrs: readonly string[], fam: Fam): Map<string, string> {
  const parsed: Cidr[] = [];
  for (const text of cidrs) {
    const c = parseCidr(text.includes("/") ? text : `${text}/${fam === 4 ? 32 : 128}`, true);
    if (c && c.family === familyName(fam)) parsed.push(c);
  }
  parsed.sort((a, b) => (a.base < b.base ? -1 : a.base > b.base ? 1 : a.prefix - b.prefix));
  const kept: Cidr[] = [];
  let lastEnd = -1n;
  for (const c of parsed) {
    const r = cidrRange(c);
    if (r.last <= lastEnd) continue; // inside the previous kept prefix
    kept.push(c);
    lastEnd = r.last;
  }
  const out = new Map<string, string>();
  for (const c of kept) {
    const text = formatCidr(c);
    out.set(c.prefix === (fam === 4 ? 32 : 128) ? text.slice(0, text.indexOf("/")) : text, "");
  }
  return out;
}

function sortedMap<V>(m: ReadonlyMap<string, V>): Map<string, V> {
  return new Map([...m].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
}
