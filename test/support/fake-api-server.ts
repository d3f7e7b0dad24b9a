/**
 * Test-only: an in-memory Kubernetes API server over plain HTTP on 127.0.0.1, as strict as
 * kube-apiserver on everything passlb sends or reads, for @kubernetes/client-node (KubeConfig,
 * the generated APIs, Watch, ListWatch), for passlb's sources and controller, and for the
 * real `kubectl` (discovery, -o json lists, get --raw through the pod proxy).
 *
 * Each rule lives in one file with its upstream source cited there:
 * - fake-api-routes.ts: paths /api/v1/[namespaces/NS/]RES[/NAME[/status]], /apis/G/V/…, verbs.
 * - fake-api-resources.ts: the resources, discovery documents, field selector labels per
 *   resource, /status strategies; the custom resource from deploy/'s CRD.
 * - fake-api-rbac.ts: bearer tokens → users (401 for an unknown one), every request
 *   authorized against the Roles/ClusterRoles/bindings in deploy/, 403 with the real words.
 * - fake-api-wire.ts: decoding of MicroTime (six fractional digits), Time (RFC 3339),
 *   int32/int64/bool, int-or-string: 400 `… cannot be handled as a Lease: parsing time …`.
 * - fake-api-schema.ts: custom resources pruned and defaulted by the CRD's structural
 *   schema, fieldValidation Strict (400) / Warn (a `Warning` header), schema validation.
 * - fake-api-validation.ts (+ fake-api-field-errors.ts): ObjectMeta, names and
 *   generateName, Service status, EndpointSlice, Event, Lease — 422 Invalid.
 * - fake-api-store.ts: resourceVersions, 409 Conflict on a stale one, 409 AlreadyExists,
 *   subresource resets, finalizers and deletionTimestamp, no new finalizers once deleting,
 *   namespace lifecycle, 415 for strategic merge on custom resources, watch history / 410.
 * - fake-api-patch.ts: JSON patch (with `test`), merge patch (null deletes), selectors.
 * - fake-api-pages.ts: limit/continue paging from a snapshot, 410 on an expired token.
 * - fake-api-watch.ts: watch streams; the server ends them itself; BOOKMARKs.
 * - fake-api-admission.ts: the per-request glue (decode, validate, field selector labels).
 *
 * Identities (fake-api-rbac.ts DEFAULT_USERS): `kubeConfig("controller")` and
 * `kubeConfig("lb")` are the ServiceAccounts deploy/ binds for passlb controller and
 * passlb lb; "admin" is in system:masters (test set-up and assertions); "jane" has no rights.
 *
 * Not emulated, and why: TLS (client-node and kubectl are pointed at http://127.0.0.1 with
 * verification off; TLS is the client library's concern, not passlb's), server-side apply
 * (passlb does not use it), admission webhooks and quota (none in a default install),
 * protobuf (client-node speaks JSON), the Service ClusterIP/NodePort allocators and Service
 * spec validation (passlb never writes a Service spec; fixtures come in through put()),
 * unknown fields of built-in types (client-node's typed models send none),
 * resource.Quantity (passlb writes none), OpenAPI documents (kubectl get needs none).
 *
 * Test hooks: stop()/start() (same port, objects kept; open watches cut), closeWatches(),
 * compact(), bookmark(), failNext() (the next N matching requests answer with an error),
 * count() of requests per verb and resource, requests() (who asked what, and the answer),
 * put()/remove() to change objects without the API rules, waitForWatches(), kubeConfig(as) /
 * kubeconfigYaml(as); for paged lists expireContinueTokens() and `onListPage`; `rbac` for
 * the grants used; `podProxy` answers /pods/NAME:PORT/proxy/PATH.
 *
 * Example:
 *   const api = new FakeApiServer();
 *   await api.start();
 *   t.after(() => api.close());
 *   api.put({ apiVersion: "v1", kind: "Node", metadata: { name: "n1" }, status: {...} });
 *   const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
 *   api.failNext({ verb: "patch", resource: "services", subresource: "status", status: 409 });
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo, Socket } from "node:net";
import { KubeConfig } from "@kubernetes/client-node";
import { checkFieldSelector, requestAdmission, selectorName } from "./fake-api-admission.ts";
import { FakeListPages } from "./fake-api-pages.ts";
import { selectorMatcher } from "./fake-api-patch.ts";
import { ANONYMOUS, DEFAULT_USERS, FakeRbac, type FakeUser } from "./fake-api-rbac.ts";
import {
  apiVersionOf,
  discoveryDocument,
  FAKE_RESOURCES,
  type FakeResource,
  resourceKey,
  resourceOfObject,
} from "./fake-api-resources.ts";
import {
  type FakeVerb,
  parseBody,
  parseRoute,
  type Reply,
  reply,
  sendJson,
  verbOf,
} from "./fake-api-routes.ts";
import { fieldValidationOf } from "./fake-api-schema.ts";
import { ApiStatusError, FakeApiStore, type Obj } from "./fake-api-store.ts";
import type { TlsPair } from "./fake-api-tls.ts";
import { type OpenWatch, serveWatch } from "./fake-api-watch.ts";

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

/** who the kubeconfig speaks as: a token of DEFAULT_USERS or of the `users` option */
export type FakeIdentity = "admin" | "controller" | "lb" | "jane" | (string & {});

/** one request as the server saw it */
export interface RequestRecord {
  readonly user: string;
  readonly verb: string;
  readonly resource: string;
  readonly subresource: string;
  readonly namespace: string;
  readonly name: string;
  readonly status: number;
  readonly message: string;
}

/** what `podProxy` answers for GET /api/v1/namespaces/NS/pods/NAME[:PORT]/proxy/PATH */
export type PodProxy = (namespace: string, pod: string, port: string, path: string) => Reply;

export interface FakeApiServerOptions {
  /** serve HTTPS with this key and certificate (fake-api-tls.ts), for clients that send tokens only over TLS */
  readonly tls?: TlsPair;
  /** serve the custom resources of deploy/'s CRD (default true; false: as if it was never installed) */
  readonly customResources?: boolean;
  /** more bearer tokens and their users, on top of DEFAULT_USERS */
  readonly users?: Record<string, FakeUser>;
  /** the RBAC to authorize with (default: deploy/'s) */
  readonly rbac?: FakeRbac;
  /** the server ends every watch after this long, whatever timeoutSeconds asked (default 15) */
  readonly maxWatchSeconds?: number;
  /** BOOKMARK every this many ms on watches that allow them (default 5000; 0: only bookmark()) */
  readonly bookmarkMs?: number;
  /** clock for creationTimestamp / deletionTimestamp */
  readonly now?: () => Date;
  /** how an expired watch is answered: an ERROR event in a 200 stream (default) or HTTP 410 */
  readonly goneAs?: "event" | "http";
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
  /** Test hook: answers the pod proxy (kubectl get --raw …/pods/NAME:PORT/proxy/…); 503 without */
  podProxy: PodProxy | undefined;
  readonly rbac: FakeRbac;
  readonly #users: Record<string, FakeUser>;
  readonly #maxWatchSeconds: number;
  readonly #tls: TlsPair | undefined;
  readonly #customResources: boolean;
  readonly #bookmarkMs: number;
  readonly #requests: RequestRecord[] = [];
  readonly #pages = new FakeListPages();
  #server: Server | undefined;
  #port = 0;
  readonly #sockets = new Set<Socket>();
  readonly #watches = new Set<OpenWatch>();
  readonly #failures: (FailureRule & { left: number })[] = [];
  readonly #counts = new Map<string, number>();

  constructor(options: FakeApiServerOptions = {}) {
    this.store = new FakeApiStore(options.now);
    this.rbac = options.rbac ?? new FakeRbac();
    this.#users = { ...DEFAULT_USERS, ...(options.users ?? {}) };
    this.#maxWatchSeconds = options.maxWatchSeconds ?? 15;
    this.#tls = options.tls;
    this.#customResources = options.customResources ?? true;
    this.#bookmarkMs = options.bookmarkMs ?? 5000;
    // kube-apiserver makes these at start (kubernetes pkg/controlplane/controller/systemnamespaces)
    for (const name of ["default", "kube-system", "kube-public", "kube-node-lease"]) {
      this.put({ apiVersion: "v1", kind: "Namespace", metadata: { name }, status: { phase: "Active" } });
    }
    this.goneAs = options.goneAs ?? "event";
  }

  /** Listens on 127.0.0.1 (a fresh port the first time, the same port after stop()). */
  async start(): Promise<void> {
    if (this.#server) return;
    const handler = (req: IncomingMessage, res: ServerResponse) => this.#handle(req, res);
    const server = this.#tls
      ? createTlsServer({ key: this.#tls.key, cert: this.#tls.cert }, handler)
      : createServer(handler);
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
    return `${this.#tls ? "https" : "http"}://127.0.0.1:${this.#port}`;
  }

  get running(): boolean {
    return this.#server !== undefined;
  }

  /** A KubeConfig for @kubernetes/client-node pointing at this server, speaking as `as`. */
  kubeConfig(as: FakeIdentity): KubeConfig {
    const kc = new KubeConfig();
    kc.loadFromString(this.kubeconfigYaml(as));
    return kc;
  }

  /**
   * A kubeconfig file's text for this server (for --kubeconfig in CLI tests). It sets
   * insecure-skip-tls-verify: client-node 1.x refuses an http:// server without it.
   */
  kubeconfigYaml(as: FakeIdentity): string {
    const user = `    token: ${as}\n`;
    return [
      "apiVersion: v1",
      "kind: Config",
      "clusters:",
      "- name: fake",
      "  cluster:",
      `    server: ${this.url}`,
      // client-node 1.x refuses plain http unless TLS verification is switched off
      this.#tls
        ? `    certificate-authority-data: ${Buffer.from(this.#tls.cert).toString("base64")}`
        : "    insecure-skip-tls-verify: true",
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

  /** Test hook: every stored object of a kind (in `namespace`, when given). */
  findAll(apiVersion: string, kind: string, namespace?: string): Obj[] {
    return this.store.list(this.#resourceOf({ apiVersion, kind }), namespace, () => true).items;
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
    for (const w of this.#watches) w.bookmark();
  }

  /** Every request so far: who, what, and the HTTP status it got. */
  requests(): readonly RequestRecord[] {
    return this.#requests;
  }

  /** The requests answered 403. */
  forbidden(): RequestRecord[] {
    return this.#requests.filter((r) => r.status === 403);
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
      const warnings: string[] = [];
      const seen: Omit<RequestRecord, "status" | "message"> & { user: string } = {
        user: "",
        verb: "",
        resource: "",
        subresource: "",
        namespace: "",
        name: "",
      };
      try {
        const answer = this.#serve(req, res, Buffer.concat(chunks).toString("utf8"), warnings, seen);
        if (answer) {
          if (warnings.length > 0)
            res.setHeader(
              "Warning",
              warnings.map((x) => `299 - ${JSON.stringify(x)}`),
            );
          sendJson(res, answer.status, answer.body);
          this.#requests.push({ ...seen, status: answer.status, message: "" });
        } else this.#requests.push({ ...seen, status: 200, message: "watch" });
      } catch (e) {
        const err =
          e instanceof ApiStatusError ? e : new ApiStatusError(500, "InternalError", (e as Error).message);
        this.#requests.push({ ...seen, status: err.code, message: err.message });
        // FAKE_API_LOG=1: every refused request on stderr, to see what the strict server refused
        if (process.env.FAKE_API_LOG)
          process.stderr.write(`fake API ${err.code} ${seen.verb} ${seen.resource}: ${err.message}\n`);
        if (res.headersSent) res.end();
        else sendJson(res, err.code, err.status());
      } finally {
        this.store.admission = undefined;
      }
    });
  }

  #authenticate(req: IncomingMessage): FakeUser {
    const auth = req.headers.authorization;
    if (auth === undefined) return ANONYMOUS;
    const token = /^Bearer (.+)$/.exec(auth)?.[1];
    const user = token === undefined ? undefined : this.#users[token];
    if (!user) throw new ApiStatusError(401, "Unauthorized", "Unauthorized");
    return user;
  }

  /** The reply to send, or undefined when the request was answered already (a watch). */
  #serve(
    req: IncomingMessage,
    res: ServerResponse,
    body: string,
    warnings: string[],
    seen: { -readonly [K in keyof RequestRecord]?: RequestRecord[K] },
  ): Reply | undefined {
    const user = this.#authenticate(req);
    seen.user = user.name;
    const url = new URL(req.url ?? "/", "http://fake");
    const method = req.method ?? "GET";
    const path = url.pathname.replace(/\/$/, "") || "/";
    const proxy = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/:]+)(?::([^/]+))?\/proxy(\/.*)?$/.exec(
      url.pathname,
    );
    if (proxy) {
      const [, namespace = "", pod = "", port = "", rest = "/"] = proxy;
      Object.assign(seen, { verb: "get", resource: "pods", subresource: "proxy", namespace, name: pod });
      this.rbac.authorize({
        user,
        verb: "get",
        path,
        resource: { group: "", resource: "pods", sub: "proxy", namespace, name: pod },
      });
      const answer = this.podProxy?.(namespace, pod, port, rest);
      if (!answer)
        throw new ApiStatusError(
          503,
          "ServiceUnavailable",
          `error trying to reach service: dial tcp: connect: connection refused`,
        );
      return answer;
    }
    const served = this.#customResources ? FAKE_RESOURCES : FAKE_RESOURCES.filter((r) => !r.custom);
    const doc = method === "GET" ? discoveryDocument(path, served) : undefined;
    if (doc !== undefined || path === "/version" || /^\/(openapi|healthz|livez|readyz)/.test(path)) {
      seen.verb = method.toLowerCase();
      this.rbac.authorize({ user, verb: method.toLowerCase(), path });
      if (doc !== undefined) return { status: 200, body: doc };
      throw new ApiStatusError(404, "NotFound", "the server could not find the requested resource");
    }
    const route = parseRoute(url.pathname);
    if (!route || !served.includes(route.res))
      throw new ApiStatusError(404, "NotFound", "the server could not find the requested resource");
    const verb = verbOf(method, route, url);
    const key = resourceKey(route.res);
    const ns = route.res.namespaced ? route.namespace : undefined;
    const fieldSelector = url.searchParams.get("fieldSelector");
    const name = route.name ?? (verb === "list" || verb === "watch" ? selectorName(fieldSelector) : "");
    Object.assign(seen, { verb, resource: key, subresource: route.sub ?? "", namespace: ns ?? "", name });
    this.rbac.authorize({
      user,
      verb,
      path,
      resource: {
        group: route.res.group,
        resource: route.res.resource,
        sub: route.sub ?? "",
        namespace: ns ?? "",
        name,
      },
    });
    const countKey = `${verb} ${key} ${route.sub ?? ""}`;
    this.#counts.set(countKey, (this.#counts.get(countKey) ?? 0) + 1);
    this.#injected(verb, key, route.sub ?? "");
    if (!route.res.namespaced && route.namespace !== undefined) {
      throw new ApiStatusError(404, "NotFound", "the server could not find the requested resource");
    }
    if (verb === "create" || verb === "update" || verb === "patch") {
      this.store.admission = requestAdmission(fieldValidationOf(url), warnings);
    }
    if (verb === "list" || verb === "watch") checkFieldSelector(route.res, fieldSelector);
    const store = this.store;
    switch (verb) {
      case "list":
        return this.#list(route.res, ns, url);
      case "watch":
        serveWatch(
          store,
          {
            res: route.res,
            namespace: ns,
            match: selectorMatcher(url.searchParams.get("labelSelector"), fieldSelector),
            url,
            goneAs: this.goneAs,
            maxWatchSeconds: this.#maxWatchSeconds,
            minRequestTimeoutSeconds: 1800,
            bookmarkMs: this.#bookmarkMs,
          },
          res,
          this.#watches,
        );
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

  #list(res: FakeResource, ns: string | undefined, url: URL): Reply {
    const key = resourceKey(res);
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
      compactedRv: Number(this.store.compactedResourceVersion),
      read: () => this.store.list(res, ns, match),
    });
    const out = res.custom
      ? page.items
      : page.items.map(({ kind: _k, apiVersion: _a, ...rest }) => rest as Record<string, unknown>);
    const more = page.continue !== "";
    this.onListPage?.({ resource: key, page: page.number, items: out.length, more });
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
}
