/**
 * Adapter: the controller's reconcile loop. Each pass takes the latest Services and pools,
 * asks the pure core (controller-writes.ts) what differs, and applies it while this replica
 * leads — checking leadership before every single write, so a replica that lost its Lease
 * stops at once. Passes run on a CoalescingRunner (cluster/coalescing-runner.ts): never
 * overlapping, changes during a pass cause one more pass.
 *
 * A pass ends with an explicit outcome: ok | retry (delay, cause) | failed (cause). The
 * runner owns the backoff: retries double from `initialMs` to `maxMs` (at least the
 * outcome's delay); a failed pass (the API refused: invalid, forbidden) waits `maxMs`; ok
 * resets it; a change (a read, leadership) ends a backoff at once.
 *
 * Writes carry the resourceVersion they were computed from. On 409 the object is read
 * again and the same write applied to the fresh copy (writes only touch passlb's fields);
 * if its spec, generation or deletion changed meanwhile, the Service is left to the next
 * pass, which decides on fresh data. Objects the loop wrote stand in for the source's
 * copies until the source catches up (same resourceVersion as before the write), so a pass
 * that runs before the watch delivers never decides on state passlb already changed.
 */
import { CoalescingRunner, type RunOutcome } from "../cluster/coalescing-runner.ts";
import type { PasslbError } from "../errors.ts";
import type { Clock } from "../health/clock.ts";
import type { LoadBalancerIPPool } from "../k8s/load-balancer-ip-pool.ts";
import type { Namespace, Service } from "../k8s/objects.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { type ControllerEvent, controllerEvent } from "./controller-events.ts";
import {
  type ControllerOptions,
  type ControllerWrites,
  controllerWrites,
  type ServiceWork,
  serviceTarget,
} from "./controller-writes.ts";
import type { ControllerApi } from "./kube-controller-api.ts";
import { applyServiceWrite } from "./service-writes.ts";

export interface ControllerView {
  readonly services: readonly Service[];
  readonly pools: readonly LoadBalancerIPPool[];
  /** for pool namespace selectors (plan/address-pools.ts); the name label only when absent */
  readonly namespaces?: readonly Namespace[];
}

export type ReconcileOutcome =
  | { readonly kind: "ok"; readonly writes: number; readonly reason?: "not_leader" | "not_synced" }
  | { readonly kind: "retry"; readonly delayMs: number; readonly cause: string; readonly writes: number }
  | { readonly kind: "failed"; readonly cause: string; readonly writes: number };

export interface LoopReport {
  readonly onPass?: (outcome: ReconcileOutcome, durationMs: number) => void;
  /** a write or Event failed (also part of the outcome) */
  readonly onWriteError?: (what: string, error: PasslbError | Error) => void;
  /** an Event was recorded */
  readonly onEvent?: (event: ControllerEvent) => void;
  /** every pool's size and use, each pass the leader makes (metrics) */
  readonly onPoolUsage?: (usage: ControllerWrites["usage"]) => void;
}

export interface ControllerLoopOptions {
  readonly api: ControllerApi;
  /** the latest state, or undefined before the source's first read */
  readonly view: () => ControllerView | undefined;
  readonly isLeader: () => boolean;
  readonly options: ControllerOptions;
  readonly clock: Clock;
  readonly backoff?: { readonly initialMs: number; readonly maxMs: number };
  /** conflicts retried per write before the pass gives up on the object */
  readonly conflictRetries?: number;
  readonly report?: LoopReport;
}

const DEFAULT_BACKOFF = { initialMs: 250, maxMs: 30_000 };
const CONFLICT_RETRY_MS = 100;

interface Written<T> {
  readonly fromRv: string | undefined;
  readonly object: T;
}

export class ControllerLoop {
  readonly #o: ControllerLoopOptions;
  readonly #passes: CoalescingRunner;
  readonly #services = new Map<string, Written<Service>>();
  readonly #pools = new Map<string, Written<LoadBalancerIPPool>>();
  /** the source's resourceVersion of every object in the current pass */
  readonly #sourceRv = new Map<string, string | undefined>();
  #passCount = 0;

  constructor(options: ControllerLoopOptions) {
    this.#o = options;
    this.#passes = new CoalescingRunner(() => this.#pass(), {
      clock: options.clock,
      backoff: options.backoff ?? DEFAULT_BACKOFF,
    });
  }

  /** passes run so far */
  get passes(): number {
    return this.#passCount;
  }

  /** Something changed (a read, leadership): run a pass now, or right after the current one. */
  notify(): void {
    this.#passes.run();
  }

  /** Resolves when no pass is running or scheduled to run at once. */
  idle(): Promise<void> {
    return this.#passes.idle();
  }

  stop(): Promise<void> {
    return this.#passes.stop();
  }

  async #pass(): Promise<RunOutcome> {
    const started = this.#o.clock.now();
    let outcome: ReconcileOutcome;
    try {
      outcome = await this.reconcileOnce();
    } catch (e) {
      outcome = { kind: "retry", delayMs: 0, cause: `bug: ${(e as Error).message}`, writes: 0 };
    }
    this.#passCount++;
    try {
      this.#o.report?.onPass?.(outcome, this.#o.clock.now() - started);
    } catch {
      // a failing report (a log or metrics sink) must not stop the loop
    }
    if (outcome.kind === "retry") return { kind: "retry", afterMs: outcome.delayMs };
    return outcome.kind === "failed" ? { kind: "failed" } : undefined;
  }

  /** One pass: decide from the current view and apply what differs. */
  async reconcileOnce(): Promise<ReconcileOutcome> {
    if (!this.#o.isLeader()) return { kind: "ok", writes: 0, reason: "not_leader" };
    const view = this.#o.view();
    if (!view) return { kind: "ok", writes: 0, reason: "not_synced" };
    this.#sourceRv.clear();
    for (const s of view.services)
      this.#sourceRv.set(`Service ${objectKey(s.metadata)}`, s.metadata.resourceVersion);
    for (const p of view.pools) this.#sourceRv.set(`Pool ${p.metadata.name}`, p.metadata.resourceVersion);
    const services = view.services.map((s) => this.#fresher(this.#services, objectKey(s.metadata), s));
    const pools = view.pools.map((p) => this.#fresher(this.#pools, p.metadata.name, p));
    const w = controllerWrites({
      services,
      pools,
      ...(view.namespaces && { namespaces: view.namespaces }),
      options: this.#o.options,
      nowMs: this.#o.clock.now(),
    });
    this.#o.report?.onPoolUsage?.(w.usage);
    let writes = 0;
    let retry: string | undefined;
    let failed: string | undefined;
    for (const work of w.services) {
      if (!this.#o.isLeader()) return { kind: "ok", writes, reason: "not_leader" };
      const r = await this.#applyService(work);
      writes += r.writes;
      if (r.result === "retry") retry ??= r.cause;
      if (r.result === "failed") failed ??= r.cause;
    }
    for (const p of w.pools) {
      if (!this.#o.isLeader()) return { kind: "ok", writes, reason: "not_leader" };
      const r = await this.#applyPool(p.pool, p.status);
      writes += r.writes;
      if (r.result === "retry") retry ??= r.cause;
      if (r.result === "failed") failed ??= r.cause;
    }
    if (retry !== undefined) return { kind: "retry", delayMs: CONFLICT_RETRY_MS, cause: retry, writes };
    if (failed !== undefined) return { kind: "failed", cause: failed, writes };
    return { kind: "ok", writes };
  }

  #fresher<T extends { metadata: { resourceVersion?: string | undefined } }>(
    written: Map<string, Written<T>>,
    key: string,
    fromSource: T,
  ): T {
    const w = written.get(key);
    if (!w) return fromSource;
    if (fromSource.metadata.resourceVersion === w.fromRv) return w.object;
    written.delete(key); // the source caught up (or someone else wrote): trust it again
    return fromSource;
  }

  async #event(event: ControllerEvent): Promise<void> {
    try {
      await this.#o.api.recordEvent(event, this.#o.clock.now());
      this.#o.report?.onEvent?.(event);
    } catch (e) {
      this.#o.report?.onWriteError?.(`Event ${event.reason}`, e as Error);
    }
  }

  async #applyService(
    work: ServiceWork,
  ): Promise<{ result: "ok" | "retry" | "failed"; writes: number; cause?: string }> {
    for (const e of work.before) await this.#event(e);
    const original = work.service;
    let current: Service = original;
    let writes = 0;
    const retries = this.#o.conflictRetries ?? 3;
    for (const write of work.writes) {
      for (let attempt = 0; ; attempt++) {
        if (!this.#o.isLeader()) return { result: "ok", writes };
        const next = applyServiceWrite(current, write, this.#o.clock.now());
        if (!next) break;
        try {
          current =
            write.op === "status"
              ? await this.#o.api.replaceServiceStatus(next)
              : await this.#o.api.replaceService(next);
          writes++;
          this.#services.set(work.key, {
            fromRv: this.#sourceRv.get(`Service ${work.key}`),
            object: current,
          });
          break;
        } catch (e) {
          const err = e as PasslbError;
          if (err.code === "api_not_found") return { result: "ok", writes }; // the Service is gone
          if (err.code === "api_conflict" && attempt < retries) {
            let fresh: Service | undefined;
            try {
              fresh = await this.#o.api.readService(
                original.metadata.namespace ?? "default",
                original.metadata.name ?? "",
              );
            } catch (readError) {
              return this.#writeFailed(work, readError as PasslbError, writes);
            }
            if (!fresh) return { result: "ok", writes };
            if (changedUnderneath(original, fresh))
              return { result: "retry", writes, cause: `Service ${work.key} changed while it was written` };
            current = fresh;
            continue;
          }
          return this.#writeFailed(work, err, writes);
        }
      }
    }
    for (const e of work.after) await this.#event(e);
    return { result: "ok", writes };
  }

  async #writeFailed(
    work: ServiceWork,
    err: PasslbError,
    writes: number,
  ): Promise<{ result: "retry" | "failed"; writes: number; cause: string }> {
    this.#o.report?.onWriteError?.(`Service ${work.key}`, err);
    if (err.code !== "api_unreachable")
      await this.#event(
        controllerEvent(
          serviceTarget(work.service),
          "SyncLoadBalancerFailed",
          `Error syncing load balancer: ${err.message}`,
        ),
      );
    const cause = `Service ${work.key}: ${err.message}`;
    return { result: err.code === "api_request_failed" ? "failed" : "retry", writes, cause };
  }

  async #applyPool(
    pool: LoadBalancerIPPool,
    status: NonNullable<LoadBalancerIPPool["status"]>,
  ): Promise<{ result: "ok" | "retry" | "failed"; writes: number; cause?: string }> {
    let current = pool;
    const retries = this.#o.conflictRetries ?? 3;
    for (let attempt = 0; ; attempt++) {
      if (!this.#o.isLeader()) return { result: "ok", writes: 0 };
      try {
        const written = await this.#o.api.replacePoolStatus({ ...current, status });
        this.#pools.set(pool.metadata.name, {
          fromRv: this.#sourceRv.get(`Pool ${pool.metadata.name}`),
          object: written,
        });
        return { result: "ok", writes: 1 };
      } catch (e) {
        const err = e as PasslbError;
        if (err.code === "api_not_found") return { result: "ok", writes: 0 };
        if (err.code === "api_conflict" && attempt < retries) {
          try {
            const fresh = await this.#o.api.readPool(pool.metadata.name);
            if (!fresh) return { result: "ok", writes: 0 };
            if (canonical(fresh.spec) !== canonical(pool.spec))
              return {
                result: "retry",
                writes: 0,
                cause: `pool ${pool.metadata.name} changed while it was written`,
              };
            current = fresh;
            continue;
          } catch (readError) {
            const re = readError as PasslbError;
            return { result: "retry", writes: 0, cause: `pool ${pool.metadata.name}: ${re.message}` };
          }
        }
        this.#o.report?.onWriteError?.(`LoadBalancerIPPool ${pool.metadata.name}`, err);
        const cause = `pool ${pool.metadata.name}: ${err.message}`;
        return { result: err.code === "api_request_failed" ? "failed" : "retry", writes: 0, cause };
      }
    }
  }
}

/** Whether a Service changed in a way the pass's decision depended on. */
function changedUnderneath(before: Service, after: Service): boolean {
  return (
    before.metadata.generation !== after.metadata.generation ||
    Boolean(before.metadata.deletionTimestamp) !== Boolean(after.metadata.deletionTimestamp) ||
    canonical(before.spec) !== canonical(after.spec) ||
    canonical(before.metadata.annotations ?? {}) !== canonical(after.metadata.annotations ?? {})
  );
}

/** JSON with object keys sorted: equal for equal data whatever the key order. */
function canonical(value: unknown): string {
  return JSON.stringify(value, (_k, v: unknown) =>
    v && typeof v === "object" && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v as Record<string, unknown>).sort(([a], [b]) => (a < b ? -1 : 1)))
      : v,
  );
}
