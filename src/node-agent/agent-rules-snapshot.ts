/**
 * The node agent's rules straight from a Snapshot: plans every Service passlb owns, merges
 * each one's EndpointSlices, and feeds both to `agentRules` for one node. Pure; the
 * agent command and the lab's tests call this with what they decoded.
 */
import { mergeServiceEndpoints, slicesByService } from "../endpoints/merge.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { nodeFacts } from "../plan/node-facts.ts";
import { type PlanCache, planSnapshot } from "../plan/planner.ts";
import { type AgentRule, agentRules } from "./agent-rules.ts";

export function agentRulesFromSnapshot(snapshot: Snapshot, node: string, cache?: PlanCache): AgentRule[] {
  const { plans } = planSnapshot(snapshot, {}, cache);
  const slices = slicesByService(snapshot.endpointSlices);
  const self = snapshot.nodes.find((n) => n.metadata.name === node);
  const zone = self ? nodeFacts(self).zone || undefined : undefined;
  return agentRules({
    node,
    zone,
    services: plans.map((plan) => ({
      plan,
      ports: mergeServiceEndpoints(slices.get(plan.service) ?? []).ports,
    })),
  });
}
