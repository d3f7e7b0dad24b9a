/**
 * Adapter: one resource kept current from the API server by list + watch — client-go's
 * Reflector, in our own words (k8s.io/client-go/tools/cache/reflector.go; Kubernetes API
 * concepts, "Efficient detection of changes" and "Resource versions").
 *
 * - List, remember the list's resourceVersion, watch from it; every event updates the
 *   store and the resourceVersion. Bookmarks are asked for and only move the version.
 * - The list comes in pages (`pageSize`, 500 by default, as client-go's pager); when a
 *   continue token expires mid-list the transport reads it again in one request and the
 *   loop reports that as a restart with reason `continue_expired` (no backoff).
 * - The server ends a watch now and then (timeoutSeconds: 5–10 minutes, jittered, as
 *   client-go asks): watch again from the last version at once (restart reason `closed`).
 * - 410 Gone (an ERROR event with code 410, or HTTP 410): the version was compacted away;
 *   list again at once (reason `expired`). The new list replaces the store, so deletions
 *   missed meanwhile are seen.
 * - Any other failure (connection refused or cut, an error status): exponential backoff
 *   with jitter, then watch again from the last version — or list when there is none yet
 *   (reason `error`). The store keeps its objects while the server is away.
 * - A watch that ends within a second without an event counts as a failure too, so a
 *   server that closes every watch at once is not hammered.
 * - A watch still open well past the timeout it asked for (a peer gone without a FIN or
 *   RST: the server would have closed it) is aborted and counts as a failure.
 * - An item or event object that cannot be stored — not an object, no string
 *   `metadata.name`, a `metadata.namespace` that is not a string — is left out and kept in
 *   `rejects` (with its position and the field) until the next list, for the source to
 *   report; it never reaches the store's keys.
 * Time and randomness come in (Clock, random) so tests drive the backoff.
 *
 * Deliberately not: decoding (kube-source.ts decodes), debouncing (the source does),
 * the streaming-list (sendInitialEvents) protocol, lists served from the watch cache
 * (resourceVersion "0": client-go's first list; ours is a consistent read).
 */
import type { Clock, TimerHandle } from "../health/clock.ts";
import type { KubeTransport, WatchHandle } from "./kube-transport.ts";

export type RestartReason = "expired" | "error" | "closed" | "continue_expired";
export type WatchState = "listing" | "watching" | "backoff" | "stopped";

export interface BackoffOptions {
  readonly initialMs: number;
  readonly maxMs: number;
}

export const DEFAULT_BACKOFF: BackoffOptions = { initialMs: 500, maxMs: 30_000 };

export interface ReflectorOptions {
  /** the resource's name for logs and metrics: "services", "endpointslices" */
  readonly resource: string;
  /** the collection path: /api/v1/services */
  readonly path: string;
  /** kind and apiVersion put on objects that arrive without them (list items) */
  readonly kind: string;
  readonly apiVersion: string;
  readonly transport: KubeTransport;
  readonly clock: Clock;
  /** in [0, 1): jitter of the backoff and of the watch timeout */
  readonly random: () => number;
  readonly backoff?: BackoffOptions;
  /** items per list request (default 500, kube-list-pager.ts); 0: the whole list in one */
  readonly pageSize?: number;
  /** the shortest server-side watch timeout; each watch asks for up to twice this */
  readonly minWatchTimeoutSeconds?: number;
  /** the store changed */
  readonly onChange: () => void;
  /** the loop starts over; delayMs is 0 when it does so at once; `status`: the HTTP status
   * of a refused list or watch (undefined when no answer came, or for other reasons) */
  readonly onRestart?: (reason: RestartReason, detail: string, delayMs: number, status?: number) => void;
  readonly onState?: (state: WatchState, detail: string) => void;
}

export interface RawObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly namespace?: string;
    readonly resourceVersion?: string;
  };
  readonly [field: string]: unknown;
}

const QUICK_CLOSE_MS = 1000;
/** the most unusable items/events kept for reporting between two lists */
const MAX_REJECTS = 20;
/** how long past its own timeoutSeconds a silent watch is given before it is abandoned */
const WATCHDOG_GRACE_MS = 30_000;

/** Backoff before attempt `failures` (1-based): doubling from initialMs up to maxMs, then
 * "equal jitter" — half fixed, half random — so that many LB hosts do not reconnect in step. */
export function backoffDelay(failures: number, backoff: BackoffOptions, random: () => number): number {
  const base = Math.min(backoff.maxMs, backoff.initialMs * 2 ** Math.max(0, failures - 1));
  return Math.round(base / 2 + (base / 2) * random());
}

export class ResourceReflector {
  readonly #o: ReflectorOptions;
  readonly #store = new Map<string, RawObject>();
  #rv = "";
  #synced = false;
  #version = 0;
  #failures = 0;
  #generation = 0;
  #handle: WatchHandle | undefined;
  #timer: TimerHandle | undefined;
  #watchdog: TimerHandle | undefined;
  #stopped = true;
  #state: WatchState = "stopped";
  #rejects: string[] = [];

  constructor(options: ReflectorOptions) {
    this.#o = options;
  }

  get resource(): string {
    return this.#o.resource;
  }

  /** true once a list has succeeded: the store is a real picture of the resource */
  get synced(): boolean {
    return this.#synced;
  }

  /** increases on every change of the store */
  get version(): number {
    return this.#version;
  }

  get resourceVersion(): string {
    return this.#rv;
  }

  get state(): WatchState {
    return this.#state;
  }

  /** the current objects by `namespace/name` (`/name` for cluster-scoped ones) */
  get objects(): ReadonlyMap<string, RawObject> {
    return this.#store;
  }

  /** list items and watch events left out since the last list, each with where and why */
  get rejects(): readonly string[] {
    return this.#rejects;
  }

  start(): void {
    if (!this.#stopped) return;
    this.#stopped = false;
    void this.#run();
  }

  stop(): void {
    this.#stopped = true;
    this.#generation++;
    if (this.#timer) this.#o.clock.clearTimer(this.#timer);
    this.#timer = undefined;
    this.#clearWatchdog();
    this.#handle?.abort();
    this.#handle = undefined;
    this.#setState("stopped", "");
  }

  #clearWatchdog(): void {
    if (this.#watchdog) this.#o.clock.clearTimer(this.#watchdog);
    this.#watchdog = undefined;
  }

  #setState(state: WatchState, detail: string): void {
    this.#state = state;
    this.#o.onState?.(state, detail);
  }

  #schedule(delayMs: number): void {
    if (this.#stopped) return;
    if (delayMs <= 0) {
      void this.#run();
      return;
    }
    this.#timer = this.#o.clock.setTimer(() => {
      this.#timer = undefined;
      void this.#run();
    }, delayMs);
  }

  #restart(reason: RestartReason, detail: string, backoff: boolean, status?: number): void {
    if (this.#stopped) return;
    let delay = 0;
    if (backoff) {
      this.#failures++;
      delay = backoffDelay(this.#failures, this.#o.backoff ?? DEFAULT_BACKOFF, this.#o.random);
      this.#setState("backoff", `${detail}; retry in ${delay} ms`);
    }
    this.#o.onRestart?.(reason, detail, delay, status);
    this.#schedule(delay);
  }

  async #run(): Promise<void> {
    if (this.#stopped) return;
    const generation = ++this.#generation;
    if (this.#rv === "") {
      this.#setState("listing", "");
      let list: Awaited<ReturnType<KubeTransport["list"]>>;
      try {
        list = await this.#o.transport.list(
          this.#o.path,
          this.#o.pageSize === undefined ? {} : { limit: this.#o.pageSize },
        );
      } catch (e) {
        if (generation === this.#generation)
          this.#restart("error", `list: ${message(e)}`, true, httpStatus(e));
        return;
      }
      if (generation !== this.#generation || this.#stopped) return;
      if (list.fallback !== undefined) this.#o.onRestart?.("continue_expired", list.fallback, 0);
      this.#replace(list.items);
      this.#rv = list.resourceVersion;
    }
    this.#watch(generation);
  }

  #replace(items: readonly unknown[]): void {
    const next = new Map<string, RawObject>();
    const rejects: string[] = [];
    for (const [i, item] of items.entries()) {
      const obj = this.#normalise(item);
      if (typeof obj === "string") addReject(rejects, `list item ${i}: ${obj}; left out`);
      else next.set(keyOf(obj), obj);
    }
    let changed =
      !this.#synced || next.size !== this.#store.size || rejects.join("\n") !== this.#rejects.join("\n");
    this.#rejects = rejects;
    if (!changed)
      for (const [k, v] of next) {
        const old = this.#store.get(k);
        if (!old || old.metadata.resourceVersion !== v.metadata.resourceVersion) {
          changed = true;
          break;
        }
      }
    this.#synced = true;
    if (!changed) return;
    this.#store.clear();
    for (const [k, v] of next) this.#store.set(k, v);
    this.#changed();
  }

  #changed(): void {
    this.#version++;
    this.#o.onChange();
  }

  /** The object as stored, or why it cannot be (it has no usable key). */
  #normalise(item: unknown): RawObject | string {
    if (typeof item !== "object" || item === null || Array.isArray(item))
      return `${typeName(item)}, not an object`;
    const o = item as { metadata?: unknown; kind?: unknown; apiVersion?: unknown };
    const meta = o.metadata as { name?: unknown; namespace?: unknown } | null | undefined;
    if (typeof meta !== "object" || meta === null || Array.isArray(meta))
      return `metadata is ${typeName(meta)}, not an object`;
    if (typeof meta.name !== "string") return `metadata.name is ${typeName(meta.name)}, not a string`;
    const ns = meta.namespace;
    if (ns !== undefined && ns !== null && typeof ns !== "string")
      return `${JSON.stringify(meta.name).slice(0, 80)}: metadata.namespace is ${typeName(ns)}, not a string`;
    return {
      ...(item as object),
      kind: typeof o.kind === "string" ? o.kind : this.#o.kind,
      apiVersion: typeof o.apiVersion === "string" ? o.apiVersion : this.#o.apiVersion,
    } as RawObject;
  }

  #watch(generation: number): void {
    const started = this.#o.clock.now();
    let events = 0;
    let expired = false;
    let failure = "";
    let failureStatus: number | undefined;
    let done = false;
    const onEvent = (type: string, object: unknown) => {
      if (generation !== this.#generation) return;
      events++;
      const normalised =
        type === "ADDED" || type === "MODIFIED" || type === "DELETED" ? this.#normalise(object) : undefined;
      if (typeof normalised === "string") {
        addReject(this.#rejects, `watch event ${type}: ${normalised}; ignored`);
        this.#changed();
        return;
      }
      const obj = normalised;
      // a BOOKMARK's object is of the resource's kind with only metadata.resourceVersion
      // (Kubernetes API concepts, "Watch bookmarks"): one without a kind is not one; a
      // version that is not a non-empty string is not one to resume from
      const bookmark = object as { kind?: unknown; metadata?: { resourceVersion?: unknown } } | null;
      const rv =
        type === "BOOKMARK"
          ? typeof bookmark?.kind === "string"
            ? bookmark.metadata?.resourceVersion
            : undefined
          : obj?.metadata.resourceVersion;
      switch (type) {
        case "ADDED":
        case "MODIFIED":
          if (!obj) return;
          this.#store.set(keyOf(obj), obj);
          this.#changed();
          break;
        case "DELETED":
          if (!obj) return;
          if (this.#store.delete(keyOf(obj))) this.#changed();
          break;
        case "BOOKMARK":
          break;
        case "ERROR": {
          // a metav1.Status; whatever its fields hold, the text is built without calling
          // into them (an own `toString` key made the template literal throw)
          const status = (typeof object === "object" && object !== null ? object : {}) as {
            code?: unknown;
            reason?: unknown;
            message?: unknown;
          };
          if (status.code === 410) expired = true;
          else {
            failure = `watch error ${plain(status.code, "?")} ${plain(status.reason, "")}: ${plain(status.message, "")}`;
            failureStatus = typeof status.code === "number" ? status.code : undefined;
          }
          return;
        }
        default:
          return;
      }
      if (typeof rv === "string" && rv !== "") this.#rv = rv;
    };
    const onDone = (err: unknown) => {
      if (done) return;
      done = true;
      if (generation !== this.#generation || this.#stopped) return;
      this.#clearWatchdog();
      this.#generation++;
      this.#handle = undefined;
      const lasted = this.#o.clock.now() - started;
      if (events > 0 || lasted >= QUICK_CLOSE_MS) this.#failures = 0;
      const status = (err as { statusCode?: number; code?: number } | null)?.statusCode;
      if (expired || status === 410) {
        this.#rv = "";
        this.#restart("expired", "resource version too old (410 Gone): list again", false);
      } else if (err || failure) {
        this.#restart("error", `watch: ${failure || message(err)}`, true, failureStatus ?? status);
      } else if (events === 0 && lasted < QUICK_CLOSE_MS) {
        this.#restart("closed", "the server closed the watch at once", true);
      } else {
        this.#restart("closed", "the server closed the watch", false);
      }
    };
    const minTimeout = this.#o.minWatchTimeoutSeconds ?? 300;
    const timeoutSeconds = Math.floor(minTimeout * (1 + this.#o.random()));
    this.#setState("watching", `from resourceVersion ${this.#rv}`);
    this.#clearWatchdog();
    this.#watchdog = this.#o.clock.setTimer(
      () => {
        this.#watchdog = undefined;
        const handle = this.#handle;
        onDone(
          new Error(`no end of the watch ${WATCHDOG_GRACE_MS / 1000} s past its ${timeoutSeconds} s timeout`),
        );
        handle?.abort();
      },
      timeoutSeconds * 1000 + WATCHDOG_GRACE_MS,
    );
    this.#o.transport
      .watch(
        this.#o.path,
        { resourceVersion: this.#rv, timeoutSeconds, allowWatchBookmarks: true },
        onEvent,
        onDone,
      )
      .then(
        (handle) => {
          if (done || generation !== this.#generation) handle.abort();
          else this.#handle = handle;
        },
        (e) => onDone(e ?? new Error("watch failed")),
      );
  }
}

function addReject(rejects: string[], text: string): void {
  if (rejects.length < MAX_REJECTS) rejects.push(text);
  else if (rejects.length === MAX_REJECTS) rejects.push("more items or events left out");
}

/** a Status field as text: strings and numbers as they are, anything else as JSON, short */
function plain(v: unknown, absent: string): string {
  if (v === undefined || v === null) return absent;
  if (typeof v === "string") return v.slice(0, 500);
  if (typeof v === "number" || typeof v === "boolean") return String(v);
  return (JSON.stringify(v) ?? "").slice(0, 200);
}

function typeName(v: unknown): string {
  if (v === undefined) return "missing";
  if (v === null) return "null";
  if (Array.isArray(v)) return "an array";
  return typeof v === "object" ? "an object" : `a ${typeof v}`;
}

function keyOf(obj: RawObject): string {
  return `${obj.metadata.namespace ?? ""}/${obj.metadata.name}`;
}

/** The HTTP status of a refused request: PasslbError details.status (kube-transport.ts). */
function httpStatus(e: unknown): number | undefined {
  const s = (e as { details?: { status?: unknown } } | null)?.details?.status;
  return typeof s === "number" ? s : undefined;
}

function message(e: unknown): string {
  if (e instanceof Error) return e.message;
  return String(e);
}
