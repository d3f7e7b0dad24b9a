/**
 * The forwarding rules per path and IP family (docs/providers-gke.md): names (`a<uid>`,
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

/** What the per-family rule steps share. */
interface RuleWalk {
  readonly ctx: GkeContext;
  readonly ports: ReturnType<typeof servicePorts>;
  readonly numbers: readonly number[];
  readonly first: L4Protocol;
  readonly tier: "PREMIUM" | "STANDARD";
  readonly subnet: string | undefined;
  readonly base: (family: Family) => Omit<ForwardingRule, "name" | "IPProtocol">;
  readonly rules: ForwardingRule[];
  readonly findings: GkeFinding[];
  readonly steps: string[];
}

const listOrAll = (list: readonly number[]) =>
  list.length <= MAX_DISCRETE ? { ports: list.map(String) } : { allPorts: true };
const listOrRange = (list: readonly number[]) =>
  list.length <= MAX_DISCRETE ? { ports: list.map(String) } : { portRange: minMaxRange(list) };

/** In steps: the fields every rule shares → the CCM paths (one IPv4 rule) → per family: the
 * IPv6 prerequisites, then the subsetting ILB's or the RBS NetLB's rules. */
export function planForwardingRules(ctx: GkeContext, backendService: string | null): ForwardingRulesResult {
  const { choice, service, subject } = ctx;
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
  const base = (family: Family) => ({
    ipVersion: family === "IPv4" ? ("IPV4" as const) : ("IPV6" as const),
    loadBalancingScheme: scheme,
    networkTier: tier,
    ...(ctx.external ? {} : { allowGlobalAccess: globalAccess }),
    ...(backendService ? { backendService } : { target: ctx.legacy }),
    ...(ctx.address[family] ? { IPAddress: ctx.address[family] } : {}),
    ...(!ctx.external && subnet ? { subnetwork: subnet } : {}),
  });
  const w: RuleWalk = { ctx, ports, numbers, first, tier, subnet, base, rules: [], findings: [], steps: [] };
  const { rules, findings, steps } = w;

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
    if (family === "IPv6" && !ipv6Possible(w)) continue;
    families.push(family);
    if (choice.path === "subsetting-ilb") subsettingIlbRule(w, family);
    else netlbRules(w, family);
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

/** IPv6 needs the subnet's matching IPv6 range and, when external, the Premium tier (§6.3). */
function ipv6Possible(w: RuleWalk): boolean {
  const { ctx } = w;
  const userError = (code: string, message: string) =>
    w.findings.push({ code, severity: "error", subject: ctx.subject, message });
  const range = ctx.external ? "external" : "internal";
  const has = ctx.options.subnetIpv6 === "both" || ctx.options.subnetIpv6 === range;
  if (!has) {
    userError(
      "gke_subnet_no_ipv6_range",
      `subnet ${w.subnet ?? "(cluster default)"} does not have ${range} IPv6 ranges, required for an ${ctx.external ? "external" : "internal"} IPv6 Service.`,
    );
    return false;
  }
  if (ctx.external && w.tier === "STANDARD") {
    userError(
      "gke_ipv6_standard_tier",
      "IPv6 external load balancers support only the Premium network tier (UnsupportedNetworkTierError).",
    );
    return false;
  }
  return true;
}

const v6Name = (family: Family, name: string) => (family === "IPv6" ? withSuffix(name, "-ipv6") : name);

/** The subsetting ILB: one rule per family, L3_DEFAULT when protocols are mixed. */
function subsettingIlbRule(w: RuleWalk, family: Family): void {
  const { ctx } = w;
  if (ctx.mixed)
    w.rules.push({
      name: v6Name(family, ctx.l4.forwardingRule("l3")),
      IPProtocol: "L3_DEFAULT",
      allPorts: true,
      ...w.base(family),
    });
  else
    w.rules.push({
      name: v6Name(family, ctx.l4.forwardingRule(w.first.toLowerCase() as "tcp" | "udp")),
      IPProtocol: w.first,
      ...listOrAll(w.numbers),
      ...w.base(family),
    });
}

/** The RBS NetLB: L3_DEFAULT, a TCP and a UDP rule (mixed, IPv4), or one `a<uid>` rule. */
function netlbRules(w: RuleWalk, family: Family): void {
  const { ctx, numbers } = w;
  if (ctx.mixed && ctx.options.flags["enable-l3-default-forwarding-rule-for-netlb-mixed-protocol"]) {
    w.rules.push({
      name: v6Name(family, ctx.l4.forwardingRule("l3")),
      IPProtocol: "L3_DEFAULT",
      allPorts: true,
      ...w.base(family),
    });
  } else if (ctx.mixed && family === "IPv4") {
    for (const protocol of ["TCP", "UDP"] as const) {
      const list = w.ports.filter((p) => p.protocol === protocol).map((p) => p.port);
      w.rules.push({
        name: ctx.l4.forwardingRule(protocol === "TCP" ? "tcp" : "udp"),
        IPProtocol: protocol,
        ...listOrRange(list),
        ...w.base(family),
      });
    }
    w.steps.push(
      "Mixed TCP/UDP without the L3 flag: one TCP and one UDP rule sharing one IP; the a<uid> rule is deleted first.",
    );
  } else {
    const discrete = ctx.options.flags["enable-discrete-port-forwarding"] && numbers.length <= MAX_DISCRETE;
    w.rules.push({
      name: family === "IPv4" ? ctx.legacy : withSuffix(ctx.legacy, "-ipv6"),
      IPProtocol: w.first,
      ...(discrete ? { ports: numbers.map(String) } : { portRange: minMaxRange(numbers) }),
      ...w.base(family),
    });
    if (!discrete && new Set(numbers).size > 1)
      w.steps.push(
        `portRange ${minMaxRange(numbers)} also forwards every port between the Service's ports (§6.2).`,
      );
  }
}
