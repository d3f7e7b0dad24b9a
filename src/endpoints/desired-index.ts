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
import { endpointKey } from "./endpoint-set.ts";

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

const entries = new WeakMap<Endpoint, DesiredEntry>();

/** The entry for a freshly built endpoint (remembered, so the endpoint object leads back to it). */
export function desiredEntry(ep: Endpoint): DesiredEntry {
  const entry: DesiredEntry = { id: endpointKey(ep), ep };
  entries.set(ep, entry);
  return entry;
}

/** The entry an endpoint object was built as, if it was built by `desiredEntry`. */
export const entryOf = (ep: Endpoint): DesiredEntry | undefined => entries.get(ep);

const cache = new WeakMap<
  object,
  Map<string, { entries: readonly DesiredEntry[]; byId: Map<string, DesiredEntry> }>
>();

/** Keeps the last entry of each identity (a set insert replaces), in first-seen order. */
function dedupe(entries: DesiredEntry[], byId: ReadonlyMap<string, DesiredEntry>): DesiredEntry[] {
  return byId.size === entries.length ? entries : entries.filter((e) => byId.get(e.id) === e);
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
