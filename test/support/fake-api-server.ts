/**
 * Test-only: an in-memory Kubernetes API server over plain HTTP on 127.0.0.1, enough of the
 * real protocol for @kubernetes/client-node (KubeConfig, the generated APIs, Watch,
 * ListWatch) and for passlb's sources and controller to run against it.
 *
 * Protocol (Kubernetes API concepts, https://kubernetes.io/docs/reference/using-api/api-concepts/):
 * - paths /api/v1/[namespaces/NS/]RESOURCE[/NAME[/status]] and /apis/GROUP/VERSION/…;
 *   discovery (/api, /apis, /api/v1, /apis/G/V, /version).
 * - list: `{kind: XList, metadata: {resourceVersion}, items}` (built-in items without
 *   kind/apiVersion, as the real server sends them); labelSelector, fieldSelector;
 *   `limit`/`continue` paging from a snapshot per list (fake-api-pages.ts).
 * - watch (`?watch=true&resourceVersion=RV`): chunked JSON lines `{type, object}`; from ""
 *   or "0" the current objects come first as ADDED; from an RV older than the compaction
 *   point an ERROR event with a 410 Status (or, with `goneAs: "http"`, an HTTP 410);
 *   timeoutSeconds closes the stream; BOOKMARKs on request (`bookmark()`).
 * - get, create (POST), update (PUT, 409 on a stale metadata.resourceVersion), patch
 *   (json-patch, merge-patch; strategic merge as merge), delete (finalizers honoured).
 * - auth: none, or a bearer token (`token` option; anything else is 401).
 *
 * Test hooks: stop()/start() (same port, objects kept; open watches cut), closeWatches(),
 * compact(), failNext() (the next N matching requests answer with an error), count() of
 * requests per verb and resource, put()/remove() to change objects without the API rules,
 * waitForWatches(), kubeConfig() / kubeconfigYaml(); for paged lists expireContinueTokens()
 * and `onListPage` (runs as each page is cut, so a test can write or expire mid-list).
 *
 * Deliberately not: TLS, server-side apply, admission, RBAC, protobuf, the
 * Service ClusterIP/NodePort allocators (tests give those fields themselves).
 *
 * Example:
 *   const api = new FakeApiServer();
 *   await api.start();
 *   t.after(() => api.close());
 *   api.put({ apiVersion: "v1", kind: "Node", metadata: { name: "n1" }, status: {...} });
 *   const kc = api.kubeConfig();
 *   const core = kc.makeApiClient(CoreV1Api);
 *   api.failNext({ verb: "patch", resource: "services", subresource: "status", status: 409 });
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { FakeListPages } from "./fake-api-pages.ts";
import { selectorMatcher } from "./fake-api-patch.ts";
import {
  apiVersionOf,
  discoveryDocument,
  type FakeResource,
  resourceKey,
  resourceOfObject,
} from "./fake-api-resources.ts";
import {
  type FakeVerb,
  findByKey,
  parseBody,
  parseRoute,
  type Reply,
  type Route,
  reply,
  sendJson,
  verbOf,
} from "./fake-api-routes.ts";
import { ApiStatusError, FakeApiStore, type Obj, type WatchType } from "./fake-api-store.ts";

export interface FailureRule {
  /** one verb or several; any when left out */
  readonly verb?: FakeVerb | readonly FakeVerb[];
  /** resource key: "services", "discovery.k8s.io/endpointslices", "passlb.io/loadbalancerippools" */
  readonly resource?: string;
  /** "status" for the status subresource, "" for the main resource; either when left out */
  readonly subresource?: string;
  /** how many matching requests fail (default 1) */
  readonly count?: number;
  /** HTTP status: 409 answers Conflict, 500 InternalError, 410 Expired, others a generic reason */
  readonly status: number;
  readonly message?: string;
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

export interface FakeApiServerOptions {
  /** require `Authorization: Bearer <token>` */
  readonly token?: string;
  /** clock for creationTimestamp / deletionTimestamp */
  readonly now?: () => Date;
  /** how an expired watch is answered: an ERROR event in a 200 stream (default) or HTTP 410 */
  readonly goneAs?: "event" | "http";
}

interface OpenWatch {
  readonly key: string;
  readonly bookmarks: boolean;
  readonly res: ServerResponse;
  /** graceful: end the stream; otherwise only detach it (the socket is about to be cut) */
  readonly stop: (graceful?: boolean) => void;
}

const REASONS: Record<number, string> = {
  400: "BadRequest",
  401: "Unauthorized",
  403: "Forbidden",
  404: "NotFound",
  409: "Conflict",
  410: "Expired",
  422: "Invalid",
  429: "TooManyRequests",
  500: "InternalError",
  503: "ServiceUnavailable",
};

export class FakeApiServer {
  readonly store: FakeApiStore;
  goneAs: "event" | "http";
  /** Test hook: called as each list answer is cut, before it is sent. */
  onListPage: ((info: ListPageInfo) => void) | undefined;
  readonly #pages = new FakeListPages();
  readonly #token: string | undefined;
  #server: Server | undefined;
  #port = 0;
  readonly #sockets = new Set<Socket>();
  readonly #watches = new Set<OpenWatch>();
  readonly #failures: (FailureRule & { left: number })[] = [];
  readonly #counts = new Map<string, number>();

  constructor(options: FakeApiServerOptions = {}) {
    this.store = new FakeApiStore(options.now);
    this.#token = options.token;
    this.goneAs = options.goneAs ?? "event";
  }

  /** Listens on 127.0.0.1 (a fresh port the first time, the same port after stop()). */
  async start(): Promise<void> {
    if (this.#server) return;
    const server = createServer((req, res) => this.#handle(req, res));
    server.on("connection", (s) => {
      this.#sockets.add(s);
      s.on("close", () => this.#sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(this.#port, "127.0.0.1", () => resolve());
    });
    this.#port = (server.address() as AddressInfo).port;
    this.#server = server;
  }

  /** The API server goes down: the listener closes and every connection is cut. */
  async stop(): Promise<void> {
    const server = this.#server;
    if (!server) return;
    this.#server = undefined;
    for (const w of [...this.#watches]) w.stop(false);
    const closed = new Promise<void>((resolve) => server.close(() => resolve()));
    for (const s of this.#sockets) s.destroy();
    this.#sockets.clear();
    await closed;
  }

  /** Stops for good (an alias of stop(), for t.after). */
  close(): Promise<void> {
    return this.stop();
  }

  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.#port}`;
  }

  get running(): boolean {
    return this.#server !== undefined;
  }

  /** A KubeConfig for @kubernetes/client-node pointing at this server. */
  kubeConfig(): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromString(this.kubeconfigYaml());
    return kc;
  }

  /**
   * A kubeconfig file's text for this server (for --kubeconfig in CLI tests). It sets
   * insecure-skip-tls-verify: client-node 1.x refuses an http:// server without it.
   */
  kubeconfigYaml(): string {
    const user = this.#token ? `    token: ${this.#token}\n` : "    {}\n";
    return [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: fake",
      "  cluster:",
      `    server: ${this.url}`,
      // client-node 1.x refuses plain http unless TLS verification is switched off
      "    insecure-skip-tls-verify: true",
      "users:",
      "- name: fake",
      "  user:",
      user.trimEnd(),
      "contexts:",
      "- name: fake",
      "  context:",
      "    cluster: fake",
      "    user: fake",
      "current-context: fake",
      "",
    ].join("\n");
  }

  /** Test hook: creates or replaces an object (status included), bypassing the API rules. */
  put(object: Record<string, unknown>): Obj {
    return this.store.put(this.#resourceOf(object), object);
  }

  /** Test hook: removes an object now, finalizers or not. */
  remove(apiVersion: string, kind: string, name: string, namespace?: string): boolean {
    return this.store.remove(this.#resourceOf({ apiVersion, kind }), namespace, name);
  }

  /** Test hook: the stored object, or undefined. */
  find(apiVersion: string, kind: string, name: string, namespace?: string): Obj | undefined {
    const res = this.#resourceOf({ apiVersion, kind });
    try {
      return this.store.get(res, res.namespaced ? (namespace ?? "default") : undefined, name);
    } catch {
      return undefined;
    }
  }

  /** Test hook: forget the watch history; resuming from an older resourceVersion is 410 Gone. */
  compact(): void {
    this.store.compact();
  }

  /** Test hook: every continue token handed out so far expires; its next page is 410 Expired. */
  expireContinueTokens(): void {
    this.#pages.expire();
  }

  /** Paged lists begun and not finished (snapshots the fake holds). */
  get openLists(): number {
    return this.#pages.open;
  }

  /** Test hook: ends every open watch stream cleanly (as the server's watch timeout does). */
  closeWatches(): void {
    for (const w of [...this.#watches]) w.stop();
  }

  /** Test hook: a BOOKMARK with the current resourceVersion on watches that allow them. */
  bookmark(): void {
    for (const w of this.#watches) {
      if (!w.bookmarks) continue;
      const res = findByKey(w.key);
      const object = {
        kind: res?.kind ?? "",
        apiVersion: res ? apiVersionOf(res) : "v1",
        metadata: { resourceVersion: this.store.resourceVersion },
      };
      w.res.write(`${JSON.stringify({ type: "BOOKMARK", object })}\n`);
    }
  }

  /** Test hook: the next `count` requests matching the rule answer with `status`. */
  failNext(rule: FailureRule): void {
    this.#failures.push({ ...rule, left: rule.count ?? 1 });
  }

  /** Requests seen: `count("patch", "services", "status")`; any field left out matches all. */
  count(verb?: FakeVerb, resource?: string, subresource?: string): number {
    let n = 0;
    for (const [k, v] of this.#counts) {
      const [kv, kr, ks] = k.split(" ");
      if (verb !== undefined && kv !== verb) continue;
      if (resource !== undefined && kr !== resource) continue;
      if (subresource !== undefined && ks !== subresource) continue;
      n += v;
    }
    return n;
  }

  resetCounts(): void {
    this.#counts.clear();
  }

  /** Open watch streams, optionally of one resource key. */
  openWatches(resource?: string): number {
    return [...this.#watches].filter((w) => resource === undefined || w.key === resource).length;
  }

  /** Resolves once at least `n` watches (of `resource`) are open; rejects after timeoutMs. */
  async waitForWatches(n: number, resource?: string, timeoutMs = 5000): Promise<void> {
    const until = Date.now() + timeoutMs;
    while (this.openWatches(resource) < n) {
      if (Date.now() > until) {
        throw new Error(`fake API: ${this.openWatches(resource)} of ${n} watches open after ${timeoutMs} ms`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }

  #resourceOf(object: Record<string, unknown>): FakeResource {
    const res = resourceOfObject(String(object.apiVersion ?? ""), String(object.kind ?? ""));
    if (!res) throw new Error(`fake API: no resource for ${object.apiVersion} ${object.kind}`);
    return res;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      try {
        const answer = this.#serve(req, res, Buffer.concat(chunks).toString("utf8"));
        if (answer) sendJson(res, answer.status, answer.body);
      } catch (e) {
        const err =
          e instanceof ApiStatusError ? e : new ApiStatusError(500, "InternalError", (e as Error).message);
        sendJson(res, err.code, err.status());
      }
    });
  }

  /** The reply to send, or undefined when the request was answered already (a watch). */
  #serve(req: IncomingMessage, res: ServerResponse, body: string): Reply | undefined {
    if (this.#token !== undefined && req.headers.authorization !== `Bearer ${this.#token}`) {
      throw new ApiStatusError(401, "Unauthorized", "Unauthorized");
    }
    const url = new URL(req.url ?? "/", "http://fake");
    const method = req.method ?? "GET";
    const doc = method === "GET" ? discoveryDocument(url.pathname.replace(/\/$/, "")) : undefined;
    if (doc !== undefined) return { status: 200, body: doc };
    const route = parseRoute(url.pathname);
    if (!route) throw new ApiStatusError(404, "NotFound", `the server could not find ${url.pathname}`);
    const verb = verbOf(method, route, url);
    const key = resourceKey(route.res);
    const countKey = `${verb} ${key} ${route.sub ?? ""}`;
    this.#counts.set(countKey, (this.#counts.get(countKey) ?? 0) + 1);
    this.#injected(verb, key, route.sub ?? "");
    const ns = route.res.namespaced ? route.namespace : undefined;
    if (!route.res.namespaced && route.namespace !== undefined) {
      throw new ApiStatusError(404, "NotFound", `${key} is not namespaced`);
    }
    const store = this.store;
    switch (verb) {
      case "list": {
        const match = selectorMatcher(
          url.searchParams.get("labelSelector"),
          url.searchParams.get("fieldSelector"),
        );
        const page = this.#pages.page({
          collection: [
            key,
            ns ?? "",
            url.searchParams.get("labelSelector"),
            url.searchParams.get("fieldSelector"),
          ].join(" "),
          limit: Number(url.searchParams.get("limit") ?? "0") || 0,
          token: url.searchParams.get("continue") ?? "",
          compactedRv: Number(store.compactedResourceVersion),
          read: () => store.list(route.res, ns, match),
        });
        const out = route.res.custom
          ? page.items
          : page.items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest as Record<string, unknown>);
        const more = page.continue !== "";
        this.onListPage?.({ resource: key, page: page.number, items: out.length, more });
        return reply(200, {
          kind: `${route.res.kind}List`,
          apiVersion: apiVersionOf(route.res),
          metadata: {
            resourceVersion: page.rv,
            ...(more && { continue: page.continue, remainingItemCount: page.remaining }),
          },
          items: out,
        });
      }
      case "watch":
        this.#watch(route, ns, url, res);
        return undefined;
      case "get":
        return reply(200, store.get(route.res, ns, route.name ?? ""));
      case "create": {
        if (route.res.namespaced && ns === undefined) {
          throw new ApiStatusError(405, "MethodNotAllowed", "create needs a namespace in the path");
        }
        return reply(201, store.create(route.res, ns, parseBody(body)));
      }
      case "update":
        return reply(200, store.update(route.res, ns, route.name ?? "", parseBody(body), route.sub));
      case "patch": {
        const type = String(req.headers["content-type"] ?? "application/merge-patch+json");
        return reply(200, store.patch(route.res, ns, route.name ?? "", type, parseBody(body), route.sub));
      }
      case "delete":
        return reply(200, store.delete(route.res, ns, route.name ?? ""));
    }
  }

  #injected(verb: FakeVerb, key: string, sub: string): void {
    const i = this.#failures.findIndex((f) => {
      const verbs = f.verb === undefined ? undefined : typeof f.verb === "string" ? [f.verb] : f.verb;
      if (verbs && !verbs.includes(verb)) return false;
      if (f.resource !== undefined && f.resource !== key) return false;
      if (f.subresource !== undefined && f.subresource !== sub) return false;
      return f.left > 0;
    });
    const rule = this.#failures[i];
    if (!rule) return;
    rule.left -= 1;
    if (rule.left <= 0) this.#failures.splice(i, 1);
    const reason = REASONS[rule.status] ?? "InternalError";
    throw new ApiStatusError(rule.status, reason, rule.message ?? `injected failure (${reason})`);
  }

  #watch(route: Route, ns: string | undefined, url: URL, res: ServerResponse): void {
    const key = resourceKey(route.res);
    const match = selectorMatcher(
      url.searchParams.get("labelSelector"),
      url.searchParams.get("fieldSelector"),
    );
    const rv = url.searchParams.get("resourceVersion") ?? "";
    let stopped = false;
    let unsubscribe: (() => void) | undefined;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const watch: OpenWatch = {
      key,
      bookmarks: url.searchParams.get("allowWatchBookmarks") === "true",
      res,
      stop: (graceful = true) => {
        if (stopped) return;
        stopped = true;
        this.#watches.delete(watch);
        unsubscribe?.();
        if (timer) clearTimeout(timer);
        if (graceful) res.end();
      },
    };
    const send = (type: WatchType | "ERROR", object: unknown) => {
      if (!stopped) res.write(`${JSON.stringify({ type, object })}\n`);
    };
    try {
      // Validate before the 200: an HTTP 410 must come before any event.
      if (this.goneAs === "http") {
        unsubscribe = this.store.watch(route.res, rv, { key, namespace: ns, match, send: () => {} });
        unsubscribe();
        unsubscribe = undefined;
      }
      res.writeHead(200, { "content-type": "application/json", "transfer-encoding": "chunked" });
      res.flushHeaders();
      this.#watches.add(watch);
      unsubscribe = this.store.watch(route.res, rv, { key, namespace: ns, match, send });
    } catch (e) {
      if (!(e instanceof ApiStatusError)) throw e;
      if (!res.headersSent) {
        this.#watches.delete(watch);
        sendJson(res, e.code, e.status());
        return;
      }
      send("ERROR", e.status());
      watch.stop();
      return;
    }
    res.on("close", () => watch.stop());
    const timeout = Number(url.searchParams.get("timeoutSeconds") ?? "0");
    if (timeout > 0) timer = setTimeout(() => watch.stop(), timeout * 1000);
  }
}
