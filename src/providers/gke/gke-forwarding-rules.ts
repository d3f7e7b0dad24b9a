/**
 * The forwarding rules per path and IP family (specs/gke-l4.md §6): names (`a<uid>`,
 * `k8s2-<proto>-…`, `-ipv6`), protocol grouping (single, split TCP/UDP, L3_DEFAULT), and the
 * port form (`ports` up to 5, `allPorts`, or the min–max `portRange` that also opens every
 * port in between). IPv6 needs the matching subnet range (§6.3); a missing one is a user
 * error. Sources: ingress-gce forwarding_rules.go, l4netlbipv6.go, netlb_mixed_manager.go;
 * cloud-provider-gcp createForwardingRule, ensureInternalLoadBalancer.
 * Not modelled: the patch/recreate diff against existing rules, IP conflicts.
 */
import type { Family, GkeContext } from "./gke-context.ts";
import { withSuffix } from "./gke-names.ts";
import { type L4Protocol, minMaxRange, servicePorts } from "./gke-ports.ts";
import type { ForwardingRule, GkeFinding } from "./gke-types.ts";

const MAX_DISCRETE = 5;

export interface ForwardingRulesResult {
  readonly rules: ForwardingRule[];
  readonly findings: GkeFinding[];
  readonly steps: string[];
  /** families that actually got a rule */
  readonly families: Family[];
}

export function networkTier(ctx: GkeContext): "PREMIUM" | "STANDARD" {
  if (!ctx.external) return "PREMIUM";
  return ctx.service.metadata.annotations?.["cloud.google.com/network-tier"]?.toLowerCase() === "standard"
    ? "STANDARD"
    : "PREMIUM";
}

export function planForwardingRules(ctx: GkeContext, backendService: string | null): ForwardingRulesResult {
  const { choice, options, service, subject } = ctx;
  const rules: ForwardingRule[] = [];
  const findings: GkeFinding[] = [];
  const steps: string[] = [];
  const families: Family[] = [];
  const ports = servicePorts(service);
  const numbers = ports.map((p) => p.port);
  const first: L4Protocol = ports[0]?.protocol ?? "TCP";
  const tier = networkTier(ctx);
  const scheme: "EXTERNAL" | "INTERNAL" = ctx.external ? "EXTERNAL" : "INTERNAL";
  const ann = service.metadata.annotations ?? {};
  const globalAccess =
    !ctx.external && ann["networking.gke.io/internal-load-balancer-allow-global-access"] === "true";
  const subnet =
    ann["networking.gke.io/load-balancer-subnet"] ?? ann["networking.gke.io/internal-load-balancer-subnet"];
  const userError = (code: string, message: string) =>
    findings.push({ code, severity: "error", subject, message });
  const base = (family: Family) => ({
    ipVersion: family === "IPv4" ? ("IPV4" as const) : ("IPV6" as const),
    loadBalancingScheme: scheme,
    networkTier: tier,
    ...(ctx.external ? {} : { allowGlobalAccess: globalAccess }),
    ...(backendService ? { backendService } : { target: ctx.legacy }),
    ...(ctx.address[family] ? { IPAddress: ctx.address[family] } : {}),
    ...(!ctx.external && subnet ? { subnetwork: subnet } : {}),
  });
  const listOrAll = (list: readonly number[]) =>
    list.length <= MAX_DISCRETE ? { ports: list.map(String) } : { allPorts: true };
  const listOrRange = (list: readonly number[]) =>
    list.length <= MAX_DISCRETE ? { ports: list.map(String) } : { portRange: minMaxRange(list) };

  if (choice.path === "none") return { rules, findings, steps, families };
  if (choice.path === "target-pool") {
    rules.push({ name: ctx.legacy, IPProtocol: first, portRange: minMaxRange(numbers), ...base("IPv4") });
    steps.push(
      `Forwarding rule ${ctx.legacy}: ${first} portRange ${minMaxRange(numbers)}, the whole span between the ports.`,
    );
    return { rules, findings, steps, families: ["IPv4"] };
  }
  if (choice.path === "ccm-ilb") {
    rules.push({ name: ctx.legacy, IPProtocol: first, ...listOrAll(numbers), ...base("IPv4") });
    return { rules, findings, steps, families: ["IPv4"] };
  }

  for (const family of ctx.families) {
    if (family === "IPv6") {
      const range = ctx.external ? "external" : "internal";
      const has = options.subnetIpv6 === "both" || options.subnetIpv6 === range;
      if (!has) {
        userError(
          "gke_subnet_no_ipv6_range",
          `subnet ${subnet ?? "(cluster default)"} does not have ${range} IPv6 ranges, required for an ${ctx.external ? "external" : "internal"} IPv6 Service.`,
        );
        continue;
      }
      if (ctx.external && tier === "STANDARD") {
        userError(
          "gke_ipv6_standard_tier",
          "IPv6 external load balancers support only the Premium network tier (UnsupportedNetworkTierError).",
        );
        continue;
      }
    }
    families.push(family);
    const v6 = (name: string) => (family === "IPv6" ? withSuffix(name, "-ipv6") : name);
    if (choice.path === "subsetting-ilb") {
      if (ctx.mixed) {
        rules.push({
          name: v6(ctx.l4.forwardingRule("l3")),
          IPProtocol: "L3_DEFAULT",
          allPorts: true,
          ...base(family),
        });
      } else {
        rules.push({
          name: v6(ctx.l4.forwardingRule(first.toLowerCase() as "tcp" | "udp")),
          IPProtocol: first,
          ...listOrAll(numbers),
          ...base(family),
        });
      }
      continue;
    }
    // RBS NetLB
    if (ctx.mixed && options.flags["enable-l3-default-forwarding-rule-for-netlb-mixed-protocol"]) {
      rules.push({
        name: v6(ctx.l4.forwardingRule("l3")),
        IPProtocol: "L3_DEFAULT",
        allPorts: true,
        ...base(family),
      });
    } else if (ctx.mixed && family === "IPv4") {
      for (const protocol of ["TCP", "UDP"] as const) {
        const list = ports.filter((p) => p.protocol === protocol).map((p) => p.port);
        rules.push({
          name: ctx.l4.forwardingRule(protocol === "TCP" ? "tcp" : "udp"),
          IPProtocol: protocol,
          ...listOrRange(list),
          ...base(family),
        });
      }
      steps.push(
        "Mixed TCP/UDP without the L3 flag: one TCP and one UDP rule sharing one IP; the a<uid> rule is deleted first.",
      );
    } else {
      const discrete = options.flags["enable-discrete-port-forwarding"] && numbers.length <= MAX_DISCRETE;
      rules.push({
        name: family === "IPv4" ? ctx.legacy : withSuffix(ctx.legacy, "-ipv6"),
        IPProtocol: first,
        ...(discrete ? { ports: numbers.map(String) } : { portRange: minMaxRange(numbers) }),
        ...base(family),
      });
      if (!discrete && new Set(numbers).size > 1)
        steps.push(
          `portRange ${minMaxRange(numbers)} also forwards every port between the Service's ports (§6.2).`,
        );
    }
  }
  if (ctx.protocols.length > 1 && !ctx.mixed)
    findings.push({
      code: "gke_mixed_protocol_first_only",
      severity: "warning",
      subject,
      message: `TCP and UDP are mixed but ${ctx.external ? "enable-l4netlb-mixed-protocol" : "enable-l4ilb-mixed-protocol"} is off: the rule carries only ${first}, the first port's protocol.`,
    });
  return { rules, findings, steps, families };
}
