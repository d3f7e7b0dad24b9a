/**
 * Recent increases of monotonic counters over a sliding window: feed it the cumulative
 * values now and then; `recent` says how much each grew within the last `windowMs` (from
 * the oldest sample inside the window, or the newest before it). A counter that went
 * backwards (its table was rebuilt) counts from zero again. Pure: time is an argument;
 * bounded by `maxSamples`.
 */
export class CounterWindow {
  readonly #windowMs: number;
  readonly #maxSamples: number;
  #samples: Array<{ at: number; values: ReadonlyMap<string, number> }> = [];

  constructor(options: { windowMs: number; maxSamples?: number }) {
    this.#windowMs = options.windowMs;
    this.#maxSamples = options.maxSamples ?? 1000;
  }

  record(now: number, values: ReadonlyMap<string, number>): void {
    this.#samples.push({ at: now, values });
    // keep one sample at or before the window's start as the baseline
    const from = now - this.#windowMs;
    while (this.#samples.length > 1 && this.#samples[1]!.at <= from) this.#samples.shift();
    if (this.#samples.length > this.#maxSamples) this.#samples.shift();
  }

  recent(): Map<string, number> {
    const out = new Map<string, number>();
    const first = this.#samples[0];
    const last = this.#samples.at(-1);
    if (!first || !last) return out;
    for (const [k, v] of last.values) {
      const base = first === last ? v : (first.values.get(k) ?? 0);
      out.set(k, v >= base ? v - base : v);
    }
    return out;
  }
}
