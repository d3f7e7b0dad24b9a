/**
 * Counts of recent connections and flows per Service and pod, over a sliding window, for
 * the live view's "share" column. Pure: every call takes `now`; old entries drop out when
 * counted or recorded. Bounded: at most `maxEntries` are kept (the oldest go first).
 */
export class RecentConnections {
  readonly #windowMs: number;
  readonly #maxEntries: number;
  #entries: Array<{ at: number; service: string; pod: string }> = [];

  constructor(options: { windowMs: number; maxEntries?: number }) {
    this.#windowMs = options.windowMs;
    this.#maxEntries = options.maxEntries ?? 100_000;
  }

  get windowMs(): number {
    return this.#windowMs;
  }

  record(service: string, pod: string, now: number): void {
    this.#entries.push({ at: now, service, pod });
    if (this.#entries.length > this.#maxEntries)
      this.#entries.splice(0, this.#entries.length - this.#maxEntries);
  }

  /** pod → count for one Service within the window */
  counts(service: string, now: number): Map<string, number> {
    this.#prune(now);
    const out = new Map<string, number>();
    for (const e of this.#entries) if (e.service === service) out.set(e.pod, (out.get(e.pod) ?? 0) + 1);
    return out;
  }

  #prune(now: number): void {
    const from = now - this.#windowMs;
    let i = 0;
    while (i < this.#entries.length && this.#entries[i]!.at < from) i++;
    if (i > 0) this.#entries = this.#entries.slice(i);
  }
}
