/**
 * The bookkeeping the nftables LB host's parts share about its passes: which Services the
 * pass under way kept at their last good state, the last pass's outcome and kept set, how
 * many passes succeeded, what the last read planned, its Nodes, when the first change not
 * yet in the kernel was seen (the programming latency starts there), and the first sync.
 *
 * Plain state with small named steps; the dataplane part writes the pass fields, the input
 * parts the read fields, the announcer reads them (announcer.ts vipReadiness).
 */
import type { PlannedVips } from "../../announce/announcer.ts";
import type { Snapshot } from "../../k8s/snapshot.ts";

export class PassBook {
  /** the Services the pass under way kept at their last good state */
  #passKept = new Set<string>();
  /** the last pass's kept Services */
  lastKept: ReadonlySet<string> = new Set();
  lastPassOk = false;
  /** successful passes so far */
  syncs = 0;
  lastPlanned: PlannedVips[] = [];
  lastNodes: Snapshot["nodes"] = [];
  /** first change (input read, health) not yet in the kernel */
  pendingSince: number | undefined;
  /** resolves at the first successful pass */
  readonly firstSync: Promise<void>;
  #synced: () => void = () => {};
  readonly #listeners: (() => void)[] = [];

  constructor() {
    this.firstSync = new Promise<void>((r) => {
      this.#synced = r;
    });
  }

  /** a change not yet programmed: the latency clock starts at the first one */
  changed(now: number): void {
    this.pendingSince ??= now;
  }

  kept(service: string): void {
    this.#passKept.add(service);
  }

  /** a pass ended (synced or failed); the listeners hear of it */
  passEnded(ok: boolean): void {
    this.lastPassOk = ok;
    this.lastKept = this.#passKept;
    this.#passKept = new Set();
    if (ok) this.syncs++;
    this.told();
    if (ok) this.#synced();
  }

  /** called after every pass and every read (the announcer's push) */
  listen(listener: () => void): void {
    this.#listeners.push(listener);
  }

  /** something the listeners follow changed */
  told(): void {
    for (const l of this.#listeners) l();
  }

  /** the seconds since the first unprogrammed change, cleared; undefined without one */
  programmed(now: number): number | undefined {
    const since = this.pendingSince;
    this.pendingSince = undefined;
    return since === undefined ? undefined : (now - since) / 1000;
  }

  read(plans: readonly PlannedVips[], nodes: Snapshot["nodes"]): void {
    this.lastPlanned = plans.map((p) => ({ service: p.service, vips: p.vips.map((v) => ({ ...v })) }));
    this.lastNodes = nodes;
  }
}
