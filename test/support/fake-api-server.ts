/**
 * Test-only: an in-memory Kubernetes API server on 127.0.0.1 (plain HTTP, or HTTPS with
 * `tls`), as strict as kube-apiserver on everything passlb sends or reads, for
 * @kubernetes/client-node (KubeConfig, the generated APIs, Watch, ListWatch), for passlb's
 * sources and controller, and for the real `kubectl` (discovery, -o json lists, get --raw
 * through the pod proxy). This file is the lifecycle and the test hooks; each rule lives in
 * one file with its upstream source cited there:
 * - fake-api-handler.ts: one request through the handler chain — authentication,
 *   authorization, the pod proxy, discovery, the verbs; every request recorded.
 * - fake-api-routes.ts: paths /api/v1/[namespaces/NS/]RES[/NAME[/status]], /apis/G/V/…, verbs.
 * - fake-api-resources.ts: the resources, discovery documents, field selector labels per
 *   resource, /status strategies; the custom resource from deploy/'s CRD.
 * - fake-api-rbac.ts: bearer tokens → users (401 for an unknown one), every request
 *   authorized against the Roles/ClusterRoles/bindings in deploy/, 403 with the real words.
 * - fake-api-wire.ts: decoding of MicroTime (six fractional digits), Time (RFC 3339),
 *   int32/int64/bool, int-or-string: 400 `… cannot be handled as a Lease: parsing time …`;
 *   times stored as Go writes them back.
 * - fake-api-schema.ts: custom resources pruned and defaulted by the CRD's structural
 *   schema, fieldValidation Strict (400) / Warn (a `Warning` header), schema validation.
 * - fake-api-validation.ts (+ fake-api-field-errors.ts, fake-api-ip.ts): ObjectMeta, names
 *   and generateName, Service status, EndpointSlice, Event, Lease — 422 Invalid.
 * - fake-api-store.ts (+ fake-api-meta.ts): resourceVersions, 409 Conflict on a stale one,
 *   409 AlreadyExists, subresource resets, finalizers and deletionTimestamp, namespace
 *   lifecycle, 415 for strategic merge on custom resources.
 * - fake-api-history.ts: watch history, 410 from a compacted version.
 * - fake-api-patch.ts: JSON patch (with `test`), merge patch (null deletes), selectors.
 * - fake-api-pages.ts: limit/continue paging from a snapshot, 410 on an expired token.
 * - fake-api-watch.ts: watch streams; the server ends them itself; BOOKMARKs.
 * - fake-api-admission.ts: the per-request glue (decode, validate, field selector labels).
 * - fake-api-failures.ts, fake-api-kubeconfig.ts, fake-api-tls.ts, fake-api-status.ts:
 *   injected failures, kubeconfig text, a throwaway certificate, the Status error.
 *
 * Identities (fake-api-rbac.ts DEFAULT_USERS): `kubeConfig("controller")` and
 * `kubeConfig("lb")` are the ServiceAccounts deploy/ binds for passlb controller and
 * passlb lb; "admin" is in system:masters (test set-up and assertions); "jane" has no rights.
 *
 * Not emulated, and why: client certificates and TLS by default (client-node is pointed at
 * http:// with verification off; TLS is on only for kubectl, which sends tokens only over
 * it), server-side apply (passlb does not use it), admission webhooks and quota (none in a
 * default install), protobuf (client-node speaks JSON), the Service ClusterIP/NodePort
 * allocators and Service spec validation (passlb never writes a Service spec; fixtures come
 * in through put()), unknown fields of built-in types (client-node's typed models send
 * none), resource.Quantity (passlb writes none), OpenAPI documents (kubectl get needs none),
 * garbage collection by ownerReferences (kube-controller-manager's, not the API server's).
 *
 * Test hooks: stop()/start() (same port, objects kept; open watches cut), closeWatches(),
 * compact(), bookmark(), failNext() (the next N matching requests answer with an error),
 * count() of requests per verb and resource, requests() and forbidden() (who asked what,
 * and the answer), put() (custom resources come back defaulted by their CRD, as storage
 * returns them), remove(), find(), findAll() to change or read objects without the API rules, waitForWatches(), kubeConfig(as) / kubeconfigYaml(as); for paged lists
 * expireContinueTokens() and `onListPage`; `rbac` for the grants used; `podProxy` answers
 * /pods/NAME:PORT/proxy/PATH. FAKE_API_LOG=1 prints every refused request on stderr.
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
import { defaultStored } from "./fake-api-admission.ts";
import { type FailureRule, FakeFailures } from "./fake-api-failures.ts";
import { type HandlerState, handleRequest, type PodProxy, type RequestRecord } from "./fake-api-handler.ts";
import { kubeconfigText } from "./fake-api-kubeconfig.ts";
import { FakeListPages, type ListPageInfo } from "./fake-api-pages.ts";
import { DEFAULT_USERS, FakeRbac, type FakeUser } from "./fake-api-rbac.ts";
import { type FakeResource, resourceOfObject } from "./fake-api-resources.ts";
import type { FakeVerb } from "./fake-api-routes.ts";
import { FakeApiStore, type Obj } from "./fake-api-store.ts";
import type { TlsPair } from "./fake-api-tls.ts";
import type { OpenWatch } from "./fake-api-watch.ts";

export type { FailureRule, ListPageInfo, PodProxy, RequestRecord };

/** who the kubeconfig speaks as: a token of DEFAULT_USERS or of the `users` option */
export type FakeIdentity = "admin" | "controller" | "lb" | "jane" | (string & {});

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

export class FakeApiServer {
  readonly store: FakeApiStore;
  readonly rbac: FakeRbac;
  readonly #state: HandlerState;
  readonly #tls: TlsPair | undefined;
  #server: Server | undefined;
  #port = 0;
  readonly #sockets = new Set<Socket>();

  constructor(options: FakeApiServerOptions = {}) {
    this.store = new FakeApiStore(options.now);
    this.rbac = options.rbac ?? new FakeRbac();
    this.#tls = options.tls;
    this.#state = {
      store: this.store,
      rbac: this.rbac,
      users: { ...DEFAULT_USERS, ...(options.users ?? {}) },
      pages: new FakeListPages(),
      failures: new FakeFailures(),
      watches: new Set<OpenWatch>(),
      counts: new Map<string, number>(),
      requests: [],
      customResources: options.customResources ?? true,
      maxWatchSeconds: options.maxWatchSeconds ?? 15,
      bookmarkMs: options.bookmarkMs ?? 5000,
      goneAs: options.goneAs ?? "event",
      podProxy: undefined,
      onListPage: undefined,
    };
    // kube-apiserver makes these at start (kubernetes pkg/controlplane/controller/systemnamespaces)
    for (const name of ["default", "kube-system", "kube-public", "kube-node-lease"]) {
      this.put({ apiVersion: "v1", kind: "Namespace", metadata: { name }, status: { phase: "Active" } });
    }
  }

  /** how an expired watch is answered: an ERROR event in a 200 stream or HTTP 410 */
  get goneAs(): "event" | "http" {
    return this.#state.goneAs;
  }
  set goneAs(v: "event" | "http") {
    this.#state.goneAs = v;
  }

  /** Test hook: called as each list answer is cut, before it is sent. */
  get onListPage(): ((info: ListPageInfo) => void) | undefined {
    return this.#state.onListPage;
  }
  set onListPage(f: ((info: ListPageInfo) => void) | undefined) {
    this.#state.onListPage = f;
  }

  /** Test hook: answers the pod proxy (kubectl get --raw …/pods/NAME:PORT/proxy/…); 503 without */
  get podProxy(): PodProxy | undefined {
    return this.#state.podProxy;
  }
  set podProxy(f: PodProxy | undefined) {
    this.#state.podProxy = f;
  }

  /** Listens on 127.0.0.1 (a fresh port the first time, the same port after stop()). */
  async start(): Promise<void> {
    if (this.#server) return;
    const handler = (req: IncomingMessage, res: ServerResponse) => handleRequest(this.#state, req, res);
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
    for (const w of [...this.#state.watches]) w.stop(false);
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
    return kubeconfigText(this.url, as, this.#tls?.cert);
  }

  /** Test hook: creates or replaces an object (status included), bypassing the API rules. */
  put(object: Record<string, unknown>): Obj {
    const res = this.#resourceOf(object);
    const copy = structuredClone(object);
    defaultStored(res, copy);
    return this.store.put(res, copy);
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
    this.#state.pages.expire();
  }

  /** Paged lists begun and not finished (snapshots the fake holds). */
  get openLists(): number {
    return this.#state.pages.open;
  }

  /** Test hook: ends every open watch stream cleanly (as the server's watch timeout does). */
  closeWatches(): void {
    for (const w of [...this.#state.watches]) w.stop();
  }

  /** Test hook: a BOOKMARK with the current resourceVersion on watches that allow them. */
  bookmark(): void {
    for (const w of this.#state.watches) w.bookmark();
  }

  /** Every request so far: who, what, and the HTTP status it got. */
  requests(): readonly RequestRecord[] {
    return this.#state.requests;
  }

  /** The requests answered 403. */
  forbidden(): RequestRecord[] {
    return this.#state.requests.filter((r) => r.status === 403);
  }

  /** Test hook: the next `count` requests matching the rule answer with `status`. */
  failNext(rule: FailureRule): void {
    this.#state.failures.add(rule);
  }

  /** Test hook: the failures injected by failNext and not used up yet are dropped. */
  clearFailures(): void {
    this.#state.failures.clear();
  }

  /** Requests seen: `count("patch", "services", "status")`; any field left out matches all. */
  count(verb?: FakeVerb, resource?: string, subresource?: string): number {
    let n = 0;
    for (const [k, v] of this.#state.counts) {
      const [kv, kr, ks] = k.split(" ");
      if (verb !== undefined && kv !== verb) continue;
      if (resource !== undefined && kr !== resource) continue;
      if (subresource !== undefined && ks !== subresource) continue;
      n += v;
    }
    return n;
  }

  resetCounts(): void {
    this.#state.counts.clear();
  }

  /** Open watch streams, optionally of one resource key. */
  openWatches(resource?: string): number {
    return [...this.#state.watches].filter((w) => resource === undefined || w.key === resource).length;
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
}
