/**
 * The LB host's reconcile loop for the nftables data plane. Owns its timers; everything
 * else comes in through narrow interfaces (NftApplier, RouteApplier, HealthSource, Timers),
 * each with a fake, so tests drive it without a kernel.
 *
 * One pass (level-triggered, DESIGN.md): snapshot → plans (planSnapshot, sticky subsets) →
 * forwarding per Service (health applied) → desired NftState → the smallest script that
 * gets the kernel there → one nft transaction; policy routes around it (new next hops
 * before, stale ones after). Passes are debounced and never overlap; a request during a
 * pass runs another pass after it.
 *
 * - Start adopts: the table already in the kernel (a previous process's) becomes the
 *   current state, node marks and slot maps keep their names, and only differences are
 *   sent — no flush, so a restart does not interrupt traffic. No table: a full sync.
 * - Full sync (atomic replace) at start without a table, after drift, after a failed
 *   incremental transaction, or when a change is not expressible as updates.
 * - Drift: every `driftCheckMs` the table is listed (terse: objects, chains, rule counts,
 *   hashes; every `elementCheckEvery`-th time with elements) and compared with what we
 *   last applied; any difference → full sync.
 * - Bad input never corrupts what works: a Service whose forwarding cannot be built, or
 *   whose plan has error-level issues, keeps its last good forwarding; while the input has
 *   problems, Services that vanished from it keep theirs too.
 * Outcomes are values (SyncOutcome); the loop owns the retry backoff.
 */
import type { Snapshot } from "../k8s/snapshot.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { createPlanCache, planSnapshot } from "../plan/planner.ts";
import {
  ALL_UNKNOWN,
  type HealthLookup,
  type ServiceForwarding,
  serviceForwarding,
} from "./forwarding-state.ts";
import { type MaglevInput, type MaglevTable, maglevTable } from "./maglev.ts";
import type { NftApplier } from "./nft-applier.ts";
import { type PolicyRoute, policyRoutesOf, type RouteApplier } from "./policy-routes.ts";
import { createDesiredCache, desiredNftState } from "./render/desired-state.ts";
import type { NftState } from "./render/nft-state.ts";
import { needsFullSync, renderElementUpdates, renderRuleset } from "./render/render-ruleset.ts";

/** Where health comes from: the prober, adapted, plugs in as this one object. */
export interface HealthSource {
  readonly lookup: HealthLookup;
  /** calls `listener` after any transition or weight change; returns an unsubscribe */
  subscribe(listener: () => void): () => void;
}

export interface Timers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export type SyncOutcome =
  | { readonly kind: "ok"; readonly mode: "full" | "incremental" | "noop"; readonly bytes: number }
  | { readonly kind: "retry"; readonly delayMs: number; readonly cause: unknown }
  | { readonly kind: "failed"; readonly cause: unknown };

export type LbEvent =
  | {
      readonly kind: "synced";
      readonly mode: "full" | "incremental" | "noop";
      readonly bytes: number;
      readonly ms: number;
    }
  | { readonly kind: "sync_failed"; readonly error: unknown; readonly retryInMs: number }
  | { readonly kind: "adopted"; readonly sets: number; readonly chains: number }
  | { readonly kind: "drift"; readonly what: string }
  | { readonly kind: "routes_failed"; readonly error: unknown }
  | { readonly kind: "kept_last_good"; readonly service: string; readonly reason: string };

export interface LbControllerOptions {
  readonly table: string;
  readonly seed: number;
  readonly nft: NftApplier;
  readonly routes?: RouteApplier;
  readonly health?: HealthSource;
  readonly timers: Timers;
  /** monotonic milliseconds, for event timings only */
  readonly now: () => number;
  readonly sizeFor?: (backends: number) => number;
  /** where VIPs come from (planner.ts PlanOptions): `status` on an LB host in Kubernetes mode */
  readonly vipSource?: "ipam" | "status";
  readonly debounceMs?: number;
  readonly driftCheckMs?: number;
  readonly elementCheckEvery?: number;
  readonly onEvent?: (event: LbEvent) => void;
}

const MAX_BACKOFF_MS = 30_000;
const ROUTE_RETRY_MS = 1000;

export class LbController {
  readonly #o: LbControllerOptions;
  #snapshot: Snapshot | undefined;
  #degraded = false;
  #current: NftState | undefined;
  #needFull = true;
  #plans = new Map<string, LoadBalancerPlan>();
  #lastGood = new Map<string, ServiceForwarding>();
  #routes: readonly PolicyRoute[] | undefined;
  readonly #cache = createPlanCache();
  readonly #desiredCache = createDesiredCache();
  #tables = new Map<string, MaglevTable>();
  #memo = new Map<string, { plan: LoadBalancerPlan; health: string; forwarding: ServiceForwarding }>();
  #timer: unknown;
  #driftTimer: unknown;
  #driftChecks = 0;
  #running: Promise<void> | undefined;
  #again = false;
  #failures = 0;
  #stopped = false;
  #unsubscribe: (() => void) | undefined;
  /** resolves waiters of `settled()` after each pass */
  #waiters: (() => void)[] = [];
  #serial: Promise<unknown> = Promise.resolve();

  constructor(options: LbControllerOptions) {
    this.#o = options;
  }

  /** Adopt what the kernel holds, subscribe to health, start drift checks. */
  async start(): Promise<void> {
    const observed = await this.#o.nft.dump(this.#o.table);
    if (observed) {
      this.#current = observed;
      this.#needFull = false;
      this.#o.onEvent?.({ kind: "adopted", sets: observed.sets.size, chains: observed.chains.size });
    }
    this.#unsubscribe = this.#o.health?.subscribe(() => this.request());
    this.#armDrift();
  }

  /** A new snapshot; `degraded` when the input had problems (vanished Services are kept). */
  setSnapshot(snapshot: Snapshot, degraded = false, schedule = true): void {
    this.#snapshot = snapshot;
    this.#degraded = degraded;
    if (schedule) this.request();
  }

  /** Ask for a pass (debounced). */
  request(delayMs = this.#o.debounceMs ?? 0): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    if (this.#timer !== undefined) return;
    this.#timer = this.#o.timers.setTimeout(() => {
      this.#timer = undefined;
      void this.#pass();
    }, delayMs);
  }

  /** Resolves after the next pass finishes (tests and benchmarks). */
  settled(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** The state last applied (or adopted). */
  /** the forwarding state last programmed, per Service (for metrics and the dashboard) */
  get forwarding(): readonly ServiceForwarding[] {
    return [...this.#lastGood.values()];
  }

  get current(): NftState | undefined {
    return this.#current;
  }

  /** Stop timers and wait for a running pass. The kernel keeps forwarding as it is. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    if (this.#timer !== undefined) this.#o.timers.clearTimeout(this.#timer);
    if (this.#driftTimer !== undefined) this.#o.timers.clearTimeout(this.#driftTimer);
    await this.#running;
  }

  async #pass(): Promise<void> {
    const run = (async () => {
      const started = this.#o.now();
      const outcome = await this.syncOnce();
      if (outcome.kind === "ok") {
        this.#failures = 0;
        this.#o.onEvent?.({
          kind: "synced",
          mode: outcome.mode,
          bytes: outcome.bytes,
          ms: this.#o.now() - started,
        });
      } else {
        const delay = outcome.kind === "retry" ? outcome.delayMs : MAX_BACKOFF_MS;
        this.#o.onEvent?.({ kind: "sync_failed", error: outcome.cause, retryInMs: delay });
        this.#again = false;
        if (!this.#stopped)
          this.#timer = this.#o.timers.setTimeout(() => {
            this.#timer = undefined;
            void this.#pass();
          }, delay);
      }
    })();
    this.#running = run;
    try {
      await run;
    } finally {
      this.#running = undefined;
      const waiters = this.#waiters;
      this.#waiters = [];
      for (const w of waiters) w();
      if (this.#again) {
        this.#again = false;
        this.request();
      }
    }
  }

  /** One reconcile pass (passes never overlap, whoever calls); exposed for tests. */
  syncOnce(): Promise<SyncOutcome> {
    const next = this.#serial.then(() => this.#syncOnce());
    this.#serial = next.catch(() => undefined);
    return next;
  }

  async #syncOnce(): Promise<SyncOutcome> {
    const snapshot = this.#snapshot;
    if (!snapshot) return { kind: "ok", mode: "noop", bytes: 0 };
    let desired: NftState;
    try {
      desired = this.#desired(snapshot);
    } catch (cause) {
      return { kind: "failed", cause };
    }
    const full = this.#needFull || !this.#current || needsFullSync(this.#current, desired);
    const script = full ? renderRuleset(desired) : renderElementUpdates(this.#current!, desired);
    const wanted = policyRoutesOf(desired);
    // routes for new next hops go in before any mark can point at them
    if (!sameRoutes(this.#routes, wanted))
      await this.#syncRoutes(unionRoutes(this.#routes ?? [], wanted), false);
    try {
      if (script !== "") await this.#o.nft.apply(script);
      this.#current = desired;
      this.#needFull = false;
      if (!sameRoutes(this.#routes, wanted)) await this.#syncRoutes(wanted, true);
      return {
        kind: "ok",
        mode: script === "" ? "noop" : full ? "full" : "incremental",
        bytes: script.length,
      };
    } catch (cause) {
      // an incremental transaction that failed means our picture of the kernel is wrong
      this.#needFull = true;
      this.#failures++;
      return { kind: "retry", delayMs: Math.min(MAX_BACKOFF_MS, 100 * 2 ** (this.#failures - 1)), cause };
    }
  }

  /** A route failure does not hold back the nft update (one bad next hop must not freeze
   * every Service); it is reported and retried on a later pass. */
  async #syncRoutes(routes: readonly PolicyRoute[], final: boolean): Promise<void> {
    if (!this.#o.routes) return;
    try {
      await this.#o.routes.sync(routes);
      if (final) this.#routes = routes;
    } catch (error) {
      this.#routes = undefined;
      this.#o.onEvent?.({ kind: "routes_failed", error });
      if (final && !this.#stopped) this.request(ROUTE_RETRY_MS);
    }
  }

  #desired(snapshot: Snapshot): NftState {
    const vipSource = this.#o.vipSource ?? "ipam";
    let { plans } = planSnapshot(snapshot, { previous: this.#plans, vipSource }, this.#cache);
    if (this.#plans.size === 0 && plans.length > 0) {
      // first pass: plan once more with these plans as the previous ones, so the planner's
      // memo (keyed on the previous plan) settles now rather than on the next change
      this.#plans = new Map(plans.map((p) => [p.service, p]));
      plans = planSnapshot(snapshot, { previous: this.#plans, vipSource }, this.#cache).plans;
    }
    const health = this.#o.health?.lookup ?? ALL_UNKNOWN;
    // equal Maglev inputs share one table object (Services on the same nodes), across passes
    const tables = new Map<string, MaglevTable>();
    const tableFor = (input: MaglevInput): MaglevTable => {
      const key = `${input.size}|${input.seed}|${input.backends.map((b) => `${b.name}:${b.weight}`).join(",")}`;
      let table = tables.get(key) ?? this.#tables.get(key);
      if (!table) table = maglevTable(input);
      tables.set(key, table);
      return table;
    };
    const options = {
      seed: this.#o.seed,
      tableFor,
      ...(this.#o.sizeFor ? { sizeFor: this.#o.sizeFor } : {}),
    };
    const memo = new Map<string, { plan: LoadBalancerPlan; health: string; forwarding: ServiceForwarding }>();
    const forwardings = new Map<string, ServiceForwarding>();
    for (const plan of plans) {
      const last = this.#lastGood.get(plan.service);
      const error = plan.issues.find((i) => i.severity === "error");
      if (error && last) {
        this.#o.onEvent?.({ kind: "kept_last_good", service: plan.service, reason: error.code });
        forwardings.set(plan.service, last);
        continue;
      }
      const signature = healthSignature(plan, health);
      const known = this.#memo.get(plan.service);
      if (known && known.plan === plan && known.health === signature) {
        forwardings.set(plan.service, known.forwarding);
        memo.set(plan.service, known);
        continue;
      }
      try {
        const forwarding = serviceForwarding(plan, health, options);
        forwardings.set(plan.service, forwarding);
        memo.set(plan.service, { plan, health: signature, forwarding });
      } catch (e) {
        this.#o.onEvent?.({ kind: "kept_last_good", service: plan.service, reason: (e as Error).message });
        if (last) forwardings.set(plan.service, last);
      }
    }
    if (this.#degraded)
      for (const [service, last] of this.#lastGood)
        if (!forwardings.has(service)) {
          this.#o.onEvent?.({ kind: "kept_last_good", service, reason: "input_invalid" });
          forwardings.set(service, last);
        }
    const desired = desiredNftState({
      table: this.#o.table,
      seed: this.#o.seed,
      zones: snapshot.config.zones,
      previous: this.#current ?? { table: this.#o.table, sets: new Map(), chains: new Map() },
      forwardings: [...forwardings.values()],
      cache: this.#desiredCache,
    });
    this.#tables = tables;
    this.#memo = memo;
    // the planner only reads the previous members (sticky subsets) and memoises on the
    // previous plan's identity: keep the stored plan while its members stay the same
    const previous = new Map<string, LoadBalancerPlan>();
    for (const p of plans) {
      const stored = this.#plans.get(p.service);
      previous.set(p.service, stored && sameMembers(stored, p) ? stored : p);
    }
    this.#plans = previous;
    this.#lastGood = forwardings;
    return desired;
  }

  /** Compare the kernel with what we applied; schedule a full sync on any difference. */
  async checkDrift(withElements = false): Promise<string | undefined> {
    const current = this.#current;
    if (!current || this.#running) return undefined;
    let observed: NftState | undefined;
    try {
      observed = await this.#o.nft.dump(this.#o.table, { terse: !withElements });
    } catch (e) {
      return `dump failed: ${(e as Error).message}`;
    }
    if (this.#current !== current) return undefined; // a pass ran meanwhile
    const what = driftBetween(current, observed, withElements);
    if (what) {
      this.#o.onEvent?.({ kind: "drift", what });
      this.#needFull = true;
      this.request(0);
    }
    return what;
  }

  #armDrift(): void {
    const every = this.#o.driftCheckMs ?? 5000;
    if (every <= 0 || this.#stopped) return;
    this.#driftTimer = this.#o.timers.setTimeout(async () => {
      this.#driftTimer = undefined;
      this.#driftChecks++;
      await this.checkDrift(this.#driftChecks % (this.#o.elementCheckEvery ?? 12) === 0);
      this.#armDrift();
    }, every);
  }
}

function sameMembers(a: LoadBalancerPlan, b: LoadBalancerPlan): boolean {
  return a.members.length === b.members.length && a.members.every((m, i) => m.node === b.members[i]!.node);
}

const STATE_CODE = { healthy: "h", unhealthy: "x", unknown: "?" } as const;

/** Everything health says about a plan's members, as a string: equal → same forwarding. */
function healthSignature(plan: LoadBalancerPlan, health: HealthLookup): string {
  let out = "";
  for (const check of plan.healthChecks)
    for (const m of plan.members) {
      const h = health(plan.service, check.id, m.node);
      out += `${STATE_CODE[h.state]}${h.weight ?? ""};`;
    }
  return out;
}

/** A short description of how `observed` differs from `expected`, or undefined. */
export function driftBetween(
  expected: NftState,
  observed: NftState | undefined,
  elements: boolean,
): string | undefined {
  if (!observed) return "table missing";
  for (const name of expected.sets.keys()) if (!observed.sets.has(name)) return `set ${name} missing`;
  for (const name of observed.sets.keys()) if (!expected.sets.has(name)) return `unexpected set ${name}`;
  for (const [name, c] of expected.chains) {
    const o = observed.chains.get(name);
    if (!o) return `chain ${name} missing`;
    if (o.ruleCount !== c.ruleCount || o.hash !== c.hash) return `chain ${name} rules changed`;
  }
  for (const name of observed.chains.keys())
    if (!expected.chains.has(name)) return `unexpected chain ${name}`;
  if (elements)
    for (const [name, s] of expected.sets) {
      const o = observed.sets.get(name)!;
      if (o.elements.size !== s.elements.size)
        return `set ${name} has ${o.elements.size} elements, not ${s.elements.size}`;
      for (const [k, v] of s.elements) if (o.elements.get(k) !== v) return `set ${name} element ${k} differs`;
    }
  return undefined;
}

function sameRoutes(a: readonly PolicyRoute[] | undefined, b: readonly PolicyRoute[]): boolean {
  if (!a || a.length !== b.length) return false;
  return a.every((r, i) => r.mark === b[i]!.mark && r.via === b[i]!.via && r.family === b[i]!.family);
}

function unionRoutes(a: readonly PolicyRoute[], b: readonly PolicyRoute[]): PolicyRoute[] {
  const byMark = new Map<number, PolicyRoute>();
  for (const r of a) byMark.set(r.mark, r);
  for (const r of b) byMark.set(r.mark, r);
  return [...byMark.values()];
}
