/**
 * The LB host's reconcile loop: snapshot + health → forwarding state per Service → a data
 * plane (lb-dataplane.ts LbDataplane). Owns its schedule (two CoalescingRunners on a Clock:
 * passes, drift checks); everything else comes in through narrow interfaces (HealthSource,
 * Clock, the data plane), each with a fake, so tests drive it without a kernel. By default
 * the data plane is the nftables one (nftables-dataplane.ts), built from these options;
 * another LbDataplane may be passed instead.
 *
 * One pass (level-triggered, docs/architecture.md): snapshot → plans and forwarding per
 * Service (lb-forwardings.ts, health applied) → `dataplane.apply` (nftables: the smallest
 * transaction, policy routes around it, the flow table, UDP flow release). Passes run on a
 * CoalescingRunner (cluster/coalescing-runner.ts): debounced, never overlapping, a request
 * during a pass runs one more pass after it, and a failed pass backs off (100 ms doubling to
 * 30 s) with requests held until the retry; a state the data plane cannot render
 * (UnrenderableState) waits the longest.
 *
 * - Every `driftCheckMs` the drift timer calls `dataplane.check()`; the nftables data plane
 *   asks this loop for a pass to repair what drifted (a full sync, the routes again, the
 *   flow table), so the repair is a pass like any other.
 * - Bad input never corrupts what works (lb-forwardings.ts keeps last good forwardings).
 * Outcomes are values (SyncOutcome); the runner owns the retry backoff. Events (LbEvent):
 * this loop's (synced, sync_failed, kept_last_good) and the nftables data plane's
 * (adopted, drift, routes_failed, flows_released, flows_release_failed).
 */

import { CoalescingRunner, type RunOutcome } from "../../cluster/coalescing-runner.ts";
import { ALL_UNKNOWN, type HealthLookup, type ServiceForwarding } from "../../forwarding/forwarding-state.ts";
import type { Clock } from "../../health/clock.ts";
import type { Snapshot } from "../../k8s/snapshot.ts";
import { type LbDataplane, UnrenderableState } from "../lb-dataplane.ts";
import { LbForwardings } from "../lb-forwardings.ts";
import type { PolicyRoute } from "../routing/policy-routes.ts";
import type { HealthSource, LbEvent, SyncOutcome } from "./lb-ports.ts";
import { NftablesDataplane, type NftablesDataplaneOptions } from "./nftables-dataplane.ts";
import type { NftState } from "./render/nft-state.ts";

export type { HealthSource, LbEvent, SyncOutcome } from "./lb-ports.ts";
export { driftBetween } from "./nft-drift.ts";

/** what the loop itself needs, whichever data plane it drives */
export interface LbLoopOptions {
  readonly seed: number;
  readonly health?: HealthSource;
  /** timers, and the timings of events */
  readonly clock: Clock;
  readonly sizeFor?: (backends: number) => number;
  /** where VIPs come from (planner.ts PlanOptions): `status` on an LB host in Kubernetes mode */
  readonly vipSource?: "ipam" | "status";
  /** how long a request waits for its pass, so a burst of changes is one pass (default 0) */
  readonly debounceMs?: number;
  readonly driftCheckMs?: number;
  readonly onEvent?: (event: LbEvent) => void;
}

/** the loop over the nftables data plane, built from its options */
export interface LbControllerOptions
  extends LbLoopOptions,
    Omit<NftablesDataplaneOptions, "onEvent" | "schedule" | "now"> {}

const MAX_BACKOFF_MS = 30_000;

export class LbController {
  readonly #o: LbLoopOptions;
  #snapshot: Snapshot | undefined;
  #degraded = false;
  readonly #forwardings: LbForwardings;
  readonly #dataplane: LbDataplane;
  /** the nftables data plane when this loop built it (current table, routes) */
  readonly #nft: NftablesDataplane | undefined;
  readonly #passes: CoalescingRunner;
  #drift: CoalescingRunner | undefined;
  #stopped = false;
  #unsubscribe: (() => void) | undefined;
  #serial: Promise<unknown> = Promise.resolve();

  constructor(options: LbControllerOptions | (LbLoopOptions & { readonly dataplane: LbDataplane })) {
    this.#o = options;
    if ("dataplane" in options) this.#dataplane = options.dataplane;
    else {
      const { onEvent, clock, ...nft } = options;
      this.#nft = new NftablesDataplane({
        ...nft,
        ...(onEvent && { onEvent }),
        schedule: (withinMs) => this.request(withinMs),
        now: () => clock.now(),
      });
      this.#dataplane = this.#nft;
    }
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

  /** the data plane this loop drives */
  get dataplane(): LbDataplane {
    return this.#dataplane;
  }

  /** Start (adopt what the kernel holds), subscribe to health, start drift checks. */
  async start(): Promise<void> {
    await this.#dataplane.start();
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
    return this.#nft?.routes;
  }

  /** The nftables state last applied (or adopted). */
  get current(): NftState | undefined {
    return this.#nft?.current;
  }

  /** Stop timers and wait for a running pass. The kernel keeps forwarding as it is. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    await Promise.all([this.#passes.stop(), this.#drift?.stop()]);
    await this.#dataplane.stop();
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
    let forwarding: readonly ServiceForwarding[];
    try {
      forwarding = this.#forwardingOf(snapshot);
    } catch (cause) {
      return { kind: "failed", cause };
    }
    try {
      const r = await this.#dataplane.apply({ forwarding, zones: snapshot.config.zones });
      return { kind: "ok", mode: r.mode ?? (r.ops === 0 ? "noop" : "incremental"), bytes: r.bytes ?? 0 };
    } catch (cause) {
      if (cause instanceof UnrenderableState) return { kind: "failed", cause: cause.cause };
      return { kind: "retry", delayMs: this.#passes.nextRetryMs(), cause };
    }
  }

  #forwardingOf(snapshot: Snapshot): readonly ServiceForwarding[] {
    const health: HealthLookup = this.#o.health?.lookup ?? ALL_UNKNOWN;
    const version = this.#o.health ? this.#o.health.version?.() : 0;
    return this.#forwardings.update(snapshot, this.#degraded, health, version);
  }

  /** Compare the kernel with what was applied (the data plane's check); the data plane
   * schedules the repair of any difference. Returns what differed, or undefined. */
  async checkDrift(): Promise<string | undefined> {
    if (this.#passes.running) return undefined;
    return (await this.#dataplane.check()).join("; ") || undefined;
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
