/**
 * Test-only: the object store behind the fake Kubernetes API server — the semantics of the
 * verbs, without HTTP (Kubernetes API concepts: "Resource versions", "Efficient detection of
 * changes", "Finalizers"; apiserver's pkg/registry/rest create, update and delete strategies
 * and pkg/registry/generic/registry/store.go).
 *
 * - One global, increasing resourceVersion; each write stamps the object with the next one.
 * - Create: uid, creationTimestamp, generation 1; generateName + five characters of
 *   apiserver pkg/storage/names/generate.go's alphabet (the prefix cut to 58); status dropped
 *   when the resource has a /status subresource (the Service and custom resource
 *   PrepareForCreate); an existing name is 409 AlreadyExists (storage/etcd3 store.go Create →
 *   apimachinery NewAlreadyExists: `services "web" already exists`).
 * - Namespace lifecycle (apiserver plugin/pkg/admission/namespace/lifecycle/admission.go):
 *   a create in a namespace that does not exist is 404 `namespaces "x" not found`, in one
 *   being deleted 403 `… unable to create new content in namespace x because it is being
 *   terminated`.
 * - Update/patch of the main resource keep the stored status; of /status keep everything
 *   but status (per resource: fake-api-resources.ts). A metadata.resourceVersion in the body
 *   must match the stored one, else 409 Conflict (storage/etcd3 GuaranteedUpdate →
 *   NewConflict with apimachinery's OptimisticLockErrorMsg).
 * - Patches (fake-api-patch.ts): custom resources refuse strategic merge with 415
 *   (apiextensions-apiserver customresource_handler.go supportedTypes; apiserver
 *   handlers/patch.go NewUnsupportedMediaTypeError); a failed JSON patch `test` is 422.
 * - Delete honours finalizers: sets deletionTimestamp and removes the object once an update
 *   leaves the finalizers empty (generic registry store.go updateForGracefulDeletionAndFinalizers).
 * - Admission hooks (set by the server): `decode` runs on the incoming object (wire types,
 *   custom resource pruning), `validate` on the object as it would be stored.
 * - Watch history since the compaction point; a watch from an older resourceVersion is 410
 *   Expired `too old resource version: X (Y)` (storage/cacher and etcd3 watcher).
 * Deliberately not: pagination (fake-api-pages.ts pages what list() returns), set-based
 * selectors, graceful deletion of Pods, garbage collection by ownerReferences.
 */
import { randomUUID } from "node:crypto";
import { WatchHistory, type WatchSink } from "./fake-api-history.ts";
import {
  asObject,
  generateName,
  keepSystemMeta,
  namespaceAdmits,
  objectId,
  qualified,
} from "./fake-api-meta.ts";
import { applyPatch, type Matcher, PatchError } from "./fake-api-patch.ts";
import { apiVersionOf, type FakeResource, resourceKey } from "./fake-api-resources.ts";
import { ApiStatusError } from "./fake-api-status.ts";

export { ApiStatusError, type WatchSink };

export type Obj = Record<string, unknown> & { metadata: Meta };
export interface Meta extends Record<string, unknown> {
  name?: string;
  generateName?: string;
  namespace?: string;
  resourceVersion?: string;
  uid?: string;
  finalizers?: string[];
  deletionTimestamp?: string;
  generation?: number;
}

export type WatchType = "ADDED" | "MODIFIED" | "DELETED";

/** Checks the server runs on writes (fake-api-server.ts wires wire types, schemas, validation). */
export interface Admission {
  /** on the incoming object, before the strategy: may prune it in place; throws 400 */
  decode(res: FakeResource, obj: Obj): void;
  /** on the object as it would be stored; throws 422 */
  validate(res: FakeResource, obj: Obj, old: Obj | undefined, sub: string): void;
}

function fail(res: FakeResource, code: number, reason: string, name: string, message: string): never {
  throw new ApiStatusError(code, reason, message, { name, group: res.group, kind: res.resource });
}

export class FakeApiStore {
  #rv = 1;
  readonly #objects = new Map<string, Map<string, Obj>>();
  readonly #history = new WatchHistory();
  readonly #now: () => Date;
  admission: Admission | undefined;

  constructor(now: () => Date = () => new Date()) {
    this.#now = now;
  }

  get resourceVersion(): string {
    return String(this.#rv);
  }

  get compactedResourceVersion(): string {
    return String(this.#history.compactedRv);
  }

  /** Drops the watch history: a watch resuming from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.#history.compact(this.#rv);
  }

  #table(res: FakeResource): Map<string, Obj> {
    const key = resourceKey(res);
    let t = this.#objects.get(key);
    if (!t) {
      t = new Map();
      this.#objects.set(key, t);
    }
    return t;
  }

  #timestamp(): string {
    return this.#now()
      .toISOString()
      .replace(/\.\d+Z$/, "Z");
  }

  #stamp(res: FakeResource, obj: Obj): Obj {
    this.#rv += 1;
    obj.apiVersion = apiVersionOf(res);
    obj.kind = res.kind;
    obj.metadata.resourceVersion = String(this.#rv);
    return obj;
  }

  #emit(res: FakeResource, type: WatchType, object: Obj, previous: Obj | undefined): void {
    this.#history.emit(this.#rv, resourceKey(res), type, object, previous);
  }

  list(res: FakeResource, namespace: string | undefined, match: Matcher): { items: Obj[]; rv: string } {
    const items = [...this.#table(res).values()]
      .filter((o) => namespace === undefined || o.metadata.namespace === namespace)
      .filter(match)
      .map((o) => structuredClone(o));
    items.sort((a, b) =>
      objectId(a.metadata.namespace, a.metadata.name ?? "").localeCompare(
        objectId(b.metadata.namespace, b.metadata.name ?? ""),
      ),
    );
    return { items, rv: this.resourceVersion };
  }

  get(res: FakeResource, namespace: string | undefined, name: string): Obj {
    const o = this.#table(res).get(objectId(namespace, name));
    if (!o) fail(res, 404, "NotFound", name, `${qualified(res)} "${name}" not found`);
    return structuredClone(o);
  }

  create(res: FakeResource, namespace: string | undefined, body: unknown): Obj {
    const obj = asObject(res, body);
    const meta = obj.metadata;
    if (res.namespaced) {
      if (meta.namespace !== undefined && namespace !== undefined && meta.namespace !== namespace) {
        fail(
          res,
          400,
          "BadRequest",
          meta.name ?? "",
          "the namespace of the provided object does not match the namespace sent on the request",
        );
      }
      meta.namespace = namespace ?? meta.namespace ?? "default";
      namespaceAdmits(
        res,
        this.#objects.get("namespaces")?.get(objectId(undefined, meta.namespace)),
        meta.namespace,
        meta.name ?? "",
      );
    } else delete meta.namespace;
    this.admission?.decode(res, obj);
    if (!meta.name && meta.generateName) meta.name = generateName(meta.generateName);
    if (res.status) delete obj.status;
    this.admission?.validate(res, obj, undefined, "");
    if (!meta.name)
      fail(
        res,
        422,
        "Invalid",
        "",
        `${res.kind} "" is invalid: metadata.name: Required value: name or generateName is required`,
      );
    const id = objectId(meta.namespace, meta.name);
    if (this.#table(res).has(id)) {
      fail(res, 409, "AlreadyExists", meta.name, `${qualified(res)} "${meta.name}" already exists`);
    }
    meta.uid = randomUUID();
    meta.creationTimestamp = this.#timestamp();
    meta.generation = 1;
    delete meta.deletionTimestamp;
    this.#stamp(res, obj);
    this.#table(res).set(id, obj);
    this.#emit(res, "ADDED", obj, undefined);
    return structuredClone(obj);
  }

  /** PUT: replaces the object (or only its status through the subresource). */
  update(res: FakeResource, namespace: string | undefined, name: string, body: unknown, sub?: string): Obj {
    const incoming = asObject(res, body);
    if (incoming.metadata.name !== undefined && incoming.metadata.name !== name) {
      fail(res, 400, "BadRequest", name, "the name of the object does not match the request");
    }
    return this.#replace(res, namespace, name, incoming, sub);
  }

  patch(
    res: FakeResource,
    namespace: string | undefined,
    name: string,
    contentType: string,
    patch: unknown,
    sub?: string,
  ): Obj {
    const current = this.get(res, namespace, name);
    let next: unknown;
    try {
      next = applyPatch(contentType, res.custom, current, patch);
    } catch (e) {
      if (e instanceof PatchError) fail(res, 422, "Invalid", name, e.message);
      throw e;
    }
    return this.#replace(res, namespace, name, asObject(res, next), sub);
  }

  #replace(res: FakeResource, namespace: string | undefined, name: string, incoming: Obj, sub?: string): Obj {
    const table = this.#table(res);
    const id = objectId(res.namespaced ? namespace : undefined, name);
    const stored = table.get(id);
    if (!stored) fail(res, 404, "NotFound", name, `${qualified(res)} "${name}" not found`);
    const want = incoming.metadata.resourceVersion;
    if (want !== undefined && want !== "" && want !== stored.metadata.resourceVersion) {
      fail(
        res,
        409,
        "Conflict",
        name,
        `Operation cannot be fulfilled on ${qualified(res)} "${name}": the object has been modified; please apply your changes to the latest version and try again`,
      );
    }
    this.admission?.decode(res, incoming);
    let next: Obj;
    if (sub === "status") {
      next = structuredClone(stored);
      if (res.statusKeepsMetadata)
        next.metadata = { ...structuredClone(incoming.metadata), ...keepSystemMeta(stored) } as Meta;
      if (incoming.status === undefined) delete next.status;
      else next.status = structuredClone(incoming.status);
    } else {
      next = structuredClone(incoming);
      const keep = stored.metadata;
      next.metadata = {
        ...next.metadata,
        name,
        uid: keep.uid,
        creationTimestamp: keep.creationTimestamp,
        generation: keep.generation,
      } as Meta;
      if (res.namespaced && keep.namespace !== undefined) next.metadata.namespace = keep.namespace;
      else delete next.metadata.namespace;
      if (keep.deletionTimestamp) next.metadata.deletionTimestamp = keep.deletionTimestamp;
      else delete next.metadata.deletionTimestamp;
      if (res.status) {
        if (stored.status === undefined) delete next.status;
        else next.status = structuredClone(stored.status);
      }
      if (JSON.stringify(next.spec) !== JSON.stringify(stored.spec)) {
        next.metadata.generation = (keep.generation ?? 1) + 1;
      }
    }
    this.admission?.validate(res, next, stored, sub ?? "");
    this.#stamp(res, next);
    if (next.metadata.deletionTimestamp && (next.metadata.finalizers ?? []).length === 0) {
      table.delete(id);
      this.#emit(res, "DELETED", next, stored);
      return structuredClone(next);
    }
    table.set(id, next);
    this.#emit(res, "MODIFIED", next, stored);
    return structuredClone(next);
  }

  delete(res: FakeResource, namespace: string | undefined, name: string): Obj {
    const table = this.#table(res);
    const id = objectId(res.namespaced ? namespace : undefined, name);
    const stored = table.get(id);
    if (!stored) fail(res, 404, "NotFound", name, `${qualified(res)} "${name}" not found`);
    const next = structuredClone(stored);
    if ((stored.metadata.finalizers ?? []).length > 0) {
      if (stored.metadata.deletionTimestamp) return structuredClone(stored);
      next.metadata.deletionTimestamp = this.#timestamp();
      next.metadata.deletionGracePeriodSeconds = 0;
      this.#stamp(res, next);
      table.set(id, next);
      this.#emit(res, "MODIFIED", next, stored);
      return structuredClone(next);
    }
    this.#stamp(res, next);
    table.delete(id);
    this.#emit(res, "DELETED", next, stored);
    return structuredClone(next);
  }

  /** Test hook: creates or replaces an object as given (status included), no preconditions. */
  put(res: FakeResource, body: unknown): Obj {
    const obj = asObject(res, body);
    const meta = obj.metadata;
    if (!meta.name) throw new Error("put: metadata.name is required");
    if (res.namespaced) meta.namespace ??= "default";
    else delete meta.namespace;
    const table = this.#table(res);
    const id = objectId(meta.namespace, meta.name);
    const stored = table.get(id);
    meta.uid = stored?.metadata.uid ?? meta.uid ?? randomUUID();
    meta.creationTimestamp =
      stored?.metadata.creationTimestamp ?? meta.creationTimestamp ?? this.#timestamp();
    meta.generation ??= 1;
    this.#stamp(res, obj);
    table.set(id, obj);
    this.#emit(res, stored ? "MODIFIED" : "ADDED", obj, stored);
    return structuredClone(obj);
  }

  /** Test hook: removes an object at once, finalizers or not; false when it did not exist. */
  remove(res: FakeResource, namespace: string | undefined, name: string): boolean {
    const table = this.#table(res);
    const id = objectId(res.namespaced ? (namespace ?? "default") : undefined, name);
    const stored = table.get(id);
    if (!stored) return false;
    const next = structuredClone(stored);
    this.#stamp(res, next);
    table.delete(id);
    this.#emit(res, "DELETED", next, stored);
    return true;
  }

  /**
   * Starts a watch. rv "" or "0": synthetic ADDED events for the current objects first;
   * otherwise the history after rv. Throws 410 Gone when rv is older than the compaction point.
   */
  watch(res: FakeResource, rv: string, sink: WatchSink): () => void {
    if (rv === "" || rv === "0") {
      for (const o of this.list(res, sink.namespace, sink.match).items) sink.send("ADDED", o);
      return this.#history.subscribe(sink);
    }
    const from = Number(rv);
    if (!Number.isFinite(from)) fail(res, 400, "BadRequest", "", `invalid resourceVersion ${rv}`);
    return this.#history.replayAndSubscribe(from, rv, sink);
  }
}
