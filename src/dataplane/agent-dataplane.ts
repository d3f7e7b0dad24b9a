/**
 * The node agent's packet side as an object with a lifecycle: give it every good Snapshot
 * and it keeps the node's `inet passlb-agent` table equal to what `agentRulesFromSnapshot`
 * says, replacing the table in one nft transaction when the text changes and doing nothing
 * when it does not. A failed apply leaves the previous table in place (nft transactions
 * are atomic) and is reported; the next snapshot tries again. `close` removes the table.
 *
 * It reads no files and owns no timers: the agent command feeds it snapshots from its
 * source (manifest folder, later the API).
 */
import type { Snapshot } from "../k8s/snapshot.ts";
import { createPlanCache } from "../plan/planner.ts";
import type { AgentNft } from "./agent-nft.ts";
import { agentRulesFromSnapshot } from "./agent-rules-snapshot.ts";
import { type AgentRulesetOptions, agentRuleset } from "./agent-ruleset.ts";

export interface AgentDataplaneOptions {
  readonly node: string;
  readonly nft: AgentNft;
  readonly log: (line: string) => void;
  /** ruleset options (the MSS clamp of a node behind encapsulation) */
  readonly ruleset?: AgentRulesetOptions;
}

export type AgentUpdate = "applied" | "unchanged" | "failed";

export class AgentDataplane {
  readonly #options: AgentDataplaneOptions;
  readonly #cache = createPlanCache();
  #applied: string | undefined;

  constructor(options: AgentDataplaneOptions) {
    this.#options = options;
  }

  async update(snapshot: Snapshot): Promise<AgentUpdate> {
    const rules = agentRulesFromSnapshot(snapshot, this.#options.node, this.#cache);
    const text = agentRuleset(rules, this.#options.ruleset);
    if (text === this.#applied) return "unchanged";
    try {
      await this.#options.nft.apply(text);
    } catch (e) {
      this.#options.log(`error nft_failed: keeping the previous rules: ${(e as Error).message}`);
      return "failed";
    }
    this.#applied = text;
    const dnat = rules.filter((r) => r.targets.length > 0).length;
    this.#options.log(`rules applied: ${rules.length} VIP listener(s), ${dnat} with endpoints`);
    return "applied";
  }

  async close(): Promise<void> {
    if (this.#applied === undefined) return;
    try {
      await this.#options.nft.remove();
    } catch (e) {
      this.#options.log(`error nft_failed: could not remove the agent table: ${(e as Error).message}`);
    }
    this.#applied = undefined;
  }
}
