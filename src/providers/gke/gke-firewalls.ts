/**
 * VPC firewall rules for a GKE L4 load balancer (docs/providers-gke.md): the node rule per
 * IP family (source ranges from loadBalancerSourceRanges or its annotation, split by family,
 * 0.0.0.0/0 or 0::0/0 for an empty family; ports collapsed into ranges), the NetLB deny-all
 * rule with deny firewalls on, and the health-check rule with Google's prober ranges.
 * Sources: ingress-gce pkg/l4/utils/sourceranges.go, firewalls_l4.go, allowed.go,
 * getIPv6HCFirewallSourceRanges; cloud-provider-gcp firewall naming.
 * Not modelled: target tags (node network tags are not in Node objects), XPN.
 */
import { formatCidr, parseCidr } from "../../net/ip.ts";
import type { Family, GkeContext } from "./gke-context.ts";
import { withSuffix } from "./gke-names.ts";
import { collapsePorts, servicePorts } from "./gke-ports.ts";
import type { Firewall, FirewallRule, Firewalls, GkeFinding, HealthCheck } from "./gke-types.ts";

export const SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges";
export const HC_SOURCE_RANGES_V4 = ["130.211.0.0/22", "35.191.0.0/16", "209.85.152.0/22", "209.85.204.0/22"];
export const HC_SOURCE_RANGE_V6_ILB = "2600:2d00:1:b029::/64";
export const HC_SOURCE_RANGE_V6_NETLB = "2600:1901:8001::/48";

export interface SourceRanges {
  readonly IPv4: string[];
  readonly IPv6: string[];
  readonly from: "spec" | "annotation" | "default";
}

export function sourceRanges(ctx: GkeContext, findings: GkeFinding[]): SourceRanges {
  const spec = ctx.service.spec.loadBalancerSourceRanges ?? [];
  const annotation = ctx.service.metadata.annotations?.[SOURCE_RANGES_ANNOTATION];
  const from = spec.length > 0 ? "spec" : annotation?.trim() ? "annotation" : "default";
  const entries = from === "spec" ? spec : from === "annotation" ? (annotation ?? "").split(",") : [];
  const out = { IPv4: [] as string[], IPv6: [] as string[], from } as const;
  for (const raw of entries) {
    const text = raw.trim();
    const cidr = parseCidr(text, true);
    if (!cidr) {
      findings.push({
        code: "gke_invalid_source_range",
        severity: "error",
        subject: ctx.subject,
        message:
          from === "spec"
            ? `service.Spec.LoadBalancerSourceRanges: "${text}" is not a valid IP range`
            : `Service annotation ${SOURCE_RANGES_ANNOTATION}: "${text}" is not a valid IP range`,
      });
      continue;
    }
    out[cidr.family].push(formatCidr(cidr));
  }
  if (out.IPv4.length === 0) out.IPv4.push("0.0.0.0/0");
  if (out.IPv6.length === 0) out.IPv6.push("0::0/0");
  return out;
}

function allowedFor(ctx: GkeContext): FirewallRule[] {
  const ports = servicePorts(ctx.service);
  const byProtocol = (p: "TCP" | "UDP") => ports.filter((x) => x.protocol === p).map((x) => x.port);
  const order = ctx.protocols.length > 1 ? (["UDP", "TCP"] as const) : ctx.protocols;
  return order.map((p) => ({ IPProtocol: p.toLowerCase(), ports: collapsePorts(byProtocol(p)) }));
}

export function planFirewalls(
  ctx: GkeContext,
  families: readonly Family[],
  healthCheck: HealthCheck | null,
  findings: GkeFinding[],
  steps: string[],
): Firewalls {
  const { choice, options } = ctx;
  if (choice.path === "none") return {};
  const out: { -readonly [K in keyof Firewalls]: Firewall } = {};
  const netlb = ctx.external;
  const deny = options.flags["enable-l4-deny-firewall"];
  const ranges = sourceRanges(ctx, findings);
  const pinhole = ctx.ig ? options.flags["enable-pinhole"] : true;
  const destination = (family: Family) =>
    pinhole
      ? { destinationRanges: [ctx.address[family] ?? `<${family} address of the forwarding rule>`] }
      : {};
  const nodeName = (family: Family, kind: "" | "-deny") => {
    if (!ctx.ig) return `k8s-fw-${ctx.legacy}${kind}`;
    if (family === "IPv4") return kind ? withSuffix(ctx.l4.backend, kind) : ctx.l4.backend;
    return withSuffix(ctx.l4.backend, `${kind}-ipv6`);
  };
  const skipNodes = ctx.ig && options.flags["disable-l4-lb-fw"];
  if (skipNodes) steps.push("disable-l4-lb-fw is on: no node firewalls, only health-check firewalls.");
  if (ranges.from === "spec" || ranges.from === "annotation") {
    for (const family of families)
      if (ranges[family][0] === (family === "IPv4" ? "0.0.0.0/0" : "0::0/0"))
        findings.push({
          code: "gke_source_ranges_family_open",
          severity: "warning",
          subject: ctx.subject,
          message: `loadBalancerSourceRanges has no ${family} entry, so the ${family} rule is open to ${ranges[family][0]}.`,
        });
  }
  for (const family of families) {
    if (skipNodes) break;
    const allow: Firewall = {
      name: nodeName(family, ""),
      sourceRanges: ranges[family],
      ...destination(family),
      allowed: allowedFor(ctx),
      priority: netlb && deny ? 999 : 1000,
    };
    if (family === "IPv4") out.nodes = allow;
    else out.nodesIPv6 = allow;
    if (netlb && deny) {
      const denyAll: Firewall = {
        name: nodeName(family, "-deny"),
        sourceRanges: [family === "IPv4" ? "0.0.0.0/0" : "::/0"],
        ...destination(family),
        denied: [{ IPProtocol: "all" }],
        priority: 1000,
      };
      if (family === "IPv4") out.nodesDeny = denyAll;
      else out.nodesDenyIPv6 = denyAll;
    }
  }
  if (healthCheck) {
    const hcPriority = deny && (ctx.ig || netlb) ? 999 : 1000;
    const allowed = [{ IPProtocol: "tcp", ports: [String(healthCheck.port)] }];
    let v4Name: string;
    if (ctx.ig)
      v4Name = healthCheck.shared ? ctx.l4.sharedHealthCheckFirewall : ctx.l4.localHealthCheckFirewall;
    else if (choice.path === "target-pool")
      v4Name = healthCheck.shared ? `k8s-${ctx.clusterId}-node-http-hc` : `k8s-${ctx.legacy}-http-hc`;
    else v4Name = healthCheck.shared ? `k8s-${ctx.clusterId}-node-hc` : `${ctx.legacy}-hc`;
    if (families.includes("IPv4") || !ctx.ig)
      out.healthCheck = { name: v4Name, sourceRanges: HC_SOURCE_RANGES_V4, allowed, priority: hcPriority };
    if (ctx.ig && families.includes("IPv6")) {
      const v6Sources = healthCheck.shared
        ? [HC_SOURCE_RANGE_V6_ILB, HC_SOURCE_RANGE_V6_NETLB]
        : [netlb ? HC_SOURCE_RANGE_V6_NETLB : HC_SOURCE_RANGE_V6_ILB];
      out.healthCheckIPv6 = {
        name: healthCheck.shared
          ? `${ctx.l4.sharedHealthCheckFirewall}-ipv6`
          : withSuffix(ctx.l4.backend, "-fw-ipv6"),
        sourceRanges: v6Sources,
        allowed,
        priority: hcPriority,
      };
    }
  }
  return out;
}
