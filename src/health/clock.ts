/**
 * Clock: the one way passlb's long-running parts read time and set timers — the prober,
 * the health servers, the kube reflectors and source, the Lease elector, the controller
 * loop, the LB controller, every CoalescingRunner — so each runs the same under a fake
 * clock in tests. `realClock` uses the monotonic performance clock aligned to the epoch
 * (milliseconds, fractional); `FakeClock` moves only when a test advances it and runs due
 * timers in time order.
 *
 * Deliberately not here: intervals (callers re-arm one-shot timers, so a slow callback
 * never piles up ticks) and any scheduling policy (cluster/coalescing-runner.ts has it).
 */

export interface TimerHandle {
  readonly id: number;
}

export interface Clock {
  /** milliseconds since the epoch */
  now(): number;
  setTimer(fn: () => void, delayMs: number): TimerHandle;
  clearTimer(handle: TimerHandle): void;
}

export function realClock(): Clock {
  const timers = new Map<number, ReturnType<typeof setTimeout>>();
  let next = 1;
  return {
    now: () => performance.timeOrigin + performance.now(),
    setTimer(fn, delayMs) {
      const id = next++;
      timers.set(
        id,
        setTimeout(
          () => {
            timers.delete(id);
            fn();
          },
          Math.max(0, Math.ceil(delayMs)),
        ),
      );
      return { id };
    },
    clearTimer(handle) {
      const t = timers.get(handle.id);
      if (t === undefined) return;
      clearTimeout(t);
      timers.delete(handle.id);
    },
  };
}

interface FakeTimer {
  readonly id: number;
  readonly due: number;
  readonly fn: () => void;
}

export class FakeClock implements Clock {
  #now: number;
  #timers: FakeTimer[] = [];
  #next = 1;

  constructor(startMs = Date.UTC(2026, 0, 1)) {
    this.#now = startMs;
  }

  now(): number {
    return this.#now;
  }

  setTimer(fn: () => void, delayMs: number): TimerHandle {
    const timer = { id: this.#next++, due: this.#now + Math.max(0, delayMs), fn };
    this.#timers.push(timer);
    return { id: timer.id };
  }

  clearTimer(handle: TimerHandle): void {
    this.#timers = this.#timers.filter((t) => t.id !== handle.id);
  }

  /** timers not yet run */
  get pending(): number {
    return this.#timers.length;
  }

  /** Moves time forward by `ms`, running every timer that falls due, in due order
   * (ties in the order they were set), including timers set by those timers. */
  advance(ms: number): void {
    const end = this.#now + ms;
    for (;;) {
      let first: FakeTimer | undefined;
      for (const t of this.#timers) if (t.due <= end && (!first || t.due < first.due)) first = t;
      if (!first) break;
      const run = first;
      this.#timers = this.#timers.filter((t) => t !== run);
      this.#now = Math.max(this.#now, run.due);
      run.fn();
    }
    this.#now = end;
  }
}
