// Test helper: decodes a manifest fixture under test/fixtures/health/ into a Snapshot,
// failing loudly when the fixture itself has problems.
import { readFileSync } from "node:fs";
import { decodeDocuments, formatProblem } from "../../src/k8s/decode.ts";
import { parseDocuments } from "../../src/k8s/documents.ts";
import type { Snapshot } from "../../src/k8s/snapshot.ts";
import type { LoadBalancerPlan } from "../../src/plan/load-balancer-plan.ts";

export function fixturePath(name: string): string {
  return new URL(`../fixtures/health/${name}`, import.meta.url).pathname;
}

export function loadFixture(name: string): Snapshot {
  const path = fixturePath(name);
  const parsed = parseDocuments(path, readFileSync(path, "utf8"));
  const decoded = decodeDocuments(parsed.documents);
  const problems = [...parsed.problems, ...decoded.problems].map(formatProblem);
  if (problems.length > 0) throw new Error(`fixture ${name} has problems:\n${problems.join("\n")}`);
  return decoded.snapshot;
}

export function loadPlans(name: string): LoadBalancerPlan[] {
  return (JSON.parse(readFileSync(fixturePath(name), "utf8")) as { plans: LoadBalancerPlan[] }).plans;
}
