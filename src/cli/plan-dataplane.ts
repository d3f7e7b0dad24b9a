/**
 * `passlb plan --dataplane nftables|xdp`: the LB host's data plane view beside each plan.
 * `nftables`: each member's path (as `--forward` shows it; on the segment without it).
 * `xdp`: what the fast path holds per listener and member, and what it hands to the table,
 * with the reason (lb-host/xdp/xdp-plan-view.ts; docs/plan.md "Data plane view"). Table
 * sizes are the LB host's defaults (`--max-table-size` 4 093).
 */
import type { Command } from "commander";
import type { Snapshot } from "../k8s/snapshot.ts";
import { kernelTableSize } from "../lb-host/nftables/render/kernel-table-size.ts";
import { type Forward, memberPaths } from "../lb-host/routing/encap.ts";
import { type XdpPlanView, xdpPlanLines, xdpPlanView } from "../lb-host/xdp/xdp-plan-view.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";

export const PLAN_DATAPLANES = ["nftables", "xdp"] as const;
export type PlanDataplane = (typeof PLAN_DATAPLANES)[number];

export function addPlanDataplaneOption(command: Command): void {
  command.option(
    "--dataplane <name>",
    "show the LB host's data plane per Service: nftables (each node's path) or xdp (what the fast path holds, what it hands to nftables, and why)",
  );
}

/** the flag's value, or the error line naming it */
export function planDataplaneFrom(value: string | undefined): PlanDataplane | undefined | { error: string } {
  if (value === undefined) return undefined;
  return (PLAN_DATAPLANES as readonly string[]).includes(value)
    ? (value as PlanDataplane)
    : { error: `--dataplane must be nftables or xdp (got "${value}")` };
}

export interface PlanDataplaneView {
  /** node → path label, for the member lines and `members[].path` */
  paths(plan: LoadBalancerPlan): ReadonlyMap<string, string>;
  /** the "Data plane:" lines of the text view (none for nftables) */
  lines(plan: LoadBalancerPlan): readonly string[];
  /** the JSON view's `dataplane` field */
  json(plan: LoadBalancerPlan): { readonly name: PlanDataplane } & Partial<XdpPlanView>;
}

export function planDataplaneView(
  name: PlanDataplane,
  snapshot: Snapshot,
  forward: Forward | undefined,
): PlanDataplaneView {
  const route: Forward = forward ?? { mode: "route" };
  if (name === "nftables")
    return {
      paths: (plan) => memberPaths(route, plan.members),
      lines: () => [],
      json: () => ({ name }),
    };
  const zonesWithClients = new Set(
    snapshot.config.zones.filter((z) => z.clientCIDRs.length > 0).map((z) => z.name),
  );
  const sizeFor = kernelTableSize();
  const views = new WeakMap<LoadBalancerPlan, XdpPlanView>();
  const viewOf = (plan: LoadBalancerPlan): XdpPlanView => {
    let v = views.get(plan);
    if (!v) {
      v = xdpPlanView(plan, { seed: 0, sizeFor, forward: route, zonesWithClients });
      views.set(plan, v);
    }
    return v;
  };
  return {
    paths: (plan) => new Map(viewOf(plan).members.map((m) => [m.node, m.path])),
    lines: (plan) => xdpPlanLines(viewOf(plan)),
    json: (plan) => ({ name, ...viewOf(plan) }),
  };
}
