/**
 * Adapter helper: deadlines for pending TCP connects, shared by every connect of a proxy
 * (tcp-proxy.ts, libuv-tcp.ts). One sweep every 50 ms over the pending set instead of a
 * timer per connection, running only while something is pending, so a dead backend costs
 * one set entry and an idle proxy no timer at all. A deadline fires up to one sweep late.
 * Deliberately not here: what expiring means (the caller's `expire`).
 */

export interface PendingConnect {
  readonly deadline: number;
}

export class ConnectDeadlines<T extends PendingConnect> {
  readonly #pending = new Set<T>();
  readonly #expire: (item: T) => void;
  readonly #sweepMs: number;
  #timer: ReturnType<typeof setInterval> | undefined;

  constructor(expire: (item: T) => void, sweepMs = 50) {
    this.#expire = expire;
    this.#sweepMs = sweepMs;
  }

  add(item: T): void {
    this.#pending.add(item);
    if (this.#timer !== undefined) return;
    // not unref'd: it only runs while a connect is pending (whose socket holds the loop
    // anyway), and a sweep that failed to stop would show as a process that never exits
    this.#timer = setInterval(() => this.#sweep(), this.#sweepMs);
  }

  delete(item: T): void {
    this.#pending.delete(item);
  }

  #sweep(): void {
    const now = Date.now();
    for (const item of this.#pending) if (item.deadline <= now) this.#expire(item);
    if (this.#pending.size === 0 && this.#timer !== undefined) {
      clearInterval(this.#timer);
      this.#timer = undefined;
    }
  }
}
