/**
 * The LB host's reconcile loop for the nftables data plane. Owns its schedule (two
 * CoalescingRunners on a Clock: passes, drift checks); everything else comes in through
 * narrow interfaces (NftDriver, RouteApplier, HealthSource, Clock), each with a fake, so
 * tests drive it without a kernel.
 *
 * One pass (level-triggered, docs/architecture.md): snapshot → plans and forwarding per Service
 * (lb-forwardings.ts, health applied) → desired NftState (desired-state.ts, visiting only
 * the Services whose forwarding changed) → the smallest script that gets the kernel there
 * (visiting only the objects the pass touched) → one nft transaction; policy routes around
 * it (new next hops before, stale ones after). Passes run on a CoalescingRunner
 * (cluster/coalescing-runner.ts): debounced, never overlapping, a request during a pass
 * runs one more pass after it, and a failed pass backs off (100 ms doubling to 30 s) with
 * requests held until the retry.
 *
 * - Start adopts: the table already in the kernel (a previous process's) becomes the
 *   current state, node marks and slot maps keep their names, and only differences are
 *   sent — no flush, so a restart does not interrupt traffic. No table: a full sync.
 * - Full sync (atomic replace) at start without a table, after drift, after a failed
 *   incremental transaction, or when a change is not expressible as updates.
 * - Drift (issue 16): every `driftCheckMs` everything passlb owns in the kernel is compared
 *   with what it last applied: the table (objects, chains by rule count and hash, every
 *   element) unless the kernel's nftables generation has not moved since the last clean
 *   comparison (GenerationWatch, nft-generation.ts: then nothing can differ), and the
 *   policy rules and route tables (route-drift.ts). Table drift → full sync; route drift →
 *   the routes are installed again.
 * - The TCP flow table (`<table>-flows`, render/flow-map.ts), with `flowTable`: created by
 *   the first pass, drift-checked beside the table, brought back by the next pass.
 * - Bad input never corrupts what works (lb-forwardings.ts keeps last good forwardings).
 * - After an applied pass, UDP flows pinned to a node that left a listener's tables
 *   (and is still live for other Services) are released (lb-flow-release.ts) through the
 *   optional ConntrackDriver.
 * Outcomes are values (SyncOutcome); the runner owns the retry backoff.
 */

import { CoalescingRunner, type RunOutcome } from "../../cluster/coalescing-runner.ts";
import type { ConntrackDriver } from "../../drivers/conntrack-tool.ts";
import type { NftDriver } from "../../drivers/nft.ts";
import { nftScript } from "../../drivers/nft-transaction.ts";
import { ALL_UNKNOWN, type HealthLookup, type ServiceForwarding } from "../../forwarding/forwarding-state.ts";
import type { Clock } from "../../health/clock.ts";
import type { Snapshot } from "../../k8s/snapshot.ts";
import { LbForwardings } from "../lb-forwardings.ts";
import type { Forward } from "../routing/encap.ts";
import {
  type PolicyRoute,
  policyRoutesOf,
  type RouteApplier,
  sameRoutes,
  unionRoutes,
} from "../routing/policy-routes.ts";
import { expectedRouting, routingDrift } from "../routing/route-drift.ts";
import { FlowTableKeeper } from "./flow-table-keeper.ts";
import { releasedFlows } from "./lb-flow-release.ts";
import type { HealthSource, LbEvent, SyncOutcome } from "./lb-ports.ts";
import { driftBetween } from "./nft-drift.ts";
import type { GenerationWatch } from "./nft-generation.ts";
import { createDesiredCache, type DesiredUpdate, desiredNftUpdate } from "./render/desired-state.ts";
import type { FlowTableConfig } from "./render/flow-map.ts";
import type { NftState } from "./render/nft-state.ts";
import { needsFullSync, renderElementUpdates, renderRuleset } from "./render/render-ruleset.ts";

export type { HealthSource, LbEvent, SyncOutcome } from "./lb-ports.ts";
export { driftBetween } from "./nft-drift.ts";

export interface LbControllerOptions {
  readonly table: string;
  readonly seed: number;
  /** keep the TCP flow table (render/flow-map.ts) with this size and idle timeout; without
   * it TCP flows are pinned by conntrack mark only */
  readonly flowTable?: FlowTableConfig;
  readonly nft: NftDriver;
  readonly routes?: RouteApplier;
  /** how marked packets reach their node (encap.ts); default: policy route on the segment */
  readonly forward?: Forward;
  readonly health?: HealthSource;
  /** timers, and the timings of events */
  readonly clock: Clock;
  readonly sizeFor?: (backends: number) => number;
  /** where VIPs come from (planner.ts PlanOptions): `status` on an LB host in Kubernetes mode */
  readonly vipSource?: "ipam" | "status";
  /** how long a request waits for its pass, so a burst of changes is one pass (default 0) */
  readonly debounceMs?: number;
  readonly driftCheckMs?: number;
  /** the kernel's nftables generation: lets a drift check skip listing an unchanged table */
  readonly generations?: GenerationWatch;
  readonly onEvent?: (event: LbEvent) => void;
  /** releases pinned UDP flows of nodes that left a Service's table; none without it */
  readonly conntrack?: ConntrackDriver;
}

const MAX_BACKOFF_MS = 30_000;
const ROUTE_RETRY_MS = 1000;

export class LbController {
  readonly #o: LbControllerOptions;
  #snapshot: Snapshot | undefined;
  #degraded = false;
  #current: NftState | undefined;
  #needFull = true;
  readonly #forwardings: LbForwardings;
  #routes: readonly PolicyRoute[] | undefined;
  readonly #desiredCache = createDesiredCache();
  readonly #passes: CoalescingRunner;
  #drift: CoalescingRunner | undefined;
  /** the generation token at the last drift check that found the table as applied */
  #verifiedToken: string | undefined;
  #stopped = false;
  #unsubscribe: (() => void) | undefined;
  #serial: Promise<unknown> = Promise.resolve();
  readonly #flows: FlowTableKeeper | undefined;

  constructor(options: LbControllerOptions) {
    this.#o = options;
    if (options.flowTable)
      this.#flows = new FlowTableKeeper(options.nft, options.table, options.seed, options.flowTable);
    this.#forwardings = new LbForwardings({
      seed: options.seed,
      ...(options.sizeFor && { sizeFor: options.sizeFor }),
      ...(options.vipSource && { vipSource: options.vipSource }),
      onKept: (service, reason) => options.onEvent?.({ kind: "kept_last_good", service, reason }),
    });
    this.#passes = new CoalescingRunner(() => this.#pass(), {
      clock: options.clock,
      delayMs: options.debounceMs ?? 0,
      backoff: { initialMs: 100, maxMs: MAX_BACKOFF_MS },
      holdBackoff: true,
      startFromTimer: true,
    });
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

  /** Ask for a pass: after the debounce, or no later than `withinMs`. */
  request(withinMs?: number): void {
    if (this.#stopped) return;
    this.#passes.run(withinMs);
  }

  /** Resolves after the next pass finishes (tests and benchmarks). */
  settled(): Promise<void> {
    return this.#passes.settled();
  }

  /** the forwarding state last programmed, per Service (for metrics and the dashboard) */
  get forwarding(): readonly ServiceForwarding[] {
    return this.#forwardings.lastGood;
  }

  /** The policy routes last installed (undefined before the first or after a failure). */
  get routes(): readonly PolicyRoute[] | undefined {
    return this.#routes;
  }

  /** The state last applied (or adopted). */
  get current(): NftState | undefined {
    return this.#current;
  }

  /** Stop timers and wait for a running pass. The kernel keeps forwarding as it is. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    await Promise.all([this.#passes.stop(), this.#drift?.stop()]);
  }

  /** One scheduled pass: its outcome as an event, and as the runner's retry. */
  async #pass(): Promise<RunOutcome> {
    const started = this.#o.clock.now();
    const outcome = await this.syncOnce();
    if (outcome.kind === "ok") {
      this.#o.onEvent?.({
        kind: "synced",
        mode: outcome.mode,
        bytes: outcome.bytes,
        ms: this.#o.clock.now() - started,
      });
      return undefined;
    }
    const delay = outcome.kind === "retry" ? outcome.delayMs : MAX_BACKOFF_MS;
    this.#o.onEvent?.({ kind: "sync_failed", error: outcome.cause, retryInMs: delay });
    return outcome.kind === "retry" ? { kind: "retry", afterMs: delay } : { kind: "failed" };
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
    let update: DesiredUpdate;
    // only with a conntrack driver: the release compares the forwardings around the pass
    const before = this.#o.conntrack ? this.#forwardings.lastGood : undefined;
    try {
      update = this.#desired(snapshot);
    } catch (cause) {
      return { kind: "failed", cause };
    }
    const { state: desired, touched } = update;
    const full = this.#needFull || !this.#current || needsFullSync(this.#current, desired, touched);
    const tx = full ? renderRuleset(desired) : renderElementUpdates(this.#current!, desired, touched);
    const wanted = policyRoutesOf(desired, this.#o.forward);
    // routes for new next hops go in before any mark can point at them
    if (!sameRoutes(this.#routes, wanted))
      await this.#syncRoutes(unionRoutes(this.#routes ?? [], wanted), false);
    try {
      if (tx.ops.length > 0) await this.#o.nft.run(tx);
      await this.#flows?.ensure();
      this.#current = desired;
      this.#needFull = false;
      if (!sameRoutes(this.#routes, wanted)) await this.#syncRoutes(wanted, true);
      if (before) await this.#releaseFlows(before, desired);
      return {
        kind: "ok",
        mode: tx.ops.length === 0 ? "noop" : full ? "full" : "incremental",
        bytes: tx.ops.length === 0 ? 0 : nftScript(tx).length,
      };
    } catch (cause) {
      // an incremental transaction that failed means our picture of the kernel is wrong
      this.#needFull = true;
      return { kind: "retry", delayMs: this.#passes.nextRetryMs(), cause };
    }
  }

  /** Deletes the conntrack entries of flows pinned to nodes that left a listener's tables;
   * a failure is reported (the flows stay pinned until a later change or their timeout). */
  async #releaseFlows(before: readonly ServiceForwarding[], applied: NftState): Promise<void> {
    for (const r of releasedFlows(before, this.#forwardings.lastGood, applied)) {
      try {
        const flows = await this.#o.conntrack!.deleteFlows(r);
        if (flows > 0) this.#o.onEvent?.({ kind: "flows_released", service: r.service, node: r.node, flows });
      } catch (error) {
        this.#o.onEvent?.({ kind: "flows_release_failed", service: r.service, node: r.node, error });
      }
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

  #desired(snapshot: Snapshot): DesiredUpdate {
    const health: HealthLookup = this.#o.health?.lookup ?? ALL_UNKNOWN;
    const version = this.#o.health ? this.#o.health.version?.() : 0;
    const forwardings = this.#forwardings.update(snapshot, this.#degraded, health, version);
    return desiredNftUpdate({
      table: this.#o.table,
      seed: this.#o.seed,
      zones: snapshot.config.zones,
      previous: this.#current ?? { table: this.#o.table, sets: new Map(), chains: new Map() },
      forwardings,
      cache: this.#desiredCache,
    });
  }

  /** Compare the kernel with what we applied (table and routes); schedule the repair of
   * any difference. Returns what differed, or undefined. */
  async checkDrift(): Promise<string | undefined> {
    if (!this.#current || this.#passes.running) return undefined;
    const routes = await this.#checkRouteDrift();
    const table = await this.#checkTableDrift();
    const flows = await this.#checkFlowTable();
    return [table, routes, flows].filter((w) => w !== undefined).join("; ") || undefined;
  }

  async #checkTableDrift(): Promise<string | undefined> {
    const current = this.#current;
    if (!current || this.#passes.running) return undefined;
    const token = this.#o.generations?.token();
    if (token !== undefined && token === this.#verifiedToken) return undefined;
    let observed: NftState | undefined;
    try {
      observed = await this.#o.nft.dump(this.#o.table);
    } catch (e) {
      return `dump failed: ${(e as Error).message}`;
    }
    if (this.#current !== current || this.#passes.running) return undefined; // a pass ran meanwhile
    const what = driftBetween(current, observed, true);
    if (!what) {
      this.#verifiedToken = token;
      return undefined;
    }
    this.#verifiedToken = undefined;
    this.#o.onEvent?.({ kind: "drift", scope: "table", what });
    this.#needFull = true;
    this.request(0);
    return what;
  }

  /** the flow table (flow-table-keeper.ts): listed terse, and only after a commit named it */
  async #checkFlowTable(): Promise<string | undefined> {
    if (!this.#flows || this.#passes.running) return undefined;
    let what: string | undefined;
    try {
      what = await this.#flows.check(this.#o.generations?.tableToken?.(this.#flows.table));
    } catch (e) {
      return `flow table dump failed: ${(e as Error).message}`;
    }
    if (!what) return undefined;
    this.#o.onEvent?.({ kind: "drift", scope: "flows", what });
    this.request(0);
    return what;
  }

  async #checkRouteDrift(): Promise<string | undefined> {
    const routes = this.#routes;
    if (!this.#o.routes || !routes || this.#passes.running) return undefined;
    const expected = expectedRouting(routes);
    let what: string | undefined;
    try {
      what = routingDrift(expected, await this.#o.routes.read(expected.tables));
    } catch (e) {
      return `routes read failed: ${(e as Error).message}`;
    }
    if (!what || this.#routes !== routes || this.#passes.running) return undefined;
    this.#routes = undefined; // the next pass installs them again
    this.#o.onEvent?.({ kind: "drift", scope: "routes", what });
    this.request(0);
    return what;
  }

  /** a drift check every `driftCheckMs` after the previous one ended */
  #armDrift(): void {
    const every = this.#o.driftCheckMs ?? 5000;
    if (every <= 0 || this.#stopped || this.#drift) return;
    this.#drift = new CoalescingRunner(
      async () => {
        await this.checkDrift();
      },
      { clock: this.#o.clock, maxIntervalMs: every },
    );
  }
}
