/**
 * A table of flows that expire when idle: UDP flows (client address:port → node), and
 * ClientIP session affinity (client address → node). Pure: every call takes `now` in
 * milliseconds; no timer lives here — the owner calls `sweep(now)` from its own timer.
 *
 * Expiry rule: an entry lives `idleMs` after its last use (`get` with `touch`, or `set`).
 * Kubernetes defines ClientIP affinity the same way: `sessionAffinityConfig.clientIP.
 * timeoutSeconds` counts from the last connection of that client (core/v1 API reference,
 * ClientIPConfig); conntrack's UDP timeouts likewise count from the last packet.
 *
 * Deliberately not here: choosing a node (the Maglev table does that) or closing sockets
 * (the proxy does that with what `sweep` returns).
 */

interface Entry<V> {
  value: V;
  lastUsed: number;
}

export class FlowTable<V> {
  readonly #entries = new Map<string, Entry<V>>();
  readonly #idleMs: number;
  readonly #maxEntries: number;

  constructor(options: { idleMs: number; maxEntries?: number }) {
    if (!(options.idleMs > 0)) throw new RangeError(`FlowTable: idleMs must be > 0, got ${options.idleMs}`);
    this.#idleMs = options.idleMs;
    this.#maxEntries = options.maxEntries ?? 1_000_000;
  }

  get size(): number {
    return this.#entries.size;
  }

  /** The live value for `key`, or undefined when absent or expired. `touch` renews it. */
  get(key: string, now: number, touch = true): V | undefined {
    const e = this.#entries.get(key);
    if (!e) return undefined;
    if (now - e.lastUsed >= this.#idleMs) return undefined;
    if (touch) e.lastUsed = now;
    return e.value;
  }

  /**
   * Stores `value` for `key` as used now. Returns false (and stores nothing) when the table
   * is full of live entries: the caller refuses the new flow rather than evicting others.
   */
  set(key: string, value: V, now: number): boolean {
    const e = this.#entries.get(key);
    if (e) {
      e.value = value;
      e.lastUsed = now;
      return true;
    }
    if (this.#entries.size >= this.#maxEntries) return false;
    this.#entries.set(key, { value, lastUsed: now });
    return true;
  }

  delete(key: string): V | undefined {
    const e = this.#entries.get(key);
    if (!e) return undefined;
    this.#entries.delete(key);
    return e.value;
  }

  /** Removes and returns every entry idle for `idleMs` or longer. */
  sweep(now: number): Array<[string, V]> {
    const out: Array<[string, V]> = [];
    for (const [key, e] of this.#entries) {
      if (now - e.lastUsed >= this.#idleMs) {
        this.#entries.delete(key);
        out.push([key, e.value]);
      }
    }
    return out;
  }

  /** Removes and returns every entry whose value matches (a node left the Service). */
  deleteWhere(predicate: (value: V, key: string) => boolean): Array<[string, V]> {
    const out: Array<[string, V]> = [];
    for (const [key, e] of this.#entries) {
      if (predicate(e.value, key)) {
        this.#entries.delete(key);
        out.push([key, e.value]);
      }
    }
    return out;
  }

  /** Removes and returns everything (shutdown). */
  clear(): Array<[string, V]> {
    const out: Array<[string, V]> = [...this.#entries].map(([k, e]) => [k, e.value]);
    this.#entries.clear();
    return out;
  }
}
