/**
 * Adapter: runs the probes. Owns one timer per target and the in-flight probes; feeds
 * every outcome into the pure state machine (state-machine.ts) and reports transitions
 * and weight changes through a callback (for logs, Events and metrics).
 *
 * - Schedule: each target is probed every `intervalMs` on a fixed grid (due times do not
 *   drift with probe duration); its phase in the interval is drawn from a seeded PRNG, so
 *   probes of many targets are spread out rather than arriving in lockstep, and two runs
 *   with one seed behave the same. A probe still running when its next turn comes skips
 *   that turn (timeouts never exceed intervals, so this means a slow clock, not a backlog).
 * - Bounded concurrency: at most `maxConcurrent` probes in flight; the rest wait in a
 *   FIFO queue and start as slots free up.
 * - `setTargets` reconciles: new targets start `unknown`, removed ones stop (their timer
 *   is cleared and a late answer is ignored), kept ones keep their state; a changed
 *   interval re-draws the phase.
 * - `close()` clears every timer and waits for in-flight probes (each bounded by its own
 *   timeout in probe-once.ts).
 *
 * The socket work is the injected `probe` function (probeOnce in production, a fake in
 * tests); time is the injected Clock. Which targets exist is state-probe-targets.ts.
 */
import type { Clock, TimerHandle } from "./clock.ts";
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
}

interface Entry {
  target: ProbeTarget;
  health: TargetHealth;
  nextDue: number;
  timer: TimerHandle | undefined;
  inFlight: boolean;
  queued: boolean;
}

/** mulberry32: a small seeded PRNG, enough to spread phases */
function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Prober {
  readonly #o: ProberOptions;
  readonly #random: () => number;
  readonly #entries = new Map<string, Entry>();
  readonly #queue: { entry: Entry; scheduledAt: number }[] = [];
  readonly #inFlight = new Set<Promise<void>>();
  #running = 0;
  #closed = false;
  /** turns skipped because the previous probe of the target was still running */
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
      if (entry.timer) this.#o.clock.clearTimer(entry.timer);
      this.#entries.delete(key);
    }
    for (const target of targets) {
      const entry = this.#entries.get(target.key);
      if (entry) {
        const rephase = entry.target.intervalMs !== target.intervalMs;
        entry.target = target;
        if (rephase) this.#arm(entry, now + this.#random() * target.intervalMs);
        continue;
      }
      const fresh: Entry = {
        target,
        health: initialHealth(now),
        nextDue: 0,
        timer: undefined,
        inFlight: false,
        queued: false,
      };
      this.#entries.set(target.key, fresh);
      this.#arm(fresh, now + this.#random() * target.intervalMs);
    }
  }

  /** current state per target key */
  states(): ReadonlyMap<string, TargetHealth> {
    return new Map([...this.#entries].map(([k, e]) => [k, e.health]));
  }

  get inFlight(): number {
    return this.#running;
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const entry of this.#entries.values()) if (entry.timer) this.#o.clock.clearTimer(entry.timer);
    this.#entries.clear();
    this.#queue.length = 0;
    await Promise.all([...this.#inFlight]);
  }

  #arm(entry: Entry, due: number): void {
    if (entry.timer) this.#o.clock.clearTimer(entry.timer);
    entry.nextDue = due;
    entry.timer = this.#o.clock.setTimer(() => this.#due(entry), due - this.#o.clock.now());
  }

  #due(entry: Entry): void {
    entry.timer = undefined;
    if (this.#closed || this.#entries.get(entry.target.key) !== entry) return;
    const scheduledAt = entry.nextDue;
    const now = this.#o.clock.now();
    let next = scheduledAt + entry.target.intervalMs;
    while (next <= now) next += entry.target.intervalMs; // missed turns are skipped, not bunched
    this.#arm(entry, next);
    if (entry.inFlight || entry.queued) {
      this.skipped++;
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
    const target = entry.target;
    const run = new Promise<ProbeOutcome>((resolve) => resolve(this.#o.probe(target)))
      .catch((e: unknown): ProbeOutcome => ({ ok: false, reason: `probe error: ${(e as Error).message}` }))
      .then((outcome) => {
        this.#running--;
        entry.inFlight = false;
        this.#finish(entry, outcome, scheduledAt, startedAt);
        this.#drain();
      });
    this.#inFlight.add(run);
    void run.finally(() => this.#inFlight.delete(run));
  }

  #finish(entry: Entry, outcome: ProbeOutcome, scheduledAt: number, startedAt: number): void {
    if (this.#closed || this.#entries.get(entry.target.key) !== entry) return; // removed meanwhile
    const now = this.#o.clock.now();
    const step = recordProbe(entry.health, outcome, entry.target, now);
    entry.health = step.health;
    this.#o.onProbe?.({ key: entry.target.key, scheduledAt, startedAt, finishedAt: now, outcome });
    if (step.transition)
      this.#o.onEvent({ kind: "transition", target: entry.target, ...step.transition, at: now });
    if (step.weightChange)
      this.#o.onEvent({ kind: "weight", target: entry.target, ...step.weightChange, at: now });
  }

  #drain(): void {
    while (this.#running < this.#o.maxConcurrent && this.#queue.length > 0) {
      const next = this.#queue.shift();
      if (!next) break;
      next.entry.queued = false;
      if (this.#closed || this.#entries.get(next.entry.target.key) !== next.entry) continue;
      this.#start(next.entry, next.scheduledAt);
    }
  }
}
