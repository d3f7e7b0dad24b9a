/**
 * Test-only: paged lists for the fake Kubernetes API server (fake-api-server.ts) — `limit`
 * and `continue` as the real server answers them (Kubernetes API concepts, "Retrieving
 * large results sets in chunks").
 *
 * - A list with `limit` below its size returns the first `limit` items, a
 *   `metadata.continue` token and `remainingItemCount`. The first page takes a snapshot;
 *   every later page is cut from that snapshot and carries its resourceVersion, so writes
 *   made while a client pages do not show in its list (it sees them by watching from the
 *   list's resourceVersion).
 * - A token is refused with 410 Expired when its snapshot's resourceVersion is older than
 *   the store's compaction point (as etcd's compaction does to the real server), or after
 *   the test hook `expire()`; a token that does not decode, or names another collection,
 *   is a 400.
 * - Without `limit`, a list is one answer; with `continue` but no `limit`, the rest.
 *
 * Deliberately not: tokens that outlive a restart of the test process, a limit on how many
 * snapshots are kept (one per unfinished list; dropped at its last page or on expire()).
 */
import { selectorMatcher } from "./fake-api-patch.ts";
import { apiVersionOf, type FakeResource, resourceKey } from "./fake-api-resources.ts";
import { type Reply, reply } from "./fake-api-routes.ts";
import { ApiStatusError } from "./fake-api-status.ts";
import type { FakeApiStore, Obj } from "./fake-api-store.ts";

export interface PageRequest {
  /** which collection: resource key, namespace and selectors */
  readonly collection: string;
  /** the `limit` parameter; 0 or absent: no limit */
  readonly limit: number;
  /** the `continue` parameter; "" or absent on a first page */
  readonly token: string;
  /** the store's compaction point */
  readonly compactedRv: number;
  /** reads the whole collection now (only for a first page) */
  readonly read: () => { items: Obj[]; rv: string };
}

export interface Page {
  readonly items: Obj[];
  readonly rv: string;
  /** "" on the last page */
  readonly continue: string;
  readonly remaining: number;
  /** 1 for a first page, then 2, 3, … within one list */
  readonly number: number;
}

interface Snapshot {
  readonly collection: string;
  readonly items: Obj[];
  readonly rv: string;
  pages: number;
}

interface Token {
  readonly id: number;
  readonly offset: number;
}

export class FakeListPages {
  #nextId = 1;
  /** tokens of lists with an id below this are expired */
  #expiredBelow = 1;
  readonly #snapshots = new Map<number, Snapshot>();

  /** Every continue token handed out so far is expired: its next page is a 410. */
  expire(): void {
    this.#expiredBelow = this.#nextId;
    this.#snapshots.clear();
  }

  /** lists begun and not finished (snapshots held) */
  get open(): number {
    return this.#snapshots.size;
  }

  page(req: PageRequest): Page {
    if (req.token === "") {
      const { items, rv } = req.read();
      if (req.limit <= 0 || items.length <= req.limit) {
        return { items, rv, continue: "", remaining: 0, number: 1 };
      }
      const id = this.#nextId++;
      const snap: Snapshot = { collection: req.collection, items, rv, pages: 0 };
      this.#snapshots.set(id, snap);
      return this.#cut(id, snap, 0, req.limit);
    }
    const token = decodeToken(req.token);
    const snap = this.#snapshots.get(token.id);
    if (token.id >= this.#nextId || (snap !== undefined && snap.collection !== req.collection)) {
      throw new ApiStatusError(400, "BadRequest", "the continue token does not belong to this list");
    }
    if (token.id < this.#expiredBelow || snap === undefined || Number(snap.rv) < req.compactedRv) {
      this.#snapshots.delete(token.id);
      throw new ApiStatusError(
        410,
        "Expired",
        `continue token expired: the list's resourceVersion ${snap?.rv ?? "?"} is no longer kept (compacted at ${req.compactedRv}); list again without continue`,
      );
    }
    return this.#cut(token.id, snap, token.offset, req.limit);
  }

  #cut(id: number, snap: Snapshot, offset: number, limit: number): Page {
    const end = limit > 0 ? offset + limit : snap.items.length;
    const items = snap.items.slice(offset, end);
    snap.pages++;
    const remaining = Math.max(0, snap.items.length - end);
    if (remaining === 0) this.#snapshots.delete(id);
    const next = remaining === 0 ? "" : encodeToken({ id, offset: end });
    return { items, rv: snap.rv, continue: next, remaining, number: snap.pages };
  }
}

function encodeToken(t: Token): string {
  return Buffer.from(JSON.stringify({ fake: 1, ...t })).toString("base64url");
}

function decodeToken(text: string): Token {
  try {
    const t = JSON.parse(Buffer.from(text, "base64url").toString("utf8")) as Partial<Token>;
    if (Number.isInteger(t.id) && Number.isInteger(t.offset)) return t as Token;
  } catch {}
  throw new ApiStatusError(400, "BadRequest", "the continue token is not valid");
}

/** what `onListPage` is told about each list answer */
export interface ListPageInfo {
  /** resource key: "pods", "discovery.k8s.io/endpointslices" */
  readonly resource: string;
  /** 1 for a first page (or an unpaged list), then 2, 3, … within one list */
  readonly page: number;
  readonly items: number;
  /** true when more pages follow */
  readonly more: boolean;
}

/** One list answer (a page of it when `limit` is set), as kube-apiserver shapes it. */
export function listReply(
  pages: FakeListPages,
  store: FakeApiStore,
  res: FakeResource,
  ns: string | undefined,
  url: URL,
  onListPage: ((info: ListPageInfo) => void) | undefined,
): Reply {
  const key = resourceKey(res);
  const match = selectorMatcher(url.searchParams.get("labelSelector"), url.searchParams.get("fieldSelector"));
  const page = pages.page({
    collection: [
      key,
      ns ?? "",
      url.searchParams.get("labelSelector"),
      url.searchParams.get("fieldSelector"),
    ].join(" "),
    limit: Number(url.searchParams.get("limit") ?? "0") || 0,
    token: url.searchParams.get("continue") ?? "",
    compactedRv: Number(store.compactedResourceVersion),
    read: () => store.list(res, ns, match),
  });
  const out = res.custom
    ? page.items
    : page.items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest as Record<string, unknown>);
  const more = page.continue !== "";
  onListPage?.({ resource: key, page: page.number, items: out.length, more });
  return reply(200, {
    kind: `${res.kind}List`,
    apiVersion: apiVersionOf(res),
    metadata: {
      resourceVersion: page.rv,
      ...(more && { continue: page.continue, remainingItemCount: page.remaining }),
    },
    items: out,
  });
}
