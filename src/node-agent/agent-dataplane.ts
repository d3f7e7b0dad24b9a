/**
 * The node agent's packet side as an object with a lifecycle: give it every good Snapshot
 * and it keeps the node's `inet passlb-agent` table equal to what `agentRulesFromSnapshot`
 * says, replacing the table in one nft transaction (agent-ruleset.ts, run by the one nft
 * driver, drivers/nft.ts) when its script changes and doing nothing when it does not. A
 * failed run leaves the previous table in place (nft transactions are atomic) and is
 * reported; the next snapshot tries again. `close` removes the table.
 *
 * After every sync whose rules are in place (applied, or unchanged), it deletes the UDP and
 * SCTP conntrack entries that still point at endpoints that stopped serving
 * (`conntrack-cleanup.ts` decides, the `ConntrackDriver` deletes), as kube-proxy does after
 * each of its syncs; a deletion that fails is asked for again on the next sync. The first
 * such sync lists each UDP/SCTP listener's entries once instead (the agent does not know
 * what served before it started). After a failed apply the old rules are still in place,
 * so nothing is deleted.
 *
 * It reads no files and owns no timers: the agent command feeds it snapshots from its
 * source (manifest folder, later the API).
 */

import type { ConntrackDriver } from "../drivers/conntrack-tool.ts";
import type { NftDriver } from "../drivers/nft.ts";
import { nftScript } from "../drivers/nft-transaction.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { createPlanCache } from "../plan/planner.ts";
import { agentRulesFromSnapshot } from "./agent-rules-snapshot.ts";
import { type AgentRulesetOptions, agentRuleset, agentTableRemoval } from "./agent-ruleset.ts";
import {
  type ConntrackDeletion,
  type ConntrackMemory,
  EMPTY_CONNTRACK_MEMORY,
  rememberFailed,
  staleConntrackEntries,
  staleFromListing,
  startupListings,
} from "./conntrack-cleanup.ts";

export interface AgentDataplaneOptions {
  readonly node: string;
  readonly nft: Pick<NftDriver, "run" | "check">;
  /** deletes stale UDP/SCTP conntrack entries; without one, none are deleted */
  readonly conntrack?: ConntrackDriver;
  readonly log: (line: string) => void;
  /** ruleset options (the MSS clamp of a node behind encapsulation) */
  readonly ruleset?: AgentRulesetOptions;
}

export type AgentUpdate = "applied" | "unchanged" | "failed";

export class AgentDataplane {
  readonly #options: AgentDataplaneOptions;
  readonly #cache = createPlanCache();
  /** the script of the transaction last run (a new one runs only when it differs) */
  #applied: string | undefined;
  #conntrackMemory: ConntrackMemory = EMPTY_CONNTRACK_MEMORY;
  /** the first sync's listing of every UDP/SCTP listener's entries is done */
  #listed = false;

  constructor(options: AgentDataplaneOptions) {
    this.#options = options;
  }

  async update(snapshot: Snapshot): Promise<AgentUpdate> {
    const rules = agentRulesFromSnapshot(snapshot, this.#options.node, this.#cache);
    const tx = agentRuleset(rules, this.#options.ruleset);
    const text = nftScript(tx);
    if (text === this.#applied) {
      await this.#cleanConntrack(rules);
      return "unchanged";
    }
    try {
      await this.#options.nft.run(tx);
    } catch (e) {
      this.#options.log(`error nft_failed: keeping the previous rules: ${(e as Error).message}`);
      return "failed";
    }
    this.#applied = text;
    const dnat = rules.filter((r) => r.targets.length > 0).length;
    const rejecting = rules.filter((r) => r.targets.length === 0 && r.noEndpoints).length;
    this.#options.log(
      `rules applied: ${rules.length} VIP listener(s), ${dnat} with endpoints, ${rejecting} rejecting (no endpoints)`,
    );
    await this.#cleanConntrack(rules);
    return "applied";
  }

  /** Deletes the entries of endpoints that stopped serving (once the new rules are in). */
  async #cleanConntrack(rules: Parameters<typeof staleConntrackEntries>[1]): Promise<void> {
    const { deletions, next } = staleConntrackEntries(this.#conntrackMemory, rules);
    const driver = this.#options.conntrack;
    let firstError: string | undefined;
    if (driver && !this.#listed) {
      // entries from before the agent started: list each listener's once
      let ok = true;
      for (const rule of startupListings(rules)) {
        try {
          const sources = await driver.listReplySources({
            family: rule.family,
            protocol: rule.protocol as "udp" | "sctp",
            origDst: rule.vip,
            origPortDst: rule.port,
          });
          for (const d of staleFromListing(rule, sources))
            if (
              !deletions.some(
                (x) =>
                  x.origDst === d.origDst &&
                  x.origPortDst === d.origPortDst &&
                  x.protocol === d.protocol &&
                  x.replySrc === d.replySrc,
              )
            )
              deletions.push(d);
        } catch (e) {
          ok = false;
          firstError ??= `${(e as { code?: string }).code ?? "error"}: ${(e as Error).message}`;
        }
      }
      this.#listed = ok;
    }
    if (!driver || deletions.length === 0) {
      this.#conntrackMemory = next;
      if (firstError !== undefined) this.#options.log(`error ${firstError} (listed again next sync)`);
      return;
    }
    const failed: ConntrackDeletion[] = [];
    for (const d of deletions) {
      try {
        const n = await driver.deleteFlows(d);
        if (n > 0)
          this.#options.log(
            `conntrack: deleted ${n} ${d.protocol.toUpperCase()} flow(s) of ${d.service} to ${d.replySrc} (no longer serving)`,
          );
      } catch (e) {
        failed.push(d);
        firstError ??= `${(e as { code?: string }).code ?? "error"}: ${(e as Error).message}`;
      }
    }
    if (firstError !== undefined)
      this.#options.log(`error ${firstError} (${failed.length} deletion(s) asked for again next sync)`);
    this.#conntrackMemory = rememberFailed(next, failed);
  }

  async close(): Promise<void> {
    if (this.#applied === undefined) return;
    try {
      await this.#options.nft.run(agentTableRemoval());
    } catch (e) {
      this.#options.log(`error nft_failed: could not remove the agent table: ${(e as Error).message}`);
    }
    this.#applied = undefined;
  }
}
