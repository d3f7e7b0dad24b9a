/**
 * Node marks: every node address a plan lists gets a packet mark (the policy-routing table
 * id too), and a mark once given stays with its address while the address is in use — read
 * back from the previous state's `nexthops` maps, so a restarted process that adopted the
 * kernel's table keeps them. Pure.
 *
 * The address book counts, per family, which address each node has in how many distinct
 * member lists of the Services' plans (Services on the same nodes share a list);
 * desired-state.ts updates it only for the Services that changed, so a pass costs
 * O(changed members + nodes), not O(all members). When plans disagree about a node's
 * address (mid-change), the smallest address wins.
 *
 * Does not: route (policy-routes.ts reads the `nexthops` maps), decide membership.
 */

import type { ServiceForwarding } from "../../../forwarding/forwarding-state.ts";
import { canonicalIp } from "../../../net/ip.ts";
import {
  FAMS,
  type Fam,
  familyName,
  formatMark,
  MARK_INDEX_LIMIT,
  markFor,
  type NftSet,
  type NftState,
  nodeCounterName,
} from "./nft-state.ts";

export const NODE_COUNTER_MAP = "nodecounters";

export interface NodeAddressBook {
  /** per family: node → address → number of distinct member lists (below) listing it */
  readonly refs: Record<Fam, Map<string, Map<string, number>>>;
  /** member list → number of Services whose plan has it: Services on the same nodes share
   * one list (the planner hands every eTP Cluster Service the same array), and only a
   * list's first arrival and last departure touch `refs` */
  readonly lists: Map<ServiceForwarding["plan"]["members"], number>;
}

export interface NodeMarks {
  readonly byNode: Record<Fam, Map<string, number>>;
  /** changes whenever a family's node → mark assignment does */
  readonly epoch: Record<Fam, string>;
  /** `nexthops4`, `nexthops6`, `live` and `nodecounters`; the previous state's objects
   * when unchanged */
  readonly sets: readonly NftSet[];
  /** one named counter per mark (the previous state's set when unchanged) */
  readonly counters: ReadonlySet<string>;
}

export const createNodeAddressBook = (): NodeAddressBook => ({
  refs: { 4: new Map(), 6: new Map() },
  lists: new Map(),
});

/** Adds (+1) or removes (−1) one Service's members; true when a node's address appeared
 * or left (the marks must be assigned again). */
export function countMembers(book: NodeAddressBook, f: ServiceForwarding, delta: 1 | -1): boolean {
  const members = f.plan.members;
  const uses = (book.lists.get(members) ?? 0) + delta;
  if (uses > 0) book.lists.set(members, uses);
  else book.lists.delete(members);
  if (uses !== 0 && !(uses === 1 && delta === 1)) return false; // the list was counted already
  let moved = false;
  for (const fam of FAMS)
    for (const m of members) {
      const a = m.addresses[familyName(fam)];
      const c = a === undefined ? undefined : canonicalIp(a);
      if (c === undefined) continue;
      let byAddress = book.refs[fam].get(m.node);
      if (!byAddress) {
        byAddress = new Map();
        book.refs[fam].set(m.node, byAddress);
      }
      const n = (byAddress.get(c) ?? 0) + delta;
      if (n > 0) byAddress.set(c, n);
      else byAddress.delete(c);
      if (n === 0 || (n === 1 && delta === 1)) moved = true;
      if (byAddress.size === 0) book.refs[fam].delete(m.node);
    }
  return moved;
}

export function assignNodeMarks(book: NodeAddressBook, previous: NftState): NodeMarks {
  const byNode = { 4: new Map<string, number>(), 6: new Map<string, number>() };
  const sets: NftSet[] = [];
  const live = new Map<string, string>();
  for (const fam of FAMS) {
    const nodeAddress = new Map<string, string>();
    for (const [node, byAddress] of book.refs[fam]) {
      let pick: string | undefined;
      for (const a of byAddress.keys()) if (pick === undefined || a < pick) pick = a;
      if (pick !== undefined) nodeAddress.set(node, pick);
    }
    const wanted = new Set(nodeAddress.values());
    const addressMarks = new Map<string, number>();
    const beforeSet = previous.sets.get(`nexthops${fam}`);
    const used = new Set<number>();
    for (const [markText, addr] of beforeSet?.elements ?? []) {
      if (wanted.has(addr) && !addressMarks.has(addr)) {
        const mark = Number(markText) >>> 0;
        addressMarks.set(addr, mark);
        used.add(mark);
      }
    }
    let next = 1;
    for (const addr of [...wanted].sort()) {
      if (addressMarks.has(addr)) continue;
      while (used.has(markFor(fam, next))) next++;
      if (next >= MARK_INDEX_LIMIT) throw new RangeError("desiredNftState: out of node marks");
      const mark = markFor(fam, next);
      used.add(mark);
      addressMarks.set(addr, mark);
    }
    for (const [node, addr] of nodeAddress) byNode[fam].set(node, addressMarks.get(addr)!);
    const hops = new Map<string, string>();
    for (const [addr, mark] of [...addressMarks].sort((a, b) => a[1] - b[1])) {
      hops.set(formatMark(mark), addr);
      live.set(formatMark(mark), "");
    }
    sets.push(
      keepIfEqual(beforeSet, {
        name: `nexthops${fam}`,
        decl: `type mark : ${fam === 4 ? "ipv4_addr" : "ipv6_addr"};`,
        isMap: true,
        elements: hops,
      }),
    );
  }
  const liveSorted = new Map([...live].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0)));
  sets.push(
    keepIfEqual(previous.sets.get("live"), {
      name: "live",
      decl: "type mark;",
      isMap: false,
      elements: liveSorted,
    }),
  );
  const counterOf = new Map<string, string>();
  for (const markText of liveSorted.keys()) counterOf.set(markText, nodeCounterName(Number(markText)));
  sets.push(
    keepIfEqual(previous.sets.get(NODE_COUNTER_MAP), {
      name: NODE_COUNTER_MAP,
      decl: "type mark : counter;",
      isMap: true,
      elements: counterOf,
    }),
  );
  const names = new Set(counterOf.values());
  const before = previous.counters;
  const counters =
    before && before.size === names.size && [...names].every((n) => before.has(n)) ? before : names;
  return { byNode, epoch: { 4: markEpoch(byNode[4]), 6: markEpoch(byNode[6]) }, sets, counters };
}

function markEpoch(nodeMarks: ReadonlyMap<string, number>): string {
  return [...nodeMarks]
    .map(([n, m]) => `${n}=${m}`)
    .sort()
    .join(",");
}

/** The previous object when it holds the same declaration and elements (so the diff skips it). */
export function keepIfEqual(before: NftSet | undefined, after: NftSet): NftSet {
  if (!before || before.decl !== after.decl || before.isMap !== after.isMap) return after;
  if (before.elements.size !== after.elements.size) return after;
  for (const [k, v] of after.elements) if (before.elements.get(k) !== v) return after;
  return before;
}
