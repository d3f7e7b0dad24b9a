/**
 * Adapter helper: runs one function on request, never two at once, with bounded frequency —
 * the shape of kube-proxy's BoundedFrequencyRunner (kubernetes/kubernetes
 * pkg/util/async/bounded_frequency_runner.go, and pkg/proxy/runner/ in newer trees), written
 * for a single-threaded event loop and a Clock. Every "never overlap, run once more after"
 * loop in passlb is one of these (docs/architecture.md "Scheduling").
 *
 * - `run()` asks for a run. Requests while one runs coalesce into exactly one more run after
 *   it. A run that is due now starts at once, inside `run()` (so a caller that awaits
 *   `idle()` next sees it), or with `startFromTimer` from a 0 ms timer.
 * - `delayMs`: a request waits this long, so a burst of requests is one run. With
 *   `maxDelayMs` larger, each request restarts the wait (a trailing debounce) but the run
 *   comes at the latest `maxDelayMs` after the first request of the burst. `run(ms)` asks
 *   for a run no later than `ms` from now, whatever the wait.
 * - `minIntervalMs`: at least this long from the end of one run to the start of the next
 *   (kube-proxy's minSyncPeriod, measured from completion like its newer runner).
 * - `maxIntervalMs`: at most this long from the end of one run (or from construction) to the
 *   start of the next, asked or not — a periodic resync (kube-proxy's syncPeriod).
 * - Backoff: a run that reports `retry` (or throws) runs again after `initialMs`, doubling
 *   per consecutive failure up to `maxMs`; `failed` waits `maxMs`; a success resets it. A
 *   request during a backoff runs at once (a change may be the fix) unless `holdBackoff`.
 * - `stop()` cancels what is scheduled and resolves when the running run has finished.
 *
 * Deliberately not here: kube-proxy's burst token bucket (no user needs bursts above the
 * minimum interval), jitter, and any decision about what a run does.
 */
import type { Clock, TimerHandle } from "../health/clock.ts";

/** why a run starts: asked for, a failure's retry (or an `againInMs`), or the periodic one */
export type RunReason = "request" | "retry" | "periodic";

/** What a run reports; nothing (undefined) is a success. */
export type RunOutcome =
  | undefined
  | { readonly kind: "ok"; readonly againInMs?: number }
  | { readonly kind: "retry"; readonly afterMs?: number }
  | { readonly kind: "failed" };

export interface Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
}

export interface CoalescingRunnerOptions {
  readonly clock: Clock;
  /** how long a request waits before its run (default 0: at once) */
  readonly delayMs?: number;
  /** with a value above `delayMs`, each request restarts the wait, up to this long after the
   * first request (default `delayMs`: later requests join the first one's run) */
  readonly maxDelayMs?: number;
  /** least time from the end of one run to the start of the next (default 0) */
  readonly minIntervalMs?: number;
  /** most time from the end of one run to the start of the next (default: none) */
  readonly maxIntervalMs?: number;
  /** default 1 s doubling to 30 s */
  readonly backoff?: Backoff;
  /** requests during a backoff wait for its end instead of running at once */
  readonly holdBackoff?: boolean;
  /** a run that is due now starts from a 0 ms timer, not inside `run()` (the LB controller:
   * a caller's own `syncOnce` right after `setSnapshot` goes first, as before) */
  readonly startFromTimer?: boolean;
  /** told of an exception the function threw (the run then counts as a retry) */
  readonly onError?: (error: unknown) => void;
}

const DEFAULT_BACKOFF: Backoff = { initialMs: 1000, maxMs: 30_000 };

/** The work; a function that returns nothing (`void`) reports success. */
// biome-ignore lint/suspicious/noConfusingVoidType: a run that returns nothing is a success
export type RunFunction = (reason: RunReason) => Promise<RunOutcome | void> | RunOutcome | void;

export class CoalescingRunner {
  readonly #fn: RunFunction;
  readonly #o: CoalescingRunnerOptions;
  readonly #backoff: Backoff;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;
  #timer: TimerHandle | undefined;
  /** the first waiting request's time; when the waiting requests want their run (after
   * the configured wait; `run(ms)`'s own deadline) */
  #requestedAt: number | undefined;
  #waitDue: number | undefined;
  #askedDue: number | undefined;
  /** a failure's retry (`#backingOff`) or a success's `againInMs` */
  #retryDue: number | undefined;
  #backingOff = false;
  #periodicDue: number | undefined;
  #lastEnd: number | undefined;
  #failures = 0;
  /** resolved after the next run ends */
  #waiters: (() => void)[] = [];

  constructor(fn: RunFunction, options: CoalescingRunnerOptions) {
    this.#fn = fn;
    this.#o = options;
    this.#backoff = options.backoff ?? DEFAULT_BACKOFF;
    if (options.maxIntervalMs !== undefined) {
      this.#periodicDue = options.clock.now() + options.maxIntervalMs;
      this.#arm();
    }
  }

  /** Ask for a run: after the configured wait, or no later than `withinMs` from now. */
  run(withinMs?: number): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    const now = this.#o.clock.now();
    this.#requestedAt ??= now;
    const first = this.#requestedAt;
    if (withinMs !== undefined)
      this.#askedDue = Math.min(this.#askedDue ?? Number.POSITIVE_INFINITY, now + withinMs);
    else {
      const delay = this.#o.delayMs ?? 0;
      const ceiling = Math.max(delay, this.#o.maxDelayMs ?? delay);
      const quiet = now + delay;
      // first wins, or (trailing) each request pushes the run back — never past the ceiling
      const due =
        this.#waitDue === undefined
          ? quiet
          : ceiling > delay
            ? Math.max(this.#waitDue, quiet)
            : this.#waitDue;
      this.#waitDue = Math.min(due, first + ceiling);
    }
    this.#arm();
  }

  /** whether a run is in progress */
  get running(): boolean {
    return this.#running !== undefined;
  }

  /** consecutive failed runs (0 after a success) */
  get failures(): number {
    return this.#failures;
  }

  /** how long the next `retry` outcome will wait (without its own `afterMs`) */
  nextRetryMs(): number {
    return Math.min(this.#backoff.maxMs, this.#backoff.initialMs * 2 ** this.#failures);
  }

  /** Starts a waiting request now and resolves when no run is in progress or asked for. */
  async flush(): Promise<void> {
    for (;;) {
      if (this.#running) await this.#running;
      else if (this.#requestDue() !== undefined && !this.#stopped) this.#start("request");
      else return;
    }
  }

  /** Resolves after the next run ends (whenever it starts). */
  settled(): Promise<void> {
    return new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Resolves when no run is in progress. */
  async idle(): Promise<void> {
    while (this.#running) await this.#running;
  }

  /** No more runs; resolves when the one in progress has finished. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#clearTimer();
    await this.idle();
  }

  /** Sets the timer for the earliest due run, or starts it when due. `firedFor`: the time a
   * timer was set for (a real timer may fire a fraction of a millisecond early). */
  #arm(firedFor?: number): void {
    if (this.#stopped || this.#running) return;
    this.#clearTimer();
    const wanted = [this.#requestDue(), this.#retryDue, this.#periodicDue].filter((t) => t !== undefined);
    if (wanted.length === 0) return;
    let due = Math.min(...wanted);
    if (this.#lastEnd !== undefined && this.#o.minIntervalMs)
      due = Math.max(due, this.#lastEnd + this.#o.minIntervalMs);
    if (this.#o.holdBackoff && this.#backingOff && this.#retryDue !== undefined)
      due = Math.max(due, this.#retryDue);
    const now = Math.max(this.#o.clock.now(), firedFor ?? Number.NEGATIVE_INFINITY);
    if (due <= now && (firedFor !== undefined || !this.#o.startFromTimer)) {
      this.#start(this.#reasonFor(now));
      return;
    }
    this.#timer = this.#o.clock.setTimer(
      () => {
        this.#timer = undefined;
        this.#arm(due);
      },
      Math.max(0, due - now),
    );
  }

  #reasonFor(now: number): RunReason {
    const asked = this.#requestDue();
    if (asked !== undefined && asked <= now) return "request";
    if (this.#retryDue !== undefined && this.#retryDue <= now) return "retry";
    if (this.#periodicDue !== undefined && this.#periodicDue <= now) return "periodic";
    return "request"; // held back by the minimum interval or a backoff
  }

  #start(reason: RunReason): void {
    this.#clearTimer();
    // one run answers everything that was waiting
    this.#requestedAt = this.#waitDue = this.#askedDue = this.#retryDue = this.#periodicDue = undefined;
    this.#again = false;
    let finish!: () => void;
    this.#running = new Promise<void>((resolve) => {
      finish = resolve;
    });
    void this.#execute(reason).finally(finish);
  }

  async #execute(reason: RunReason): Promise<void> {
    let outcome: RunOutcome;
    try {
      outcome = (await this.#fn(reason)) as RunOutcome;
    } catch (error) {
      outcome = { kind: "retry" };
      try {
        this.#o.onError?.(error);
      } catch {
        // a failing report must not stop the runner
      }
    }
    const end = this.#o.clock.now();
    this.#settle(outcome, end);
    this.#running = undefined;
    if (this.#o.maxIntervalMs !== undefined) this.#periodicDue = end + this.#o.maxIntervalMs;
    const waiters = this.#waiters;
    this.#waiters = [];
    for (const w of waiters) w();
    if (this.#stopped) return;
    if (this.#again) {
      this.#again = false;
      this.run();
    } else this.#arm();
  }

  #settle(outcome: RunOutcome, end: number): void {
    this.#lastEnd = end;
    if (!outcome || outcome.kind === "ok") {
      this.#failures = 0;
      this.#backingOff = false;
      this.#retryDue = outcome?.againInMs === undefined ? undefined : end + outcome.againInMs;
      return;
    }
    const wait =
      outcome.kind === "failed" ? this.#backoff.maxMs : Math.max(outcome.afterMs ?? 0, this.nextRetryMs());
    this.#failures++;
    this.#backingOff = true;
    this.#retryDue = end + wait;
  }

  /** when the waiting requests want their run, if any wait */
  #requestDue(): number | undefined {
    if (this.#waitDue === undefined) return this.#askedDue;
    return this.#askedDue === undefined ? this.#waitDue : Math.min(this.#waitDue, this.#askedDue);
  }

  #clearTimer(): void {
    if (this.#timer) this.#o.clock.clearTimer(this.#timer);
    this.#timer = undefined;
  }
}
