/**
 * The desired endpoint set of one slice group (address type + port list), indexed by
 * endpoint identity — upstream's `EndpointSet` (kubernetes/endpointslice util/endpointset.go)
 * — built so that a sync after one Pod changed costs little more than walking the Pods.
 *
 * Entries are the memoised (identity, endpoint) pairs of `desired-endpoints.ts`; the same
 * entry object stands for an unchanged Pod from one sync to the next. The id index of a
 * group is kept between syncs (per Service object and group) and patched with what entered
 * and left, instead of being rebuilt from ten thousand string keys. Marks on entries are
 * tokens unique to one call, so they never leak between calls; results never depend on the
 * cache, only the time they take.
 */
import type { Endpoint } from "../k8s/objects.ts";
import { endpointIdentity } from "./endpoint-set.ts";

export interface DesiredEntry {
  readonly id: string;
  readonly ep: Endpoint;
  /** call-scoped marks (internal) */
  seen?: object;
  prev?: object;
  placed?: object;
}

export interface DesiredSet {
  /** in desired order, one entry per identity */
  readonly entries: readonly DesiredEntry[];
  readonly byId: ReadonlyMap<string, DesiredEntry>;
  /** whether an entry is in this set (without a string lookup in the common case) */
  readonly has: (entry: DesiredEntry) => boolean;
}

/** A hidden (non-enumerable, symbol-keyed) link from an endpoint we built to its entry: a
 * property load instead of a WeakMap lookup per endpoint. JSON, YAML and deep equality
 * ignore it. Only endpoints created here carry it; input objects are never touched. */
const ENTRY = Symbol("passlb.desiredEntry");

/** The entry for a freshly built endpoint, linked from the endpoint object. */
export function desiredEntry(ep: Endpoint): DesiredEntry {
  const entry: DesiredEntry = { id: endpointIdentity(ep), ep };
  Object.defineProperty(ep, ENTRY, { value: entry });
  return entry;
}

/** The entry an endpoint object was built as, if it was built by `desiredEntry`. */
export const entryOf = (ep: Endpoint): DesiredEntry | undefined => (ep as { [ENTRY]?: DesiredEntry })[ENTRY];

const cache = new WeakMap<
  object,
  Map<string, { entries: readonly DesiredEntry[]; byId: Map<string, DesiredEntry> }>
>();

/** Keeps the last entry of each identity (a set insert replaces), in first-seen order. */
function dedupe(entries: DesiredEntry[], byId: ReadonlyMap<string, DesiredEntry>): DesiredEntry[] {
  return byId.size === entries.length ? entries : entries.filter((e) => byId.get(e.id) === e);
}

/** When the entry list changed only at a few positions (the usual sync), patches the index
 * from those positions alone, comparing array slots without touching the entries. */
function patchInPlace(
  before: readonly DesiredEntry[],
  after: readonly DesiredEntry[],
  byId: Map<string, DesiredEntry>,
): boolean {
  const changed: number[] = [];
  for (let i = 0; i < after.length; i++) if (before[i] !== after[i] && changed.push(i) > 16) return false;
  const added = new Set(changed.map((i) => after[i]!));
  for (const i of changed) {
    const gone = before[i]!;
    if (!added.has(gone) && byId.get(gone.id) === gone) byId.delete(gone.id);
  }
  for (const e of added) byId.set(e.id, e);
  return true;
}

/**
 * Indexes the entries of one group. `entries` must each be marked `seen = token` (and appear
 * once); `owner` and `group` name the cache slot (the Service object and the group key).
 */
export function indexDesired(
  owner: object,
  group: string,
  entries: DesiredEntry[],
  token: object,
): DesiredSet {
  let slots = cache.get(owner);
  if (!slots) {
    slots = new Map();
    cache.set(owner, slots);
  }
  const previous = slots.get(group);
  let byId: Map<string, DesiredEntry>;
  if (!previous || previous.entries.length === 0) byId = new Map(entries.map((e) => [e.id, e]));
  else if (
    previous.entries.length === entries.length &&
    patchInPlace(previous.entries, entries, previous.byId)
  )
    byId = previous.byId;
  else {
    byId = previous.byId;
    const old = {};
    for (const e of previous.entries) {
      e.prev = old;
      if (e.seen !== token && byId.get(e.id) === e) byId.delete(e.id); // left
    }
    for (const e of entries) if (e.prev !== old) byId.set(e.id, e); // entered
  }
  const kept = dedupe(entries, byId);
  slots.set(group, { entries: kept, byId });
  const has =
    kept === entries
      ? (e: DesiredEntry) => e.seen === token
      : (e: DesiredEntry) => e.seen === token && byId.get(e.id) === e;
  return { entries: kept, byId, has };
}
