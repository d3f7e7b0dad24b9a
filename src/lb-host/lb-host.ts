/**
 * The LB host as named parts started in one order and stopped in the reverse one (issue 26;
 * models: MetalLB's speaker main, kube-proxy's NewProxier, controller/controller-runtime.ts).
 * Each part's start returns how to undo it; `start()` records those steps as it goes, so a
 * part that fails to start undoes the ones before it, and `stop()` runs them newest first,
 * once. The parts decide nothing about each other: their order is the order given, which
 * build code derives from the config (input after the data plane it feeds, the announcer
 * after the first sync, the reporter last).
 *
 * Wiring only: no I/O of its own. A part that is not configured is left out of the list,
 * never replaced by a branch inside another part.
 */

/** How to take back what a part's start did; the kernel state a data plane leaves is its own business. */
export type Undo = () => Promise<void> | void;

export interface LbHostPart {
  /** for the start/stop log and errors: "dataplane", "health", "announcer", … */
  readonly name: string;
  /** sets the part up; resolves with its undo step (or nothing to undo) */
  start(): Promise<Undo | undefined> | Undo | undefined;
}

export interface LbHostEvents {
  started?(part: string): void;
  stopped?(part: string): void;
  /** an undo step threw: reported, and the rest of the teardown still runs */
  stopFailed?(part: string, error: unknown): void;
}

export class LbHostStartError extends Error {
  constructor(
    readonly part: string,
    override readonly cause: unknown,
  ) {
    super(`${part}: ${cause instanceof Error ? cause.message : String(cause)}`);
    this.name = "LbHostStartError";
  }
}

export class LbHost {
  readonly #parts: readonly LbHostPart[];
  readonly #events: LbHostEvents;
  /** undo steps of the parts started so far, oldest first */
  #undo: { readonly part: string; readonly undo: Undo | undefined }[] = [];
  #state: "new" | "starting" | "running" | "stopped" = "new";

  constructor(parts: readonly LbHostPart[], events: LbHostEvents = {}) {
    const names = parts.map((p) => p.name);
    const twice = names.find((n, i) => names.indexOf(n) !== i);
    if (twice !== undefined) throw new Error(`LbHost: part "${twice}" given twice`);
    this.#parts = parts;
    this.#events = events;
  }

  /** the part names in start order */
  get parts(): readonly string[] {
    return this.#parts.map((p) => p.name);
  }

  get state(): "new" | "starting" | "running" | "stopped" {
    return this.#state;
  }

  /** Starts every part in order; on a failure undoes the started ones and throws LbHostStartError. */
  async start(): Promise<void> {
    if (this.#state !== "new") throw new Error(`LbHost: start() when ${this.#state}`);
    this.#state = "starting";
    for (const part of this.#parts) {
      let undo: Undo | undefined;
      try {
        undo = await part.start();
      } catch (e) {
        await this.stop();
        throw new LbHostStartError(part.name, e);
      }
      this.#undo.push({ part: part.name, undo });
      this.#events.started?.(part.name);
    }
    this.#state = "running";
  }

  /** The one ordered teardown: newest part first; idempotent; an undo that throws does not stop the rest. */
  async stop(): Promise<void> {
    this.#state = "stopped";
    const steps = this.#undo.reverse();
    this.#undo = [];
    for (const { part, undo } of steps) {
      try {
        await undo?.();
        this.#events.stopped?.(part);
      } catch (e) {
        this.#events.stopFailed?.(part, e);
      }
    }
  }
}
