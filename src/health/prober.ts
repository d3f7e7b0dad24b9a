/**
 * Adapter: runs the probes. Owns one timer per target and the in-flight probes; feeds
 * every outcome into the pure state machine (state-machine.ts) and reports transitions
 * and weight changes through a callback (for logs, Events and metrics).
 *
 * - Schedule: each target is probed every `intervalMs` on a fixed grid (due times do not
 *   drift with probe duration), kept in one min-heap served by a single timer armed for
 *   the earliest due time (thousands of per-target timers cost more CPU); its phase in the interval is drawn from a seeded PRNG, so
 *   probes of many targets are spread out rather than arriving in lockstep, and two runs
 *   with one seed behave the same. A turn that comes while the target's previous probe is
 *   still running starts as soon as that probe ends (so a timeout equal to the interval
 *   does not cost a turn);
 *   a second such turn is skipped — probes of one target never overlap.
 * - Fast re-probe (HAProxy's `fastinter`, fast-interval.ts): after a failure that has not
 *   yet reached the unhealthy threshold, the next probe comes `fastIntervalMs` after the
 *   failed one ended and the target's grid restarts there, so a dead node is judged within
 *   interval × unhealthyThreshold (docs/health.md "Detection bound").
 * - Bounded concurrency: at most `maxConcurrent` probes in flight; the rest wait in a
 *   FIFO queue and start as slots free up.
 * - `setTargets` reconciles: new targets start `unknown` (admitting traffic only when they
 *   came with the first call: state-machine.ts), removed ones stop (their timer
 *   is cleared and a late answer is ignored), kept ones keep their state; a changed
 *   interval re-draws the phase.
 * - `close()` clears the timer and waits for in-flight probes (each bounded by its own
 *   timeout in probe-once.ts).
 *
 * The socket work is the injected `probe` function (probeOnce in production, a fake in
 * tests); time is the injected Clock. Which targets exist is state-probe-targets.ts.
 */

import { seededRandom } from "../net/seeded-random.ts";
import type { Clock, TimerHandle } from "./clock.ts";
import { DueHeap } from "./due-heap.ts";
import { fastIntervalMs } from "./fast-interval.ts";
import {
  type HealthState,
  initialHealth,
  type ProbeOutcome,
  recordProbe,
  type TargetHealth,
} from "./state-machine.ts";
import type { ProbeTarget } from "./state-probe-targets.ts";

export type ProbeFn = (target: ProbeTarget) => Promise<ProbeOutcome>;

export type ProberEvent =
  | {
      readonly kind: "transition";
      readonly target: ProbeTarget;
      readonly from: HealthState;
      readonly to: HealthState;
      readonly reason: string;
      readonly at: number;
    }
  | {
      readonly kind: "weight";
      readonly target: ProbeTarget;
      readonly from: number | undefined;
      readonly to: number;
      readonly at: number;
    };

/** one finished probe, for measurements */
export interface ProbeRecord {
  readonly key: string;
  /** when it was due */
  readonly scheduledAt: number;
  readonly startedAt: number;
  readonly finishedAt: number;
  readonly outcome: ProbeOutcome;
}

export interface ProberOptions {
  readonly clock: Clock;
  readonly probe: ProbeFn;
  readonly seed: number;
  readonly maxConcurrent: number;
  readonly onEvent: (event: ProberEvent) => void;
  readonly onProbe?: (record: ProbeRecord) => void;
  /** the scheduler wakes at most once per this many ms (default 40: 25 wake-ups a second
   * instead of 200 cut the prober's CPU by a quarter at 5,000 targets): probes due within a
   * tick start together, at most this late */
  readonly tickMs?: number;
  /** a target was removed (drop its kept connection) */
  readonly forget?: (key: string) => void;
}

interface Entry {
  target: ProbeTarget;
  health: TargetHealth;
  /** bumped when the entry is re-phased or removed: heap slots of older generations are stale */
  generation: number;
  removed: boolean;
  inFlight: boolean;
  queued: boolean;
  /** a turn that came while the previous probe was running: it starts when that one ends */
  deferred: number | undefined;
}

interface Slot {
  readonly entry: Entry;
  readonly generation: number;
}

const DEFAULT_TICK_MS = 40;

export class Prober {
  readonly #o: ProberOptions;
  readonly #random: () => number;
  readonly #entries = new Map<string, Entry>();
  readonly #schedule = new DueHeap<Slot>();
  readonly #queue: { entry: Entry; scheduledAt: number }[] = [];
  #timer: TimerHandle | undefined;
  #timerDue = Number.POSITIVE_INFINITY;
  #lastTick = Number.NEGATIVE_INFINITY;
  #running = 0;
  #idle: (() => void) | undefined;
  #closed = false;
  /** whether the first plan's targets were taken on (later ones wait for a verdict) */
  #planned = false;
  /** turns skipped because the previous probe was still running and another turn already waited */
  skipped = 0;

  constructor(options: ProberOptions) {
    this.#o = options;
    this.#random = seededRandom(options.seed);
  }

  setTargets(targets: readonly ProbeTarget[]): void {
    if (this.#closed) return;
    const now = this.#o.clock.now();
    const wanted = new Map(targets.map((t) => [t.key, t]));
    for (const [key, entry] of this.#entries) {
      if (wanted.has(key)) continue;
      entry.removed = true;
      entry.generation++;
      this.#entries.delete(key);
      this.#o.forget?.(key);
    }
    for (const target of targets) {
      let entry = this.#entries.get(target.key);
      if (entry) {
        const rephase = entry.target.intervalMs !== target.intervalMs;
        entry.target = target;
        if (!rephase) continue;
        entry.generation++;
      } else {
        entry = {
          target,
          health: initialHealth(now, !this.#planned),
          generation: 0,
          removed: false,
          inFlight: false,
          queued: false,
          deferred: undefined,
        };
        this.#entries.set(target.key, entry);
      }
      this.#schedule.push(now + this.#random() * target.intervalMs, { entry, generation: entry.generation });
    }
    this.#planned = true;
    this.#arm();
  }

  /** One target's health, without copying every entry (the forwarding state asks per node). */
  healthOf(key: string): TargetHealth | undefined {
    return this.#entries.get(key)?.health;
  }

  /** current state per target key */
  states(): ReadonlyMap<string, TargetHealth> {
    return new Map([...this.#entries].map(([k, e]) => [k, e.health]));
  }

  get inFlight(): number {
    return this.#running;
  }

  /** Stops scheduling and resolves once the probes in flight have finished. */
  close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) this.#o.clock.clearTimer(this.#timer);
    this.#timer = undefined;
    for (const entry of this.#entries.values()) entry.removed = true;
    this.#entries.clear();
    this.#schedule.clear();
    this.#queue.length = 0;
    if (this.#running === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.#idle = resolve;
    });
  }

  /** one timer, armed for the earliest due slot */
  #arm(): void {
    const head = this.#schedule.peek();
    if (this.#closed || !head) return;
    // wake at most once per tick: each wake-up costs more than the probes it starts
    const at = Math.max(head.due, this.#lastTick + (this.#o.tickMs ?? DEFAULT_TICK_MS));
    if (at >= this.#timerDue) return;
    if (this.#timer) this.#o.clock.clearTimer(this.#timer);
    this.#timerDue = at;
    this.#timer = this.#o.clock.setTimer(() => this.#tick(), at - this.#o.clock.now());
  }

  #tick(): void {
    this.#timer = undefined;
    this.#timerDue = Number.POSITIVE_INFINITY;
    const now = this.#o.clock.now();
    this.#lastTick = now;
    for (let head = this.#schedule.peek(); head && head.due <= now; head = this.#schedule.peek()) {
      this.#schedule.pop();
      const { entry, generation } = head.item;
      if (entry.removed || generation !== entry.generation) continue;
      let next = head.due + entry.target.intervalMs;
      while (next <= now) next += entry.target.intervalMs; // missed turns are skipped, not bunched
      this.#schedule.push(next, head.item);
      this.#due(entry, head.due);
    }
    this.#arm();
  }

  #due(entry: Entry, scheduledAt: number): void {
    if (entry.inFlight || entry.queued) {
      if (entry.inFlight && !entry.queued && entry.deferred === undefined) entry.deferred = scheduledAt;
      else this.skipped++;
      return;
    }
    if (this.#running < this.#o.maxConcurrent) this.#start(entry, scheduledAt);
    else {
      entry.queued = true;
      this.#queue.push({ entry, scheduledAt });
    }
  }

  #start(entry: Entry, scheduledAt: number): void {
    this.#running++;
    entry.inFlight = true;
    const startedAt = this.#o.clock.now();
    const done = (outcome: ProbeOutcome) => {
      this.#running--;
      entry.inFlight = false;
      this.#finish(entry, outcome, scheduledAt, startedAt);
      const deferred = entry.deferred;
      entry.deferred = undefined;
      if (deferred !== undefined && !entry.removed && !this.#closed) this.#due(entry, deferred);
      this.#drain();
      if (this.#running === 0 && this.#idle) this.#idle();
    };
    const failed = (e: unknown) =>
      done({ ok: false, reason: `probe error: ${(e as Error)?.message ?? String(e)}` });
    try {
      this.#o.probe(entry.target).then(done, failed);
    } catch (e) {
      queueMicrotask(() => failed(e));
    }
  }

  #finish(entry: Entry, outcome: ProbeOutcome, scheduledAt: number, startedAt: number): void {
    if (entry.removed) return; // removed meanwhile: a late answer is ignored
    const now = this.#o.clock.now();
    const step = recordProbe(entry.health, outcome, entry.target, now);
    entry.health = step.health;
    this.#o.onProbe?.({ key: entry.target.key, scheduledAt, startedAt, finishedAt: now, outcome });
    if (!outcome.ok && step.health.state !== "unhealthy" && !this.#closed) this.#reprobe(entry, now);
    if (step.transition)
      this.#o.onEvent({ kind: "transition", target: entry.target, ...step.transition, at: now });
    if (step.weightChange)
      this.#o.onEvent({ kind: "weight", target: entry.target, ...step.weightChange, at: now });
  }

  /** fastinter: the falling target's next turn comes soon, its grid restarts from there */
  #reprobe(entry: Entry, now: number): void {
    entry.generation++;
    entry.deferred = undefined;
    this.#schedule.push(now + fastIntervalMs(entry.target), { entry, generation: entry.generation });
    this.#arm();
  }

  #drain(): void {
    while (this.#running < this.#o.maxConcurrent && this.#queue.length > 0) {
      const next = this.#queue.shift();
      if (!next) break;
      next.entry.queued = false;
      if (next.entry.removed) continue;
      this.#start(next.entry, next.scheduledAt);
    }
  }
}
