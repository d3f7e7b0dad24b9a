/**
 * Runs an LbDataplane beside the nftables controller (`passlb lb --dataplane xdp`): every
 * pass the controller commits is applied to the fast path too (coalesced: one apply at a
 * time, the latest state next), a drift check restores it every `driftMs` (a detached
 * program, a flushed map, a neighbour that changed), and its counters go to the metrics
 * every `countersMs`. The nftables table stays installed behind it and forwards whatever
 * the fast path hands to the stack, with the same Maglev tables and the same hash.
 *
 * Owns its timers and nothing else; stop() leaves the kernel forwarding.
 */
import type { ServiceForwarding } from "../forwarding/forwarding-state.ts";
import type { DataplaneCounters, LbDataplane, LbDesiredState } from "./lb-dataplane.ts";

export interface FastPathHooks {
  readonly log: (line: string) => void;
  readonly applied?: (seconds: number, ops: number) => void;
  readonly counters?: (c: DataplaneCounters) => void;
  readonly drift?: (findings: readonly string[]) => void;
}

export class FastPath {
  readonly dataplane: LbDataplane;
  readonly #hooks: FastPathHooks;
  readonly #driftMs: number;
  readonly #countersMs: number;
  #zones: LbDesiredState["zones"] = [];
  #wanted: readonly ServiceForwarding[] | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #timers: ReturnType<typeof setInterval>[] = [];
  #lastError = "";

  constructor(
    dataplane: LbDataplane,
    options: { driftMs: number; countersMs: number },
    hooks: FastPathHooks,
  ) {
    this.dataplane = dataplane;
    this.#driftMs = options.driftMs;
    this.#countersMs = options.countersMs;
    this.#hooks = hooks;
  }

  async start(): Promise<void> {
    const r = await this.dataplane.start();
    this.#hooks.log(
      r.adopted
        ? `xdp: adopted the pinned program and maps${r.replaced ? "; the program changed and was replaced atomically" : ""}`
        : "xdp: program loaded, maps pinned",
    );
    for (const note of r.notes ?? []) this.#hooks.log(`xdp: ${note}`);
    if (this.#driftMs > 0) this.#every(this.#driftMs, () => this.#check());
    if (this.#countersMs > 0) this.#every(this.#countersMs, () => this.#readCounters());
  }

  setZones(zones: LbDesiredState["zones"]): void {
    this.#zones = zones;
  }

  /** the controller committed this forwarding state */
  synced(forwarding: readonly ServiceForwarding[]): void {
    this.#wanted = forwarding;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#running = this.#loop();
  }

  /** resolves when every state handed in so far is applied (or failed) */
  async settled(): Promise<void> {
    while (this.#running) await this.#running;
  }

  async #loop(): Promise<void> {
    do {
      this.#again = false;
      const forwarding = this.#wanted;
      if (!forwarding) break;
      const started = performance.now();
      try {
        const r = await this.dataplane.apply({ forwarding, zones: this.#zones });
        this.#hooks.applied?.((performance.now() - started) / 1000, r.ops);
        this.#lastError = "";
      } catch (e) {
        this.#report(`xdp: map update failed (next pass or drift check retries): ${(e as Error).message}`);
      }
    } while (this.#again);
    this.#running = undefined;
  }

  async #check(): Promise<void> {
    await this.settled();
    try {
      const findings = await this.dataplane.check();
      for (const f of findings) this.#hooks.log(`xdp: drift: ${f}; restored`);
      this.#hooks.drift?.(findings);
      this.#lastError = "";
    } catch (e) {
      this.#report(`xdp: drift check failed: ${(e as Error).message}`);
    }
  }

  async #readCounters(): Promise<void> {
    try {
      this.#hooks.counters?.(await this.dataplane.counters());
    } catch (e) {
      this.#report(`xdp: reading the counters failed: ${(e as Error).message}`);
    }
  }

  #report(line: string): void {
    if (line !== this.#lastError) this.#hooks.log(line);
    this.#lastError = line;
  }

  #every(ms: number, fn: () => Promise<void>): void {
    let busy = false;
    const t = setInterval(() => {
      if (busy) return;
      busy = true;
      void fn().finally(() => {
        busy = false;
      });
    }, ms);
    t.unref();
    this.#timers.push(t);
  }

  async stop(): Promise<void> {
    for (const t of this.#timers) clearInterval(t);
    this.#timers = [];
    await this.settled();
    await this.dataplane.stop();
  }
}
