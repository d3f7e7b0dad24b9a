/**
 * Adapter: the two requests a list+watch loop makes, over @kubernetes/client-node 1.x.
 * The KubeConfig supplies the server, TLS and credentials (tokens, client certificates,
 * exec plugins, refreshed per request); the watch is client-node's Watch (chunked JSON
 * lines); the list is a plain GET through the same agent and headers, so objects arrive as
 * the server's JSON — our zod schemas decode them (kube-source.ts), not the generated
 * model classes (which turn timestamps into Dates and drop unknown fields). Lists are read
 * in pages (`limit`/`continue`, 500 items a page by default) by kube-list-pager.ts, so a
 * cluster with tens of thousands of Pods is many bounded requests rather than one huge one.
 *
 * Deliberately not: protobuf, retries — the reflector (kube-watch.ts) owns retry and backoff.
 */
import { request as httpRequest, type IncomingMessage, type RequestOptions } from "node:http";
import { request as httpsRequest } from "node:https";
import { type KubeConfig, Watch } from "@kubernetes/client-node";
import { PasslbError } from "../errors.ts";
import { DEFAULT_PAGE_SIZE, type ListPage, listInPages, type PagedList } from "./kube-list-pager.ts";

/** the items, the list's resourceVersion and, when a continue token expired, why it was read again */
export type ListResult = PagedList;

export interface ListOptions {
  /** items per page (default 500); 0 reads the collection in one request */
  readonly limit?: number;
}

export interface WatchParams {
  readonly resourceVersion: string;
  readonly timeoutSeconds: number;
  readonly allowWatchBookmarks: boolean;
}

export interface WatchHandle {
  abort(): void;
}

export interface KubeTransport {
  /** GET path (a collection), page by page: the items and the list's resourceVersion */
  list(path: string, options?: ListOptions): Promise<ListResult>;
  /**
   * Opens a watch on path; `onEvent` gets each `{type, object}`, `onDone` once when the
   * stream ends (null: closed by the server; otherwise the error). Rejects or calls onDone
   * with the error when it cannot be opened.
   */
  watch(
    path: string,
    params: WatchParams,
    onEvent: (type: string, object: unknown) => void,
    onDone: (err: unknown) => void,
  ): Promise<WatchHandle>;
}

const LIST_TIMEOUT_MS = 60_000;

export function clientNodeTransport(config: KubeConfig): KubeTransport {
  const watcher = new Watch(config);
  return {
    list(path, options = {}) {
      const server = (config.getCurrentCluster()?.server ?? "").replace(/\/$/, "");
      return listInPages(async (query): Promise<ListPage> => {
        const url = new URL(server + path);
        if (query.limit !== undefined) url.searchParams.set("limit", String(query.limit));
        if (query.continue !== undefined) url.searchParams.set("continue", query.continue);
        // credentials per request: exec plugins and token files may have refreshed meanwhile
        const opts: RequestOptions & { headers?: Record<string, string> } = { headers: {} };
        await config.applyToHTTPSOptions(opts);
        return listPage(await get(url, opts), url.pathname);
      }, options.limit ?? DEFAULT_PAGE_SIZE);
    },
    async watch(path, params, onEvent, onDone) {
      const query: Record<string, string | number | boolean> = {
        resourceVersion: params.resourceVersion,
        allowWatchBookmarks: params.allowWatchBookmarks,
        timeoutSeconds: params.timeoutSeconds,
      };
      const ctrl = await watcher.watch(path, query, (type, object) => onEvent(type, object), onDone);
      return { abort: () => ctrl.abort() };
    },
  };
}

/**
 * A list answer's page, checked before use: JSON, an object, `items` an array (null or
 * absent: none, as Go encodes a nil slice), `metadata.resourceVersion` and
 * `metadata.continue` strings when present (Kubernetes API concepts, ListMeta). Anything
 * else is an `api_answer_invalid` error, so the reflector keeps its store and retries —
 * before, `items: "abc"` was spread into characters and emptied the store, and a number
 * or object in resourceVersion went on into the watch request.
 */
export function listPage(text: string, path: string): ListPage {
  const bad = (why: string) =>
    new PasslbError("api_answer_invalid", `GET ${path}: the list answer is not usable: ${why}`, {
      details: { path },
    });
  let list: unknown;
  try {
    list = JSON.parse(text);
  } catch (e) {
    throw bad(`not JSON (${e instanceof Error ? e.message : String(e)}; ${text.length} bytes)`);
  }
  if (typeof list !== "object" || list === null || Array.isArray(list))
    throw bad(`${typeOf(list)}, not an object`);
  const { items, metadata } = list as { items?: unknown; metadata?: unknown };
  if (items !== undefined && items !== null && !Array.isArray(items))
    throw bad(`items is ${typeOf(items)}, not an array`);
  if (
    metadata !== undefined &&
    metadata !== null &&
    (typeof metadata !== "object" || Array.isArray(metadata))
  )
    throw bad(`metadata is ${typeOf(metadata)}, not an object`);
  const meta = (metadata ?? {}) as { resourceVersion?: unknown; continue?: unknown };
  for (const field of ["resourceVersion", "continue"] as const) {
    const v = meta[field];
    if (v !== undefined && v !== null && typeof v !== "string")
      throw bad(`metadata.${field} is ${typeOf(v)}, not a string`);
  }
  return {
    items: (items as unknown[] | null | undefined) ?? [],
    resourceVersion: (meta.resourceVersion as string | null | undefined) ?? "",
    continue: (meta.continue as string | null | undefined) ?? "",
  };
}

function typeOf(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

function get(url: URL, opts: RequestOptions): Promise<string> {
  const send = url.protocol === "http:" ? httpRequest : httpsRequest;
  return new Promise((resolve, reject) => {
    const req = send(
      url,
      {
        ...opts,
        method: "GET",
        headers: { ...(opts.headers as Record<string, string>), accept: "application/json" },
      },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        res.on("data", (c: Buffer) => chunks.push(c));
        res.on("error", reject);
        res.on("end", () => {
          const text = Buffer.concat(chunks).toString("utf8");
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) return resolve(text);
          let reason = res.statusMessage ?? "";
          try {
            const s = JSON.parse(text) as { reason?: string; message?: string };
            reason = [s.reason, s.message].filter(Boolean).join(": ") || reason;
          } catch {}
          reject(
            new PasslbError("api_request_failed", `GET ${url.pathname}: HTTP ${status} ${reason}`, {
              details: { status, path: url.pathname },
            }),
          );
        });
      },
    );
    req.setTimeout(LIST_TIMEOUT_MS, () => req.destroy(new Error(`GET ${url.pathname}: timed out`)));
    req.on("error", (e) =>
      reject(new PasslbError("api_unreachable", `GET ${url.pathname}: ${e.message}`, { cause: e })),
    );
    req.end();
  });
}
