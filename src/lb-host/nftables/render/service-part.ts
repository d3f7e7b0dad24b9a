/**
 * One Service's share of passlb's table: its source-range sets, its dispatch entries, the
 * slot tables (node mark per Maglev slot) its listeners need, and its listener chains. Pure;
 * desired-state.ts assembles the parts and names the slot maps, so a chain's rules are
 * built only once the names of the maps they use are known.
 *
 * Rules (docs/dataplane-nftables.md "What is in the table"; issue 6):
 *   - per listener and VIP family one chain, reached by one `dispatch` verdict-map lookup on
 *     VIP . protocol . port (kube-proxy's nftables pattern, landscape.md §2.4);
 *   - `loadBalancerSourceRanges`: sources outside the list are dropped; a family with no
 *     listed range drops everything of that family (the list is an allow-list);
 *   - established flows stay on their node while it is live (GCP's TCP default): TCP by
 *     the flow table (flow-map.ts: a SYN replaces its tuple's entry, every other packet
 *     follows it), UDP and SCTP by the conntrack mark, copied to the packet mark;
 *   - new flows: `jhash` of the 5-tuple (of the client address under ClientIP affinity)
 *     mod M picks a slot of the listener's Maglev table, which maps to the node's mark; the
 *     mark is stored in conntrack (and, TCP, as the flow's entry);
 *   - per Service one named counter, counted in each of its listener chains after the
 *     source-range check (packets and bytes towards the Service's nodes, issue 9);
 *   - zonal affinity: a client in a zone's `clientCIDRs` uses that zone's table while it
 *     exists (forwarding-state.ts builds it only while the zone has a healthy member).
 * A table built over members that lack an address of the chain's family is rebuilt over
 * the members that have one (same seed and size): a slot must route somewhere.
 *
 * Does not: assign node marks (node-marks.ts), name slot maps (slot-maps.ts), render text.
 */
import type { ListenerForwarding, ServiceForwarding } from "../../../forwarding/forwarding-state.ts";
import { type MaglevTable, maglevTable, NO_BACKEND } from "../../../forwarding/maglev.ts";
import { intervalDecl, intervalElements } from "./interval-sets.ts";
import {
  FAMS,
  type Fam,
  familyName,
  formatMark,
  ipKey,
  type NftSet,
  safeName,
  slotContentKey,
} from "./nft-state.ts";

/** The marks per slot of one table and family, and their content key. */
export interface SlotContent {
  readonly contentKey: string;
  readonly marks: Uint32Array;
}

export interface ChainSpec {
  readonly name: string;
  /** content keys of the slot maps the rules use, in order */
  readonly refs: readonly string[];
  readonly build: (mapNames: readonly string[]) => string[];
  /** what the rules depend on besides the map names: the zone sets and table sizes used */
  readonly shape: string;
  /** the map names the chain was last built with (set by desired-state.ts) */
  built?: readonly string[];
}

export interface ServicePart {
  readonly sets: readonly NftSet[];
  readonly dispatch: readonly (readonly [Fam, string, string])[];
  readonly contents: readonly SlotContent[];
  readonly chains: readonly ChainSpec[];
  /** the Service's named counter (every packet that passed its source ranges) */
  readonly counter: string;
}

/** Slot contents remembered per table object and family while the node marks stay the same. */
export type SlotMemo = WeakMap<MaglevTable, Map<Fam, { epoch: string; content: SlotContent | undefined }>>;

export interface PartContext {
  readonly canon: (address: string) => string | undefined;
  /** `${zone}/${fam}` → the zone's interval set (non-empty sets only) */
  readonly zoneSet: ReadonlyMap<string, string>;
  readonly nodeMarks: Readonly<Record<Fam, ReadonlyMap<string, number>>>;
  /** a string that changes whenever a family's node → mark assignment does */
  readonly epoch: Readonly<Record<Fam, string>>;
  readonly seed: number;
  readonly memo: SlotMemo | undefined;
}

export function listenerChainName(service: string, protocol: string, port: number, fam: Fam): string {
  return `svc_${safeName(service.replace("/", "."))}_${protocol.toLowerCase()}${port}_${fam}`;
}

/** The hash expression of a listener chain (landscape.md §4.5: jhash … mod M). */
export function hashExpression(fam: Fam, clientOnly: boolean, size: number, seed: number): string {
  const ip = ipKey(fam);
  const fields = clientOnly ? `${ip} saddr` : `${ip} saddr . th sport . ${ip} daddr . th dport`;
  return `jhash ${fields} mod ${size} seed ${formatMark(seed)}`;
}

export function servicePart(f: ServiceForwarding, ctx: PartContext): ServicePart {
  const { seed } = ctx;
  const plan = f.plan;
  const restricted = plan.sourceRanges.length > 0;
  const sets: NftSet[] = [];
  const dispatch: [Fam, string, string][] = [];
  const contents: SlotContent[] = [];
  const chains: ChainSpec[] = [];
  const clientOnly = plan.sessionAffinity.type === "ClientIP";
  const counter = serviceCounterName(plan.service);
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
      const slotsOf = (t: MaglevTable) => slotContent(l, t, fam, ctx);
      const global = slotsOf(l.table);
      const zoneRefs: { set: string; content: SlotContent; size: number }[] = [];
      for (const [zone, table] of [...l.zoneTables].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
        const set = ctx.zoneSet.get(`${zone}/${fam}`);
        const content = slotsOf(table);
        if (set !== undefined && content !== undefined) zoneRefs.push({ set, content, size: table.size });
      }
      const used = global === undefined ? [] : [...zoneRefs.map((z) => z.content), global];
      contents.push(...used);
      const ip = ipKey(fam);
      chains.push({
        name: chain,
        refs: used.map((c) => c.contentKey),
        shape: chainShape(zoneRefs, global === undefined ? undefined : l.table.size),
        build: (mapNames) => {
          const rules: string[] = [];
          if (restricted) rules.push(`${ip} saddr != @${srcName} drop`);
          rules.push(`counter name ${counter}`);
          if (global === undefined) {
            rules.push("drop");
            return rules;
          }
          // TCP: a packet that is not a SYN may come with its flow's mark (the flow table's
          // `follow` chain, flow-map.ts): it keeps it while that node lives. Then, as for UDP
          // and SCTP, the conntrack mark. The hash goes to the packet mark first and is then
          // copied to conntrack: a packet conntrack has no entry for (the untracked SYN, or a
          // packet judged invalid) is still marked and forwarded (`ct mark set` on such a
          // packet does nothing; reading `ct mark` would end the rule).
          if (l.protocol === "TCP")
            rules.push("tcp flags & (syn | ack) != syn meta mark @live ct mark set meta mark accept");
          rules.push("ct mark @live meta mark set ct mark accept");
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
  return { sets, dispatch, contents, chains, counter };
}

function chainShape(zoneRefs: readonly { set: string; size: number }[], size: number | undefined): string {
  let out = size === undefined ? "-" : String(size);
  for (const z of zoneRefs) out += `,${z.set}:${z.size}`;
  return out;
}

/**
 * The part of a Service whose plan is the one `old` was built from and whose forwarding
 * differs only in who is healthy — every chain keeps its zone sets and table sizes, only
 * slot contents change (a node's health flip under eTP Cluster changes every Service on
 * that node set this way) — made from `old`: new slot contents and chain refs, the same
 * sets, dispatch entries, counter and chain rules (the chain `build` of `old` gives the
 * same text for the same map names). Undefined when anything else would change: then
 * servicePart builds it anew. Same result as `servicePart(f, ctx)`.
 */
export function reslotPart(
  old: ServicePart,
  oldForwarding: ServiceForwarding,
  f: ServiceForwarding,
  ctx: PartContext,
): ServicePart | undefined {
  if (oldForwarding.plan !== f.plan || oldForwarding.listeners.length !== f.listeners.length)
    return undefined;
  const contents: SlotContent[] = [];
  const chains: ChainSpec[] = [];
  let i = 0;
  for (const fam of FAMS) {
    if (!f.plan.vips.some((v) => v.family === familyName(fam))) continue;
    for (const l of f.listeners) {
      const spec = old.chains[i++];
      if (!spec) return undefined;
      const global = slotContent(l, l.table, fam, ctx);
      const zoneRefs: { set: string; content: SlotContent; size: number }[] = [];
      if (l.zoneTables.size > 0)
        for (const [zone, table] of [...l.zoneTables].sort((a, b) => (a[0] < b[0] ? -1 : 1))) {
          const set = ctx.zoneSet.get(`${zone}/${fam}`);
          const content = slotContent(l, table, fam, ctx);
          if (set !== undefined && content !== undefined) zoneRefs.push({ set, content, size: table.size });
        }
      if (chainShape(zoneRefs, global === undefined ? undefined : l.table.size) !== spec.shape)
        return undefined;
      const used = global === undefined ? [] : [...zoneRefs.map((z) => z.content), global];
      contents.push(...used);
      chains.push({ ...spec, refs: used.map((c) => c.contentKey) });
    }
  }
  if (i !== old.chains.length) return undefined;
  return { sets: old.sets, dispatch: old.dispatch, contents, chains, counter: old.counter };
}

/** The named counter of a Service (`svc_<ns>.<name>`). */
export const serviceCounterName = (service: string): string => `svc_${safeName(service.replace("/", "."))}`;

/** Marks per slot for one table and family; undefined when the table has no backend. A
 * node's mark depends only on its address, so the result is remembered per table object
 * while the family's node → mark assignment (`epoch`) stays the same. */
function slotContent(
  l: ListenerForwarding,
  table: MaglevTable,
  fam: Fam,
  ctx: PartContext,
): SlotContent | undefined {
  const epoch = ctx.epoch[fam];
  const nodeMarks = ctx.nodeMarks[fam];
  const memo = ctx.memo?.get(table)?.get(fam);
  if (memo && memo.epoch === epoch) return memo.content;
  const byIndex = table.backends.map((n) => nodeMarks.get(n) ?? -1);
  let t = table;
  let routableMarks = byIndex;
  if (byIndex.includes(-1)) {
    const routable = l.backends.filter((b) => nodeMarks.has(b.node) && table.backends.includes(b.node));
    t = maglevTable({
      backends: routable.map((b) => ({ name: b.node, weight: b.weight })),
      size: t.size,
      seed: ctx.seed,
    });
    routableMarks = t.backends.map((n) => nodeMarks.get(n)!);
  }
  let content: SlotContent | undefined;
  if (t.backends.length > 0) {
    const out = new Uint32Array(t.size);
    for (let k = 0; k < t.size; k++) {
      const i = t.slots[k]!;
      out[k] = i === NO_BACKEND ? 0 : routableMarks[i]!;
    }
    content = { contentKey: slotContentKey(out), marks: out };
  }
  if (ctx.memo) {
    const perFam = ctx.memo.get(table) ?? new Map();
    perFam.set(fam, { epoch, content });
    ctx.memo.set(table, perFam);
  }
  return content;
}
