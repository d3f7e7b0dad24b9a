/**
 * The readable page per Service for `passlb plan --provider gke`: what would be created
 * (path, members by zone, health check, forwarding rules, firewalls), what to act on
 * (warning and error findings, Warning events), and with `explain` the decision path and
 * every node's in/out reason. Renders a GkeServicePlan; decides nothing.
 */
import type { Firewall, GkeServicePlan } from "./gke-types.ts";

const PATH_TITLE = {
  none: "nothing (no GKE controller builds this Service)",
  "target-pool": "external passthrough NLB, target pool (CCM)",
  "ccm-ilb": "internal passthrough NLB, instance groups (CCM)",
  "rbs-instance-groups": "external passthrough NLB, backend service + instance groups (ingress-gce)",
  "rbs-neg": "external passthrough NLB, backend service + GCE_VM_IP NEGs (ingress-gce)",
  "subsetting-ilb": "internal passthrough NLB, GKE subsetting, GCE_VM_IP NEGs (ingress-gce)",
} as const;

function firewallLine(role: string, f: Firewall): string {
  const rules = (f.allowed ?? f.denied ?? [])
    .map((r) => `${r.IPProtocol}${r.ports ? `:${r.ports.join(",")}` : ""}`)
    .join(" ");
  const verb = f.denied ? "deny" : "allow";
  const dest = f.destinationRanges ? ` → ${f.destinationRanges.join(",")}` : "";
  return `    ${role.padEnd(16)}${f.name}  ${verb} ${rules} from ${f.sourceRanges.join(",")}${dest}  priority ${f.priority}`;
}

export function renderGkeText(plans: readonly GkeServicePlan[], options: { explain: boolean }): string {
  const lines: string[] = [];
  for (const p of plans) {
    lines.push(`Service ${p.service}`);
    lines.push(`  GKE builds: ${PATH_TITLE[p.path]}${p.provisioned ? "" : " — not provisioned"}`);
    if (p.finalizer) lines.push(`  finalizer:  ${p.finalizer}`);
    if (p.provisioned) {
      if (p.forwardingRules.length > 0) lines.push("  forwarding rules:");
      for (const r of p.forwardingRules) {
        const ports = r.allPorts
          ? "all ports"
          : r.portRange
            ? `portRange ${r.portRange}`
            : `ports ${r.ports?.join(",")}`;
        const extra = [r.networkTier, r.allowGlobalAccess ? "global access" : "", r.IPAddress ?? ""].filter(
          Boolean,
        );
        lines.push(
          `    ${r.name}  ${r.ipVersion} ${r.IPProtocol} ${ports} ${r.loadBalancingScheme} (${extra.join(", ")})`,
        );
      }
      const bs = p.backendService;
      if (bs) {
        const za = bs.networkPassThroughLbTrafficPolicy?.zonalAffinity.spillover;
        lines.push(
          `  backend service: ${bs.name}  ${bs.protocol}, affinity ${bs.sessionAffinity}, draining ${bs.connectionDraining.drainingTimeoutSec}s${bs.localityLbPolicy ? `, ${bs.localityLbPolicy}` : ""}${za ? `, ${za}` : ""}`,
        );
      }
      if (p.targetPool)
        lines.push(`  target pool: ${p.targetPool.name}  ${p.targetPool.instances.length} instance(s)`);
      for (const neg of p.networkEndpointGroups)
        lines.push(
          `  NEG ${neg.zone}: ${neg.endpoints.length}/${neg.candidates} node(s) (quota ${neg.quota})${neg.linked ? "" : " not linked"}: ${neg.endpoints.map((e) => e.instance).join(", ") || "—"}`,
        );
      for (const ig of p.instanceGroups)
        lines.push(`  instance group ${ig.name} ${ig.zone}: ${ig.instances.join(", ") || "—"}`);
      if (p.targetPool) {
        const byZone = new Map<string, string[]>();
        for (const n of p.nodes.filter((d) => d.member))
          byZone.set(n.zone, [...(byZone.get(n.zone) ?? []), n.name]);
        for (const [zone, names] of byZone)
          lines.push(`  members ${zone || "(no zone)"}: ${names.join(", ")}`);
      }
      const hc = p.healthCheck;
      if (hc)
        lines.push(
          `  health check: ${hc.name}  ${hc.scope.toLowerCase()} ${hc.resource} HTTP ${hc.requestPath} :${hc.port}, ${hc.checkIntervalSec}s/${hc.timeoutSec}s, healthy ${hc.healthyThreshold}, unhealthy ${hc.unhealthyThreshold}`,
        );
      const fws = Object.entries(p.firewalls) as [string, Firewall][];
      if (fws.length > 0) lines.push("  firewalls:");
      for (const [role, f] of fws) lines.push(firewallLine(role, f));
    }
    // The troubleshooting list of the GKE page: errors, warnings, and the health-check ranges to allow.
    const act = p.findings.filter((f) => f.severity !== "info" || f.code === "gke_health_check_sources");
    if (act.length > 0) lines.push("  act on:");
    for (const f of act)
      lines.push(`    ${f.severity === "info" ? "check" : f.severity}: ${f.message} [${f.code}]`);
    if (p.events.length > 0) lines.push("  events:");
    for (const e of p.events) lines.push(`    ${e.type.padEnd(7)} ${e.reason}: ${e.message}`);
    for (const c of p.conditions) lines.push(`  condition: ${c.type}=${c.status} (${c.reason})`);
    if (options.explain) {
      lines.push("  why:");
      for (const s of p.explanation) lines.push(`    - ${s}`);
      for (const f of p.findings.filter(
        (x) => x.severity === "info" && x.code !== "gke_health_check_sources",
      ))
        lines.push(`    - note: ${f.message}`);
      if (p.nodes.length > 0) lines.push("  nodes:");
      for (const n of p.nodes)
        lines.push(`    ${n.member ? "+" : "-"} ${n.name} (${n.zone || "no zone"}): ${n.reason}`);
    }
    lines.push("");
  }
  if (plans.length === 0) lines.push("No LoadBalancer Services in the input.", "");
  return lines.join("\n");
}
