/**
 * desiredNftState: forwarding state (forwarding-state.ts) in, the NftState passlb's table
 * must hold out. Pure; the previous state is an input so that node marks and slot-map names
 * stay stable across passes and across a restart that adopted the kernel's table.
 *
 * Incremental by memo (like the planner's PlanCache): with a DesiredCache whose last
 * output is `previous`, a pass visits only the Services whose forwarding object changed —
 * it takes their old part out (sets, dispatch entries, slot contents, chains), puts the new
 * one in, renames slot maps for the contents that appeared, and reports the objects it
 * touched, so the diff (render-ruleset.ts) visits only those. Without a usable cache (first
 * pass, adoption, a pass whose transaction failed) it builds from nothing; both ways give
 * the same table. Node marks changing (a node address appearing or leaving) rebuilds every
 * Service's part, as every slot content depends on them.
 *
 * Layout and rules: service-part.ts (chains, dispatch, source ranges, zones), node-marks.ts,
 * slot-maps.ts (sharing and naming of slot maps), nft-state.ts (the objects).
 * Does not: render text (render-ruleset.ts), choose policy or health (forwarding-state.ts).
 */

import type { ServiceForwarding } from "../../../forwarding/forwarding-state.ts";
import { canonicalIp } from "../../../net/ip.ts";
import { intervalDecl, intervalElements } from "./interval-sets.ts";
import {
  chainOf,
  FAMS,
  type Fam,
  ipKey,
  type NftChain,
  type NftSet,
  type NftState,
  safeName,
  type Touched,
} from "./nft-state.ts";
import {
  assignNodeMarks,
  countMembers,
  createNodeAddressBook,
  keepIfEqual,
  NODE_COUNTER_MAP,
  type NodeMarks,
} from "./node-marks.ts";
import {
  type PartContext,
  reslotPart,
  type ServicePart,
  type SlotMemo,
  servicePart,
} from "./service-part.ts";
import { createSlotMapBook, dropContent, nameSlotMaps, slotMapName, takeContent } from "./slot-maps.ts";

export { hashExpression, listenerChainName } from "./service-part.ts";
export { intervalElements };

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
  /** memo across passes: optional, never changes the result */
  readonly cache?: DesiredCache;
}

export interface DesiredUpdate {
  readonly state: NftState;
  readonly touched: Touched | undefined;
}

export interface DesiredCache {
  base: Base | undefined;
  readonly slotMemo: SlotMemo;
}

export const createDesiredCache = (): DesiredCache => ({ base: undefined, slotMemo: new WeakMap() });

export const PREROUTING_BASE = "type filter hook prerouting priority mangle; policy accept;";
/** before conntrack (−200): the DSR SYN `notrack` chain */
export const UNTRACK_BASE = "type filter hook prerouting priority raw; policy accept;";
/** after the mark is set (mangle is −150); numeric, as the kernel prints it back */
export const COUNT_BASE = "type filter hook prerouting priority -140; policy accept;";

interface Base {
  output: NftState | undefined;
  readonly table: string;
  readonly seed: number;
  readonly zonesKey: string;
  readonly zoneSet: Map<string, string>;
  readonly services: Map<string, { forwarding: ServiceForwarding; part: ServicePart }>;
  readonly addresses: ReturnType<typeof createNodeAddressBook>;
  readonly slots: ReturnType<typeof createSlotMapBook>;
  readonly dispatch: Record<Fam, Map<string, string>>;
  context: string;
  marks: NodeMarks | undefined;
  /** Service counter name → number of parts naming it */
  readonly serviceCounters: Map<string, number>;
  counters: ReadonlySet<string>;
  sets: Map<string, NftSet>;
  chains: Map<string, NftChain>;
}

export function desiredNftState(input: DesiredInput): NftState {
  return desiredNftUpdate(input).state;
}

/**
 * One pass, in steps (each returns what it computes; those that change `base` say so):
 *   1. reusableBase — the cached base when its output is `previous`, else a fresh one;
 *   2. changedServices — the Services whose forwarding changed, appeared or left (none, on
 *      a reused base: `previous` is the answer);
 *   3. updateNodeMarks — the node marks, recomputed only when a node address came or went;
 *   4. servicesToRedo — the changed Services, or every one when the marks' epoch moved;
 *   5. reslottedParts — the parts that changed only in slot contents;
 *   6. takeOutOldParts — the old parts' objects out of `base`, and the dispatch entries taken;
 *   7. putInNewParts — the new parts in, the families whose dispatch changed;
 *   8. nameSlotMapsAndChains — slot map names, then the chains naming them;
 *   9. putDispatchSets — the dispatch and dsr sets of the families touched;
 *  10. namedCounters — the named counters, again when the marks or a rebuilt part can move them.
 */
export function desiredNftUpdate(input: DesiredInput): DesiredUpdate {
  const { base, reuse } = reusableBase(input);
  const pass: Pass = {
    input,
    base,
    incoming: incomingByService(input),
    touchedSets: new Set(),
    touchedChains: new Set(),
  };
  const changed = changedServices(pass);
  if (reuse && changed.length === 0) {
    if (input.cache) input.cache.base = base;
    base.sets = base.output!.sets as Map<string, NftSet>;
    base.chains = base.output!.chains as Map<string, NftChain>;
    return { state: base.output!, touched: { sets: pass.touchedSets, chains: pass.touchedChains } };
  }
  const moved = updateNodeMarks(pass, changed);
  const redo = servicesToRedo(pass, changed);
  const ctx = partContext(pass);
  const reslotted = reslottedParts(pass, redo, ctx);
  const dispatchOut = takeOutOldParts(pass, redo, reslotted);
  const { added, dispatchTouched } = putInNewParts(pass, redo, reslotted, ctx, dispatchOut);
  nameSlotMapsAndChains(pass, added);
  putDispatchSets(pass, dispatchOut, dispatchTouched);
  if (moved || reslotted.size < redo.length) base.counters = namedCounters(base);
  const state: NftState = {
    table: input.table,
    sets: base.sets,
    chains: base.chains,
    counters: base.counters,
  };
  base.output = state;
  if (input.cache) input.cache.base = base;
  return { state, touched: reuse ? { sets: pass.touchedSets, chains: pass.touchedChains } : undefined };
}

/** one pass's inputs, its base, and the sets and chains it touched so far */
interface Pass {
  readonly input: DesiredInput;
  readonly base: Base;
  readonly incoming: ReadonlyMap<string, ServiceForwarding>;
  readonly touchedSets: Set<string>;
  readonly touchedChains: Set<string>;
}

/** Step 1. The cache is emptied here and set again only when the pass completes. */
function reusableBase(input: DesiredInput): { base: Base; reuse: boolean } {
  const zonesKey = JSON.stringify(input.zones.map((z) => [z.name, z.clientCIDRs]));
  const cached = input.cache?.base;
  if (input.cache) input.cache.base = undefined;
  const reuse =
    cached?.output !== undefined &&
    cached.output === input.previous &&
    cached.table === input.table &&
    cached.seed === input.seed &&
    cached.zonesKey === zonesKey;
  if (!reuse) return { base: freshBase(input, zonesKey), reuse };
  cached.sets = new Map(cached.output!.sets);
  cached.chains = new Map(cached.output!.chains);
  return { base: cached, reuse };
}

function incomingByService(input: DesiredInput): Map<string, ServiceForwarding> {
  const incoming = new Map<string, ServiceForwarding>();
  for (const f of input.forwardings) incoming.set(f.service, f);
  return incoming;
}

/** Step 2: changed or new in `incoming` order, then those that left */
function changedServices({ base, incoming }: Pass): string[] {
  const changed: string[] = [];
  for (const [name, f] of incoming) if (base.services.get(name)?.forwarding !== f) changed.push(name);
  for (const name of base.services.keys()) if (!incoming.has(name)) changed.push(name);
  return changed;
}

/** Step 3: sets `base.marks` and puts the marks' sets; true when the marks were recomputed */
function updateNodeMarks(pass: Pass, changed: readonly string[]): boolean {
  const { base, incoming, input } = pass;
  let moved = base.marks === undefined;
  for (const name of changed) {
    const old = base.services.get(name);
    const f = incoming.get(name);
    if (old && f && old.forwarding.plan.members === f.plan.members) continue; // health moved
    if (old && countMembers(base.addresses, old.forwarding, -1)) moved = true;
    if (f && countMembers(base.addresses, f, 1)) moved = true;
  }
  const marks = moved ? assignNodeMarks(base.addresses, input.previous) : base.marks!;
  base.marks = marks;
  for (const s of marks.sets) putSet(base, s, pass.touchedSets);
  return moved;
}

/** Step 4: sorted; sets `base.context` to the marks' epoch (every slot content depends on it) */
function servicesToRedo({ base, incoming }: Pass, changed: readonly string[]): string[] {
  const marks = base.marks!;
  const context = `${marks.epoch[4]}|${marks.epoch[6]}`;
  const redo =
    context === base.context ? [...changed] : [...new Set([...base.services.keys(), ...incoming.keys()])];
  base.context = context;
  return redo.sort();
}

function partContext({ base, input }: Pass): PartContext {
  const marks = base.marks!;
  return {
    canon: canonicalIp,
    zoneSet: base.zoneSet,
    nodeMarks: marks.byNode,
    epoch: marks.epoch,
    seed: input.seed,
    memo: input.cache?.slotMemo,
  };
}

/** Step 5: a Service whose forwarding moved only in health (same plan, same chain shapes)
 * keeps its sets, dispatch entries, counter and chains; only its slot contents are exchanged */
function reslottedParts(
  { base, incoming }: Pass,
  redo: readonly string[],
  ctx: PartContext,
): Map<string, ServicePart> {
  const reslotted = new Map<string, ServicePart>();
  for (const name of redo) {
    const old = base.services.get(name);
    const f = incoming.get(name);
    const part = old && f && reslotPart(old.part, old.forwarding, f, ctx);
    if (part) reslotted.set(name, part);
  }
  return reslotted;
}

/** Step 6: the dispatch entries taken out, per family (put back unchanged they are no change) */
function takeOutOldParts(
  pass: Pass,
  redo: readonly string[],
  reslotted: ReadonlyMap<string, ServicePart>,
): Record<Fam, Map<string, string>> {
  const { base } = pass;
  const dispatchOut = { 4: new Map<string, string>(), 6: new Map<string, string>() };
  for (const name of redo) {
    const old = base.services.get(name);
    if (!old) continue;
    if (reslotted.has(name)) {
      for (const c of old.part.contents) dropContent(base.slots, c.contentKey);
      continue;
    }
    for (const s of old.part.sets) {
      base.sets.delete(s.name);
      pass.touchedSets.add(s.name);
    }
    for (const [fam, key, value] of old.part.dispatch)
      if (base.dispatch[fam].get(key) === value) {
        base.dispatch[fam].delete(key);
        dispatchOut[fam].set(key, value);
      }
    for (const c of old.part.contents) dropContent(base.slots, c.contentKey);
    const n = (base.serviceCounters.get(old.part.counter) ?? 1) - 1;
    if (n > 0) base.serviceCounters.set(old.part.counter, n);
    else base.serviceCounters.delete(old.part.counter);
    for (const c of old.part.chains) {
      base.chains.delete(c.name);
      pass.touchedChains.add(c.name);
    }
    base.services.delete(name);
  }
  return dispatchOut;
}

/** Step 7: the parts put in, in `redo` order, and the families whose dispatch gained or
 * changed an entry (an entry taken out and put back the same leaves `dispatchOut`) */
function putInNewParts(
  pass: Pass,
  redo: readonly string[],
  reslotted: ReadonlyMap<string, ServicePart>,
  ctx: PartContext,
  dispatchOut: Record<Fam, Map<string, string>>,
): { added: ServicePart[]; dispatchTouched: Set<Fam> } {
  const { base, incoming, input } = pass;
  const added: ServicePart[] = [];
  const dispatchTouched = new Set<Fam>();
  for (const name of redo) {
    const f = incoming.get(name);
    if (!f) continue;
    const again = reslotted.get(name);
    if (again) {
      base.services.set(name, { forwarding: f, part: again });
      added.push(again);
      for (const c of again.contents) takeContent(base.slots, c);
      continue;
    }
    const part = servicePart(f, ctx);
    base.services.set(name, { forwarding: f, part });
    added.push(part);
    for (const s of part.sets)
      putSet(base, keepIfEqual(input.previous.sets.get(s.name), s), pass.touchedSets);
    for (const [fam, key, value] of part.dispatch) {
      base.dispatch[fam].set(key, value);
      if (dispatchOut[fam].get(key) === value) dispatchOut[fam].delete(key);
      else dispatchTouched.add(fam);
    }
    for (const c of part.contents) takeContent(base.slots, c);
    base.serviceCounters.set(part.counter, (base.serviceCounters.get(part.counter) ?? 0) + 1);
  }
  return { added, dispatchTouched };
}

/** Step 8: slot maps named, then each added part's chains built on those names */
function nameSlotMapsAndChains(pass: Pass, added: readonly ServicePart[]): void {
  const { base, input } = pass;
  for (const name of nameSlotMaps(base.slots, base.sets)) pass.touchedSets.add(name);
  for (const part of added)
    for (const c of part.chains) {
      const names = c.refs.map((k) => slotMapName(base.slots, k));
      const kept = base.chains.get(c.name);
      // a reslotted chain whose maps kept their names: the same rules, nothing to do
      if (kept && c.built && sameNames(c.built, names)) continue;
      c.built = names;
      const chain = chainOf(c.name, c.build(names));
      const before = input.previous.chains.get(c.name);
      const same =
        before && before.rules !== null && before.hash === chain.hash && before.base === chain.base;
      base.chains.set(c.name, same ? before : chain);
      pass.touchedChains.add(c.name);
    }
}

/** Step 9: a family's dispatch and dsr sets, again when an entry came, changed or left */
function putDispatchSets(
  pass: Pass,
  dispatchOut: Record<Fam, ReadonlyMap<string, string>>,
  dispatchTouched: Set<Fam>,
): void {
  const { base, input } = pass;
  for (const fam of FAMS) if (dispatchOut[fam].size > 0) dispatchTouched.add(fam);
  for (const fam of dispatchTouched) {
    putSet(base, dispatchSet(fam, base.dispatch[fam], input.previous), pass.touchedSets);
    putSet(base, dsrSet(fam, base.dispatch[fam], input.previous), pass.touchedSets);
  }
}

/** Step 10: the node marks' counters and the Services'; the old set when equal */
function namedCounters(base: Base): ReadonlySet<string> {
  const counters = new Set([...base.marks!.counters, ...base.serviceCounters.keys()]);
  return sameSet(counters, base.counters) ? base.counters : counters;
}

function putSet(base: Base, s: NftSet, touched: Set<string>): void {
  if (base.sets.get(s.name) === s) return;
  base.sets.set(s.name, s);
  touched.add(s.name);
}

/** the TCP listeners of a family as `VIP . port` (the `untrack` chain's set) */
function dsrSet(fam: Fam, dispatch: ReadonlyMap<string, string>, previous: NftState): NftSet {
  const elements = new Map<string, string>();
  for (const key of [...dispatch.keys()].sort()) {
    const [vip, proto, port] = key.split(" . ");
    if (proto === "tcp") elements.set(`${vip} . ${port}`, "");
  }
  const s: NftSet = {
    name: `dsr${fam}`,
    decl: `type ${fam === 4 ? "ipv4_addr" : "ipv6_addr"} . inet_service;`,
    isMap: false,
    elements,
  };
  return keepIfEqual(previous.sets.get(s.name), s);
}

function dispatchSet(fam: Fam, elements: ReadonlyMap<string, string>, previous: NftState): NftSet {
  const s: NftSet = {
    name: `dispatch${fam}`,
    decl: `type ${fam === 4 ? "ipv4_addr" : "ipv6_addr"} . inet_proto . inet_service : verdict;`,
    isMap: true,
    elements: new Map(elements),
  };
  return keepIfEqual(previous.sets.get(s.name), s);
}

/** Nothing but the objects every table has: zone sets, empty dispatch maps, the hook. */
function freshBase(input: DesiredInput, zonesKey: string): Base {
  const sets = new Map<string, NftSet>();
  const zoneSet = new Map<string, string>();
  for (const z of [...input.zones].sort((a, b) => (a.name < b.name ? -1 : 1))) {
    for (const fam of FAMS) {
      const elements = intervalElements(z.clientCIDRs, fam);
      if (elements.size === 0) continue;
      const name = `zone_${safeName(z.name)}_${fam}`;
      sets.set(
        name,
        keepIfEqual(input.previous.sets.get(name), { name, decl: intervalDecl(fam), isMap: false, elements }),
      );
      zoneSet.set(`${z.name}/${fam}`, name);
    }
  }
  for (const fam of FAMS) sets.set(`dispatch${fam}`, dispatchSet(fam, new Map(), input.previous));
  const chains = new Map<string, NftChain>();
  // Replies may bypass this host (direct server return: nodes answer clients directly, on a
  // shared segment whose router is not the LB host as through encapsulation). Its conntrack
  // then sees only the client's packets, and the client's first ACK after a SYN-ACK it never
  // saw is an invalid transition against a SYN_SENT entry (nf_conntrack_proto_tcp.c,
  // tcp_conntracks: ORIGINAL ack in sSS -> sIV), so no entry would ever carry the node's
  // mark and every packet would be re-hashed on the current table. A VIP's TCP SYN is left
  // untracked instead: the first ACK is picked up as an established flow
  // (nf_conntrack_tcp_loose, default 1; picked-up flows are window-liberal) and pinned to
  // the node its hash gives. Where replies do pass this host nothing changes: the SYN-ACK
  // is not tracked either and the ACK starts the entry the same way.
  for (const fam of FAMS) sets.set(`dsr${fam}`, dsrSet(fam, new Map(), input.previous));
  chains.set(
    "untrack",
    chainOf(
      "untrack",
      FAMS.map((fam) => `tcp flags & (syn | ack) == syn ${ipKey(fam)} daddr . tcp dport @dsr${fam} notrack`),
      UNTRACK_BASE,
    ),
  );
  chains.set(
    "prerouting",
    chainOf(
      "prerouting",
      FAMS.map((fam) => `${ipKey(fam)} daddr . meta l4proto . th dport vmap @dispatch${fam}`),
      PREROUTING_BASE,
    ),
  );
  chains.set("count", chainOf("count", [`counter name meta mark map @${NODE_COUNTER_MAP}`], COUNT_BASE));
  return {
    output: undefined,
    table: input.table,
    seed: input.seed,
    zonesKey,
    zoneSet,
    services: new Map(),
    addresses: createNodeAddressBook(),
    slots: createSlotMapBook(input.previous),
    dispatch: { 4: new Map(), 6: new Map() },
    context: "",
    marks: undefined,
    serviceCounters: new Map(),
    counters: new Set(),
    sets,
    chains,
  };
}

function sameNames(a: readonly string[], b: readonly string[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}
