/**
 * Test-only: one watch stream of the fake Kubernetes API server (fake-api-server.ts) —
 * chunked JSON lines `{type, object}` (Kubernetes API concepts, "Efficient detection of
 * changes").
 *
 * - From "" or "0" the current objects come first as ADDED; from an RV older than the
 *   compaction point an ERROR event with a 410 Expired Status (or, `goneAs: "http"`, an
 *   HTTP 410 before any event).
 * - The server ends the watch by itself (apiserver pkg/endpoints/handlers/get.go: the
 *   client's timeoutSeconds, else MinRequestTimeout × (1 + rand), MinRequestTimeout 1800 s
 *   in pkg/server/config.go). The fake also ends it after `maxWatchSeconds` whatever the
 *   client asked, standing in for the other ways a real server drops watches (the watch
 *   cache terminating slow watchers, an apiserver restart), so every client here re-watches.
 * - BOOKMARK events with the current resourceVersion every `bookmarkMs` when the client
 *   set allowWatchBookmarks (apiserver storage/cacher: bookmarks about once a minute);
 *   `bookmark()` on the server sends one now.
 */
import type { ServerResponse } from "node:http";
import type { Matcher } from "./fake-api-patch.ts";
import { apiVersionOf, type FakeResource, resourceKey } from "./fake-api-resources.ts";
import { sendJson } from "./fake-api-routes.ts";
import { ApiStatusError, type FakeApiStore, type WatchType } from "./fake-api-store.ts";

export interface OpenWatch {
  readonly key: string;
  readonly bookmarks: boolean;
  readonly res: ServerResponse;
  /** graceful: end the stream; otherwise only detach it (the socket is about to be cut) */
  readonly stop: (graceful?: boolean) => void;
  /** sends a BOOKMARK now (when the client allowed them) */
  readonly bookmark: () => void;
}

export interface WatchRequest {
  readonly res: FakeResource;
  readonly namespace: string | undefined;
  readonly match: Matcher;
  readonly url: URL;
  readonly goneAs: "event" | "http";
  readonly maxWatchSeconds: number;
  readonly minRequestTimeoutSeconds: number;
  readonly bookmarkMs: number;
}

/** Starts the stream on `out`; `watches` holds it while open. */
export function serveWatch(
  store: FakeApiStore,
  w: WatchRequest,
  out: ServerResponse,
  watches: Set<OpenWatch>,
): void {
  const key = resourceKey(w.res);
  const rv = w.url.searchParams.get("resourceVersion") ?? "";
  let stopped = false;
  let unsubscribe: (() => void) | undefined;
  const timers: ReturnType<typeof setTimeout>[] = [];
  const send = (type: WatchType | "ERROR" | "BOOKMARK", object: unknown) => {
    if (!stopped) out.write(`${JSON.stringify({ type, object })}\n`);
  };
  const bookmarks = w.url.searchParams.get("allowWatchBookmarks") === "true";
  const watch: OpenWatch = {
    key,
    bookmarks,
    res: out,
    stop: (graceful = true) => {
      if (stopped) return;
      stopped = true;
      watches.delete(watch);
      unsubscribe?.();
      for (const t of timers) clearTimeout(t);
      if (graceful) out.end();
    },
    bookmark: () => {
      if (!bookmarks) return;
      send("BOOKMARK", {
        kind: w.res.kind,
        apiVersion: apiVersionOf(w.res),
        metadata: { resourceVersion: store.resourceVersion },
      });
    },
  };
  const sink = { key, namespace: w.namespace, match: w.match, send };
  try {
    // Validate before the 200: an HTTP 410 must come before any event.
    if (w.goneAs === "http") store.watch(w.res, rv, { ...sink, send: () => {} })();
    out.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked" });
    out.flushHeaders();
    watches.add(watch);
    unsubscribe = store.watch(w.res, rv, sink);
  } catch (e) {
    if (!(e instanceof ApiStatusError)) throw e;
    if (!out.headersSent) {
      watches.delete(watch);
      sendJson(out, e.code, e.status());
      return;
    }
    send("ERROR", e.status());
    watch.stop();
    return;
  }
  out.on("close", () => watch.stop());
  const asked = Number(w.url.searchParams.get("timeoutSeconds") ?? "0");
  const serverTimeout = asked > 0 ? asked : w.minRequestTimeoutSeconds * (1 + Math.random());
  const seconds = Math.min(serverTimeout, w.maxWatchSeconds);
  if (seconds > 0 && Number.isFinite(seconds)) timers.push(setTimeout(() => watch.stop(), seconds * 1000));
  if (bookmarks && w.bookmarkMs > 0) {
    const tick = () => {
      watch.bookmark();
      timers.push(setTimeout(tick, w.bookmarkMs));
    };
    timers.push(setTimeout(tick, w.bookmarkMs));
  }
}
