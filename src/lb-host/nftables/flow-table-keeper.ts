/**
 * Keeps the TCP flow table (`inet <table>-flows`, render/flow-map.ts) in the kernel for the
 * LB controller: creates it on the first pass without touching what a previous process's
 * flows left in it, and at every drift check lists it terse (its maps' elements are the
 * packet path's, maybe millions: never listed here) and compares names, rule counts and
 * hashes. A difference (a chain flushed, a map or the table deleted) marks it for the next
 * pass, which brings it back. New limits (another --flow-table-size or --flow-timeout) are
 * a new declaration of the same map, which the kernel applies in place keeping the
 * elements (6.18, measured in test/flow-table.test.ts); should a listing still show other
 * limits, the table is replaced once, which empties the maps — flows then fall back to
 * their conntrack marks and write their entries again.
 *
 * Does not: decide any flow's node (passlb's table does) or count entries (flow-table-usage.ts).
 */
import type { NftDriver } from "../../drivers/nft.ts";
import { driftBetween } from "./nft-drift.ts";
import { type FlowTableConfig, flowTableState, flowTableTransaction } from "./render/flow-map.ts";
import type { NftState } from "./render/nft-state.ts";

export class FlowTableKeeper {
  readonly #nft: NftDriver;
  readonly #want: NftState;
  #applied = false;
  /** the table token (nft-generation.ts) of the last clean comparison */
  #verified: string | undefined;

  constructor(nft: NftDriver, table: string, seed: number, config: FlowTableConfig) {
    this.#nft = nft;
    this.#want = flowTableState(table, seed, config);
  }

  get table(): string {
    return this.#want.table;
  }

  /** Brings the table to what it must hold, if it may not. Throws PasslbError. */
  async ensure(): Promise<void> {
    if (this.#applied) return;
    await this.#nft.run(flowTableTransaction(this.#want));
    // limits of an earlier run (another --flow-table-size or --flow-timeout): replace
    if (this.#otherLimits(await this.#nft.dump(this.#want.table, { terse: true })))
      await this.#nft.run(flowTableTransaction(this.#want, true));
    this.#applied = true;
  }

  /** How the kernel's table differs from it (then the next `ensure` repairs), or undefined.
   * With `token` (no commit named the table since it changes) the last clean comparison
   * stands: a listing fetches every element, O(entries). */
  async check(token?: string): Promise<string | undefined> {
    if (!this.#applied) return undefined;
    if (token !== undefined && token === this.#verified) return undefined;
    const observed = await this.#nft.dump(this.#want.table, { terse: true });
    const what = driftBetween(this.#want, observed, false) ?? this.#otherLimits(observed);
    if (what) this.#applied = false;
    this.#verified = what ? undefined : token;
    return what;
  }

  /** a flow map listed with limits other than ours (a real listing; the fake keeps "?") */
  #otherLimits(observed: NftState | undefined): string | undefined {
    for (const s of this.#want.sets.values()) {
      const o = observed?.sets.get(s.name);
      if (o && o.decl !== "?" && !s.decl.includes(o.decl)) return `${s.name} has ${o.decl} not ${s.decl}`;
    }
    return undefined;
  }
}
