/**
 * Adapter helper: turns a burst of "something changed" pokes into few calls — the call
 * runs once the pokes have been quiet for `quietMs`, and at the latest `maxMs` after the
 * first poke of a burst, so a steady stream of changes still gets through (the same
 * trailing debounce with a ceiling as client-go's workqueue rate limits, in spirit).
 * Calls never overlap: a poke during a call schedules one more after it.
 * Time comes from a Clock, so tests advance it by hand.
 */
import type { Clock, TimerHandle } from "../health/clock.ts";

export interface DebounceOptions {
  readonly quietMs: number;
  readonly maxMs: number;
}

export const DEFAULT_DEBOUNCE: DebounceOptions = { quietMs: 100, maxMs: 1000 };

export class Debouncer {
  readonly #clock: Clock;
  readonly #o: DebounceOptions;
  readonly #fn: () => Promise<void> | void;
  #first: number | undefined;
  #timer: TimerHandle | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #closed = false;

  constructor(clock: Clock, options: DebounceOptions, fn: () => Promise<void> | void) {
    this.#clock = clock;
    this.#o = options;
    this.#fn = fn;
  }

  /** Something changed. */
  poke(): void {
    if (this.#closed) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    const now = this.#clock.now();
    this.#first ??= now;
    const due = Math.min(now + this.#o.quietMs, this.#first + this.#o.maxMs);
    if (this.#timer) this.#clock.clearTimer(this.#timer);
    this.#timer = this.#clock.setTimer(() => void this.#fire(), Math.max(0, due - now));
  }

  /** Runs now if a call is pending (or running: waits for it); resolves when idle. */
  async flush(): Promise<void> {
    if (this.#timer) {
      this.#clock.clearTimer(this.#timer);
      this.#timer = undefined;
      await this.#fire();
    }
    while (this.#running) await this.#running;
  }

  /** No more calls; resolves when a running call has finished. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer) this.#clock.clearTimer(this.#timer);
    this.#timer = undefined;
    await this.#running;
  }

  async #fire(): Promise<void> {
    this.#timer = undefined;
    this.#first = undefined;
    if (this.#closed) return;
    // the callback reports its own failures; one that throws must not stop later calls
    this.#running = (async () => {
      try {
        await this.#fn();
      } catch {
        // already reported by the callback, or a bug it logs
      } finally {
        this.#running = undefined;
      }
    })();
    await this.#running;
    if (this.#again && !this.#closed) {
      this.#again = false;
      this.poke();
    }
  }
}
