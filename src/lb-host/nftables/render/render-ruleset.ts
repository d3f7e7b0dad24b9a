/**
 * NftState → one nft Transaction (drivers/nft-transaction.ts; `nftScript` prints it). Pure.
 *
 * - renderRuleset: the whole table as ONE transaction that replaces it atomically
 *   (`add table; delete table; add table; …`): no moment without rules, and conntrack
 *   marks survive, so established flows keep their nodes across a full sync.
 * - renderElementUpdates: only what differs between two states, again one transaction:
 *   new objects, element deletes and adds (a changed value is a delete then an add of the
 *   key), rewritten chains (`flush chain` + rules), then removals in reference order.
 * - needsFullSync: when the difference cannot be expressed as updates (a set changed
 *   type, a chain changed hook), the caller renders the full ruleset instead.
 * Elements go in chunks of CHUNK per operation, so no one command line grows with the table.
 * Given the names a pass touched (desired-state.ts), the diff and the full-sync test visit
 * only those objects: a one-Service change costs O(that Service), not O(table).
 *
 * Does not: decide contents (desired-state.ts) or run nft (drivers/nft.ts).
 */
import { type NftObject, type Transaction, TransactionBuilder } from "../../../drivers/nft-transaction.ts";
import { HASH_COMMENT_PREFIX, type NftChain, type NftSet, type NftState, type Touched } from "./nft-state.ts";

const CHUNK = 1024;

export function renderRuleset(state: NftState): Transaction {
  const out = new TransactionBuilder(state.table);
  out.add(TABLE).delete(TABLE).add(TABLE);
  // by name: the text depends only on the contents, not on the order passes built them in
  const sets = [...state.sets.values()].sort(byName);
  const chains = [...state.chains.values()].sort(byName);
  for (const name of [...(state.counters ?? [])].sort()) out.add({ kind: "counter", name });
  for (const s of sets) {
    out.add(declare(s));
    if (!isDispatch(s)) pushElements(out, "add", s.name, s.elements, s.isMap);
  }
  for (const c of chains) if (c.base === null) pushChain(out, c, true);
  for (const s of sets) if (isDispatch(s)) pushElements(out, "add", s.name, s.elements, s.isMap);
  for (const c of chains) if (c.base !== null) pushChain(out, c, true);
  return out.done();
}

const TABLE = { kind: "table" } as const;

/** True when `after` cannot be reached from `before` by element and chain updates. */
export function needsFullSync(before: NftState, after: NftState, touched?: Touched): boolean {
  if (before.table !== after.table) return true;
  for (const s of present(after.sets, touched?.sets)) {
    const b = before.sets.get(s.name);
    if (b && (b.isMap !== s.isMap || (b.decl !== "?" && b.decl !== s.decl))) return true;
  }
  for (const c of present(after.chains, touched?.chains)) {
    const b = before.chains.get(c.name);
    if (b && b.base !== c.base) return true;
  }
  return false;
}

/** The update from `before` to `after` (no operations when equal); with `touched`, only those names can differ. */
export function renderElementUpdates(before: NftState, after: NftState, touched?: Touched): Transaction {
  const out = new TransactionBuilder(after.table);
  const afterSets = present(after.sets, touched?.sets);
  const afterChains = present(after.chains, touched?.chains);
  // 0. new counters (a counter map's elements name them)
  for (const name of after.counters ?? [])
    if (!before.counters?.has(name)) out.add({ kind: "counter", name });
  // 1. new sets and maps (dispatch elements wait until their chains exist)
  for (const s of afterSets) {
    if (before.sets.has(s.name)) continue;
    out.add(declare(s));
    if (!isDispatch(s)) pushElements(out, "add", s.name, s.elements, s.isMap);
  }
  // 2. element changes in kept sets (dispatch last)
  const kept = afterSets.filter((s) => before.sets.has(s.name));
  const dispatchAdds: (() => void)[] = [];
  for (const s of kept) {
    const b = before.sets.get(s.name)!;
    if (b === s) continue; // the same object: unchanged by construction
    const del = new Map<string, string>();
    const add = new Map<string, string>();
    for (const [k, v] of b.elements) {
      const now = s.elements.get(k);
      if (now === undefined || now !== v) del.set(k, v);
    }
    for (const [k, v] of s.elements) if (b.elements.get(k) !== v) add.set(k, v);
    if (isDispatch(s)) {
      pushElements(out, "delete", s.name, del, false);
      dispatchAdds.push(() => pushElements(out, "add", s.name, add, true));
    } else {
      pushElements(out, "delete", s.name, del, false);
      pushElements(out, "add", s.name, add, s.isMap);
    }
  }
  // 3. new and changed chains
  for (const c of afterChains) {
    const b = before.chains.get(c.name);
    if (!b) pushChain(out, c, true);
    else if (b.hash !== c.hash || b.ruleCount !== c.ruleCount) {
      out.flush({ kind: "chain", name: c.name });
      pushChain(out, c, false);
    }
  }
  // 4. dispatch elements of new sets, then additions to kept dispatch maps
  for (const s of afterSets)
    if (!before.sets.has(s.name) && isDispatch(s)) pushElements(out, "add", s.name, s.elements, true);
  for (const f of dispatchAdds) f();
  // 5. removals: chains (no dispatch element points at them any more), then sets and maps
  for (const c of present(before.chains, touched?.chains))
    if (!after.chains.has(c.name))
      out.flush({ kind: "chain", name: c.name }).delete({ kind: "chain", name: c.name });
  for (const s of present(before.sets, touched?.sets))
    if (!after.sets.has(s.name)) out.delete({ kind: s.isMap ? "map" : "set", name: s.name });
  for (const name of before.counters ?? [])
    if (!after.counters?.has(name)) out.delete({ kind: "counter", name });
  return out.done();
}

/** The objects of `all` named in `names` (all of them without names), in `all`'s order
 * when visiting everything. */
function present<T>(all: ReadonlyMap<string, T>, names: ReadonlySet<string> | undefined): T[] {
  if (!names) return [...all.values()];
  const out: T[] = [];
  for (const n of names) {
    const v = all.get(n);
    if (v !== undefined) out.push(v);
  }
  return out;
}

const byName = (a: { name: string }, b: { name: string }) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0);

function isDispatch(s: NftSet): boolean {
  return s.name.startsWith("dispatch");
}

function declare(s: NftSet): NftObject {
  return { kind: s.isMap ? "map" : "set", name: s.name, decl: s.decl };
}

function pushElements(
  out: TransactionBuilder,
  verb: "add" | "delete",
  set: string,
  elements: ReadonlyMap<string, string>,
  isMap: boolean,
): void {
  const items = [...elements].map(([key, value]) => (verb === "add" && isMap ? { key, value } : { key }));
  out.elements(verb, set, items, CHUNK);
}

function pushChain(out: TransactionBuilder, c: NftChain, create: boolean): void {
  const rules = c.rules;
  if (rules === null) throw new Error(`renderer: chain ${c.name} has no rule texts (an observed state?)`);
  if (create) out.add({ kind: "chain", name: c.name, base: c.base });
  pushRules(out, c.name, rules, c.hash);
}

/** A chain's rules, the last one carrying the chain's content hash (how drift is told apart). */
export function pushRules(
  out: TransactionBuilder,
  chain: string,
  rules: readonly string[],
  hash: string,
): void {
  rules.forEach((rule, i) => {
    const last = i === rules.length - 1;
    out.add({
      kind: "rule",
      chain,
      rule,
      ...(last ? { comment: `${HASH_COMMENT_PREFIX}${hash}` } : {}),
    });
  });
}
