/**
 * NftState → `nft -f` script text. Pure.
 *
 * - renderRuleset: the whole table as ONE transaction that replaces it atomically
 *   (`add table; delete table; add table; …`): no moment without rules, and conntrack
 *   marks survive, so established flows keep their nodes across a full sync.
 * - renderElementUpdates: only what differs between two states, again one transaction:
 *   new objects, element deletes and adds (a changed value is a delete then an add of the
 *   key), rewritten chains (`flush chain` + rules), then removals in reference order.
 * - needsFullSync: when the difference cannot be expressed as updates (a set changed
 *   type, a chain changed hook), the caller renders the full ruleset instead.
 * One command per line and elements in chunks, so the fake applier can read it back.
 * Given the names a pass touched (desired-state.ts), the diff and the full-sync test visit
 * only those objects: a one-Service change costs O(that Service), not O(table).
 *
 * Does not: decide contents (desired-state.ts) or run nft (nft-applier.ts).
 */
import {
  HASH_COMMENT_PREFIX,
  type NftChain,
  type NftSet,
  type NftState,
  TABLE_FAMILY,
  type Touched,
} from "./nft-state.ts";

const CHUNK = 1024;

export function renderRuleset(state: NftState): string {
  const t = `${TABLE_FAMILY} ${state.table}`;
  const out = [`add table ${t}`, `delete table ${t}`, `add table ${t}`];
  // by name: the text depends only on the contents, not on the order passes built them in
  const sets = [...state.sets.values()].sort(byName);
  const chains = [...state.chains.values()].sort(byName);
  for (const name of [...(state.counters ?? [])].sort()) out.push(`add counter ${t} ${name}`);
  for (const s of sets) {
    out.push(declare(t, s));
    if (!isDispatch(s)) pushElements(out, "add", t, s.name, s.elements, s.isMap);
  }
  for (const c of chains) if (c.base === null) pushChain(out, t, c, true);
  for (const s of sets) if (isDispatch(s)) pushElements(out, "add", t, s.name, s.elements, s.isMap);
  for (const c of chains) if (c.base !== null) pushChain(out, t, c, true);
  return `${out.join("\n")}\n`;
}

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

/** The update script from `before` to `after`; with `touched`, only those names can differ. */
export function renderElementUpdates(before: NftState, after: NftState, touched?: Touched): string {
  const t = `${TABLE_FAMILY} ${after.table}`;
  const out: string[] = [];
  const afterSets = present(after.sets, touched?.sets);
  const afterChains = present(after.chains, touched?.chains);
  // 0. new counters (a counter map's elements name them)
  for (const name of after.counters ?? [])
    if (!before.counters?.has(name)) out.push(`add counter ${t} ${name}`);
  // 1. new sets and maps (dispatch elements wait until their chains exist)
  for (const s of afterSets) {
    if (before.sets.has(s.name)) continue;
    out.push(declare(t, s));
    if (!isDispatch(s)) pushElements(out, "add", t, s.name, s.elements, s.isMap);
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
      pushElements(out, "delete", t, s.name, del, false);
      dispatchAdds.push(() => pushElements(out, "add", t, s.name, add, true));
    } else {
      pushElements(out, "delete", t, s.name, del, false);
      pushElements(out, "add", t, s.name, add, s.isMap);
    }
  }
  // 3. new and changed chains
  for (const c of afterChains) {
    const b = before.chains.get(c.name);
    if (!b) pushChain(out, t, c, true);
    else if (b.hash !== c.hash || b.ruleCount !== c.ruleCount) {
      out.push(`flush chain ${t} ${c.name}`);
      pushChain(out, t, c, false);
    }
  }
  // 4. dispatch elements of new sets, then additions to kept dispatch maps
  for (const s of afterSets)
    if (!before.sets.has(s.name) && isDispatch(s)) pushElements(out, "add", t, s.name, s.elements, true);
  for (const f of dispatchAdds) f();
  // 5. removals: chains (no dispatch element points at them any more), then sets and maps
  for (const c of present(before.chains, touched?.chains))
    if (!after.chains.has(c.name)) out.push(`flush chain ${t} ${c.name}`, `delete chain ${t} ${c.name}`);
  for (const s of present(before.sets, touched?.sets))
    if (!after.sets.has(s.name)) out.push(`delete ${s.isMap ? "map" : "set"} ${t} ${s.name}`);
  for (const name of before.counters ?? [])
    if (!after.counters?.has(name)) out.push(`delete counter ${t} ${name}`);
  return out.length === 0 ? "" : `${out.join("\n")}\n`;
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

function declare(t: string, s: NftSet): string {
  return `add ${s.isMap ? "map" : "set"} ${t} ${s.name} { ${s.decl} }`;
}

function pushElements(
  out: string[],
  verb: "add" | "delete",
  t: string,
  name: string,
  elements: ReadonlyMap<string, string>,
  isMap: boolean,
): void {
  if (elements.size === 0) return;
  let chunk: string[] = [];
  const flush = () => {
    out.push(`${verb} element ${t} ${name} { ${chunk.join(", ")} }`);
    chunk = [];
  };
  for (const [k, v] of elements) {
    chunk.push(verb === "add" && isMap ? `${k} : ${v}` : k);
    if (chunk.length === CHUNK) flush();
  }
  if (chunk.length > 0) flush();
}

function pushChain(out: string[], t: string, c: NftChain, create: boolean): void {
  if (c.rules === null) throw new Error(`renderer: chain ${c.name} has no rule texts (an observed state?)`);
  if (create) out.push(`add chain ${t} ${c.name}${c.base === null ? "" : ` { ${c.base} }`}`);
  c.rules.forEach((r, i) => {
    const last = i === c.rules!.length - 1;
    out.push(`add rule ${t} ${c.name} ${r}${last ? ` comment "${HASH_COMMENT_PREFIX}${c.hash}"` : ""}`);
  });
}
