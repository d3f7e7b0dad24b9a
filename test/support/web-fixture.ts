/**
 * The dashboard and metrics scenario (test/fixtures/web/cluster.yaml) planned: the plans
 * the web tests feed to metrics and the dashboard view.
 */
import { readFileSync } from "node:fs";
import { decodeDocuments, formatProblem } from "../../src/k8s/decode.ts";
import { parseDocuments } from "../../src/k8s/documents.ts";
import type { LoadBalancerPlan } from "../../src/plan/load-balancer-plan.ts";
import { planSnapshot } from "../../src/plan/planner.ts";

const FILE = new URL("../fixtures/web/cluster.yaml", import.meta.url);

export function webPlans(): readonly LoadBalancerPlan[] {
  const { documents, problems } = parseDocuments("cluster.yaml", readFileSync(FILE, "utf8"));
  const decoded = decodeDocuments(documents);
  const all = [...problems, ...decoded.problems];
  if (all.length > 0) throw new Error(all.map(formatProblem).join("\n"));
  return planSnapshot(decoded.snapshot).plans;
}

export function webPlan(service: string): LoadBalancerPlan {
  const plan = webPlans().find((p) => p.service === service);
  if (!plan) throw new Error(`no plan for ${service}`);
  return plan;
}
