/**
 * The decapsulation side of a node behind encapsulation (docs/agent-dataplane.md
 * "Decapsulation"): the device and rp_filter settings decap-device.ts makes, at start (a
 * failure there fails the start), after every good read of the input, and — when the agent
 * runs decapsulation alone — every sync period on its own timer. A later failure is logged
 * once per distinct message and tried again; a device made again is logged as a repair.
 */

import type { Clock, TimerHandle } from "../health/clock.ts";
import type { Encap } from "../lb-host/routing/encap.ts";
import type { AgentReporter } from "./agent-reporter.ts";
import type { DecapResult } from "./decap-device.ts";

export interface DecapKeeperOptions {
  readonly encap: Encap;
  readonly procSys: string;
  readonly ensure: (encap: Encap, procSys: string) => Promise<DecapResult>;
  readonly clock: Clock;
  readonly report: AgentReporter;
}

export class DecapKeeper {
  readonly #o: DecapKeeperOptions;
  #timer: TimerHandle | undefined;
  #lastError = "";
  #stopped = false;

  constructor(options: DecapKeeperOptions) {
    this.#o = options;
  }

  /** The first ensure; throws `--decap KIND: why` when the node cannot decapsulate. */
  async start(): Promise<void> {
    const { encap } = this.#o;
    let done: DecapResult;
    try {
      done = await this.#o.ensure(encap, this.#o.procSys);
    } catch (e) {
      throw new Error(`--decap ${encap.kind}: ${(e as Error).message}`, { cause: e });
    }
    const created = done.created.length > 0 ? ` (created ${done.created.join(", ")})` : "";
    this.#o.report.info(
      `decapsulation ${encap.kind}${encap.port === undefined ? "" : `:${encap.port}`} ready${created}`,
      "decap",
      "ready",
    );
    for (const note of done.notes) this.#o.report.info(note, "decap", "sysctl");
  }

  /** Puts a deleted device or a reset sysctl back; logs what it did or why it could not. */
  async keep(): Promise<void> {
    try {
      const done = await this.#o.ensure(this.#o.encap, this.#o.procSys);
      if (done.created.length > 0)
        this.#o.report.info(
          `decapsulation repaired: created ${done.created.join(", ")}`,
          "decap",
          "repaired",
        );
      for (const n of done.notes) this.#o.report.info(n, "decap", "sysctl");
      this.#lastError = "";
    } catch (e) {
      const message = `tunnel_failed: ${(e as Error).message}`;
      if (message !== this.#lastError) this.#o.report.error(message, "decap", "failed");
      this.#lastError = message;
    }
  }

  /** Decapsulation alone: `keep` every `periodMs` until `stop`. */
  every(periodMs: number): void {
    this.#o.report.info(
      `decapsulation only (no --manifests): checked every ${periodMs / 1000} s`,
      "decap",
      "started",
    );
    const tick = () => {
      this.#timer = this.#o.clock.setTimer(() => {
        void this.keep().then(() => {
          if (!this.#stopped) tick();
        });
      }, periodMs);
    };
    tick();
  }

  stop(): void {
    this.#stopped = true;
    if (this.#timer) this.#o.clock.clearTimer(this.#timer);
    this.#timer = undefined;
  }
}
