/**
 * Test-only: the watch history of the fake Kubernetes API server's store — every change
 * since the compaction point, delivered to open watches and replayed to a watch that starts
 * from an older resourceVersion (Kubernetes API concepts, "Efficient detection of changes").
 *
 * - A watch from a version older than the compaction point is 410 Expired
 *   `too old resource version: X (Y)` (apiserver storage/cacher watch_cache.go and
 *   storage/etcd3 watcher: etcd's ErrCompacted).
 * - Selectors apply to both sides of a change: an object that starts matching arrives as
 *   ADDED, one that stops matching as DELETED (apiserver storage/cacher cacheWatcher).
 * - The history keeps the last 20,000 changes; older ones compact away by themselves.
 */
import type { Matcher } from "./fake-api-patch.ts";
import { ApiStatusError } from "./fake-api-status.ts";
import type { Obj, WatchType } from "./fake-api-store.ts";

interface HistoryEvent {
  readonly rv: number;
  readonly key: string;
  readonly type: WatchType;
  readonly object: Obj;
  readonly previous: Obj | undefined;
}

export interface WatchSink {
  readonly key: string;
  readonly namespace: string | undefined;
  readonly match: Matcher;
  readonly send: (type: WatchType, object: Obj) => void;
}

const HISTORY_LIMIT = 20_000;

export class WatchHistory {
  compactedRv = 1;
  #events: HistoryEvent[] = [];
  readonly #sinks = new Set<WatchSink>();

  compact(rv: number): void {
    this.compactedRv = rv;
    this.#events = [];
  }

  emit(rv: number, key: string, type: WatchType, object: Obj, previous: Obj | undefined): void {
    this.#events.push({ rv, key, type, object: structuredClone(object), previous });
    if (this.#events.length > HISTORY_LIMIT) {
      const dropped = this.#events.splice(0, this.#events.length - HISTORY_LIMIT);
      this.compactedRv = dropped[dropped.length - 1]?.rv ?? this.compactedRv;
    }
    for (const sink of [...this.#sinks]) deliver(sink, key, type, object, previous);
  }

  subscribe(sink: WatchSink): () => void {
    this.#sinks.add(sink);
    return () => this.#sinks.delete(sink);
  }

  /** The changes after `from`, then the live ones; 410 when `from` is compacted away. */
  replayAndSubscribe(from: number, rv: string, sink: WatchSink): () => void {
    if (from < this.compactedRv) {
      throw new ApiStatusError(410, "Expired", `too old resource version: ${rv} (${this.compactedRv})`);
    }
    for (const e of this.#events) if (e.rv > from) deliver(sink, e.key, e.type, e.object, e.previous);
    return this.subscribe(sink);
  }
}

function deliver(
  sink: WatchSink,
  key: string,
  type: WatchType,
  object: Obj,
  previous: Obj | undefined,
): void {
  if (sink.key !== key) return;
  if (sink.namespace !== undefined && object.metadata.namespace !== sink.namespace) return;
  const now = sink.match(object);
  const before = previous !== undefined && sink.match(previous);
  if (type === "MODIFIED" && now && !before) sink.send("ADDED", structuredClone(object));
  else if (type === "MODIFIED" && !now && before) sink.send("DELETED", structuredClone(object));
  else if (now || (type === "DELETED" && before)) sink.send(type, structuredClone(object));
}
