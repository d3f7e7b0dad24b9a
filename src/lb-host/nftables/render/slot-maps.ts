/**
 * Slot maps (`m<n>`: Maglev slot → node mark) and their names. Pure.
 *
 * Every listener table with the same contents shares one map; the book counts how many
 * tables hold each content. A pass tells it which contents were dropped and which were
 * taken (only for the Services that changed), and then names the new contents:
 *   1. a freed map with exactly this content keeps its name (nothing to send);
 *   2. otherwise the closest freed map of the same size (among the first few candidates)
 *      is rewritten, so a health change edits only the slots that moved;
 *   3. otherwise a fresh `m<n>` (the smallest n not in use).
 * Freed maps nobody took are removed. A new book (start, adoption, a failed pass) treats
 * every slot map of the previous state as freed, so it converges on the same names.
 *
 * Does not: compute slot contents (service-part.ts) or render text.
 */
import { formatMark, type NftSet, type NftState, slotContentKey } from "./nft-state.ts";
import type { SlotContent } from "./service-part.ts";

const SLOT_MAP_DECL = "typeof numgen inc mod 2 : meta mark;";
const MAX_REUSE_CANDIDATES = 16;
const SLOT_MAP_NAME = /^m\d+$/;

export interface SlotMapBook {
  /** content key → the map holding it and how many listener tables use it */
  readonly held: Map<string, { name: string; marks: Uint32Array; count: number }>;
  /** maps released this pass (or inherited from the previous state), by name */
  readonly freed: Map<string, { key: string; marks: Uint32Array }>;
  /** contents taken this pass that no map holds yet */
  readonly wanted: Map<string, { marks: Uint32Array; count: number }>;
}

/** A book whose freed pool is every slot map of `previous`. */
export function createSlotMapBook(previous: NftState): SlotMapBook {
  const book: SlotMapBook = { held: new Map(), freed: new Map(), wanted: new Map() };
  for (const s of previous.sets.values()) {
    if (!SLOT_MAP_NAME.test(s.name)) continue;
    const marks = s.slots ?? marksOf(s);
    if (marks) book.freed.set(s.name, { key: s.contentKey ?? slotContentKey(marks), marks });
  }
  return book;
}

export function takeContent(book: SlotMapBook, c: SlotContent): void {
  const held = book.held.get(c.contentKey);
  if (held) held.count++;
  else {
    const w = book.wanted.get(c.contentKey);
    if (w) w.count++;
    else book.wanted.set(c.contentKey, { marks: c.marks, count: 1 });
  }
}

export function dropContent(book: SlotMapBook, key: string): void {
  const w = book.wanted.get(key);
  if (w) {
    if (--w.count === 0) book.wanted.delete(key);
    return;
  }
  const held = book.held.get(key);
  if (!held) return;
  if (--held.count > 0) return;
  book.held.delete(key);
  book.freed.set(held.name, { key, marks: held.marks });
}

/**
 * Names the wanted contents (see the header), writes their maps into `sets`, removes
 * freed maps nobody took; returns the names of maps added, rewritten or removed.
 */
export function nameSlotMaps(book: SlotMapBook, sets: Map<string, NftSet>): string[] {
  const touched: string[] = [];
  const keys = [...book.wanted.keys()].sort();
  const freedByKey = new Map<string, string>();
  for (const [name, f] of book.freed) if (!freedByKey.has(f.key)) freedByKey.set(f.key, name);
  const names = new Map<string, string>();
  for (const key of keys) {
    const name = freedByKey.get(key);
    if (name !== undefined && sameArray(book.freed.get(name)!.marks, book.wanted.get(key)!.marks)) {
      names.set(key, name);
      book.freed.delete(name);
    }
  }
  const claimed = new Set(names.values());
  let counter = 1;
  for (const key of keys) {
    if (names.has(key)) continue;
    const want = book.wanted.get(key)!.marks;
    let best: string | undefined;
    let bestDiff = Number.POSITIVE_INFINITY;
    let tried = 0;
    for (const [name, { marks }] of book.freed) {
      if (marks.length !== want.length) continue;
      if (tried++ >= MAX_REUSE_CANDIDATES) break;
      let diff = 0;
      for (let k = 0; k < marks.length; k++) if (marks[k] !== want[k]) diff++;
      if (diff < bestDiff) {
        bestDiff = diff;
        best = name;
      }
    }
    if (best === undefined) {
      const inUse = (n: string) => sets.has(n) || book.freed.has(n) || claimed.has(n);
      while (inUse(`m${counter}`)) counter++;
      best = `m${counter}`;
    }
    book.freed.delete(best);
    names.set(key, best);
    claimed.add(best);
  }
  for (const key of keys) {
    const name = names.get(key)!;
    const { marks, count } = book.wanted.get(key)!;
    book.held.set(key, { name, marks, count });
    const before = sets.get(name);
    if (before?.contentKey === key && before.slots && sameArray(before.slots, marks)) continue;
    const elements = new Map<string, string>();
    for (let slot = 0; slot < marks.length; slot++) elements.set(String(slot), formatMark(marks[slot]!));
    sets.set(name, { name, decl: SLOT_MAP_DECL, isMap: true, elements, slots: marks, contentKey: key });
    touched.push(name);
  }
  for (const name of book.freed.keys()) {
    sets.delete(name);
    touched.push(name);
  }
  book.wanted.clear();
  book.freed.clear();
  return touched;
}

/** The map name that holds a content (after nameSlotMaps). */
export function slotMapName(book: SlotMapBook, key: string): string {
  const held = book.held.get(key);
  if (!held) throw new Error(`slot-maps: no map holds content ${key}`);
  return held.name;
}

/** Marks of a slot map read back from the kernel; undefined when a key is not a slot. */
function marksOf(s: NftSet): Uint32Array | undefined {
  const arr = new Uint32Array(s.elements.size);
  for (const [k, v] of s.elements) {
    const slot = Number(k);
    if (!(slot >= 0 && slot < arr.length)) return undefined;
    arr[slot] = Number(v) >>> 0;
  }
  return arr;
}

function sameArray(a: Uint32Array, b: Uint32Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
