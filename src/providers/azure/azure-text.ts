/**
 * The readable page of `passlb plan --provider azure`: per Service, the probes and rules
 * AKS would create (or the error it would stop at), the warnings worth acting on, and with
 * `explain` the decision path. A pure view of `AzureServicePlan`; adds no facts of its own.
 */
import type { AzureProbe, AzureRule, AzureServicePlan } from "./azure-model.ts";

const probeName = (id: string): string => id.slice(id.lastIndexOf("/") + 1);

function probeLine(p: AzureProbe): string {
  const q = p.properties;
  const path = q.requestPath === undefined ? "" : ` ${q.requestPath}`;
  return `${p.name}  ${q.protocol} port ${q.port}${path}, every ${q.intervalInSeconds}s, threshold ${q.probeThreshold}`;
}

function ruleLine(r: AzureRule): string {
  const q = r.properties;
  const traits = [
    q.enableFloatingIP ? "floating IP" : "no floating IP",
    ...(q.enableTcpReset === undefined ? [] : [q.enableTcpReset ? "TCP reset" : "no TCP reset"]),
    `idle ${q.idleTimeoutInMinutes} min`,
    q.loadDistribution === "SourceIP" ? "client IP affinity" : "5-tuple hash",
    ...(q.disableOutboundSnat ? ["outbound SNAT disabled"] : []),
  ];
  const ports =
    q.protocol === "All" && q.frontendPort === 0 ? "all ports" : `${q.frontendPort} → ${q.backendPort}`;
  const probe = q.probe === undefined ? "no probe" : `probe ${probeName(q.probe.id)}`;
  return `${r.name}  ${q.protocol} ${ports} (${traits.join(", ")}); ${probe}`;
}

export function renderAzureText(plans: readonly AzureServicePlan[], options: { explain: boolean }): string {
  if (plans.length === 0) return "no Service of type LoadBalancer in the input\n";
  const out: string[] = [];
  for (const plan of plans) {
    out.push(`Service ${plan.service}  (Azure ${plan.sku} SKU, load balancer ${plan.loadBalancer})`);
    if ("error" in plan) {
      out.push(`  error (${plan.error.code}): ${plan.error.message}`);
      out.push("  cloud-provider-azure would refuse this Service and change nothing on the load balancer");
    } else {
      out.push(plan.probes.length === 0 ? "  probes: none" : "  probes:");
      for (const p of plan.probes) out.push(`    ${probeLine(p)}`);
      out.push(
        plan.loadBalancingRules.length === 0 ? "  load-balancing rules: none" : "  load-balancing rules:",
      );
      for (const r of plan.loadBalancingRules) out.push(`    ${ruleLine(r)}`);
    }
    if (plan.warnings.length > 0) {
      out.push("  warnings:");
      for (const w of plan.warnings) out.push(`    - ${w}`);
    }
    if (options.explain) {
      out.push("  why:");
      for (const e of plan.explanation) out.push(`    - ${e}`);
    }
    out.push("");
  }
  return out.join("\n");
}
