/**
 * Load-balancing rule properties as cloud-provider-azure builds them (`getExpectedLoadBalancingRulePropertiesForPort`, `getExpectedHAModeLoadBalancingRuleProperties` in
 * azure_loadbalancer.go):
 * `getExpectedLoadBalancingRulePropertiesForPort` for one rule per service port and
 * `getExpectedHAModeLoadBalancingRuleProperties` for the single HA-ports rule. Rules are
 * returned without a probe; azure-plan.ts attaches one. Deliberately no naming and no
 * probe choice here.
 */
import type { Protocol, Service, ServicePort } from "../../k8s/objects.ts";
import type { IpFamily } from "../../net/ip.ts";
import { AZURE_ANNOTATIONS, annotation, flagOn, isInternal, parseWholeNumber } from "./azure-annotations.ts";
import type { AzureOptions, AzureRule, Outcome } from "./azure-model.ts";

export type RuleProperties = AzureRule["properties"];

export interface RuleContext {
  readonly service: Service;
  readonly options: AzureOptions;
  readonly family: IpFamily;
  readonly frontendConfigId: string;
  readonly backendPoolId: string;
}

/** `azure-load-balancer-tcp-idle-timeout`: 4..100 minutes, default 4, set on every rule (spec §5.1). */
export function idleTimeout(service: Service): Outcome<number> {
  const key = AZURE_ANNOTATIONS.idleTimeout;
  const raw = annotation(service, key);
  if (raw === undefined) return { ok: true, value: 4 };
  const n = parseWholeNumber(raw);
  if (n === undefined || n < 4 || n > 100)
    return {
      ok: false,
      failure: {
        code: "invalid_idle_timeout",
        annotation: key,
        value: raw,
        message: `${key}: ${JSON.stringify(raw)} must be a whole number of minutes from 4 to 100`,
      },
    };
  return { ok: true, value: n };
}

/** TCP→Tcp, UDP→Udp, SCTP→All (`getProtocolsFromKubernetesProtocol`). */
export const ruleProtocol = (p: Protocol): "Tcp" | "Udp" | "All" =>
  p === "TCP" ? "Tcp" : p === "UDP" ? "Udp" : "All";

/** Azure ILBs cannot float secondary (IPv6) addresses: internal + IPv6 pool means no floating IP. */
const internalIpv6 = (ctx: RuleContext): boolean => isInternal(ctx.service) && ctx.family === "IPv6";

const common = (ctx: RuleContext) => ({
  frontendIPConfiguration: { id: ctx.frontendConfigId },
  backendAddressPool: { id: ctx.backendPoolId },
});

const tail = (ctx: RuleContext, timeout: number) => ({
  idleTimeoutInMinutes: timeout,
  loadDistribution:
    ctx.service.spec.sessionAffinity === "ClientIP" ? ("SourceIP" as const) : ("Default" as const),
  disableOutboundSnat: ctx.options.sku === "Standard" ? ctx.options.disableOutboundSnat : false,
});

/** One rule's properties for a service port (`getExpectedLoadBalancingRulePropertiesForPort`). */
export function portRuleProperties(ctx: RuleContext, port: ServicePort): Outcome<RuleProperties> {
  const timeout = idleTimeout(ctx.service);
  if (!timeout.ok) return timeout;
  const protocol = ruleProtocol(port.protocol);
  const noFloating = internalIpv6(ctx) || flagOn(ctx.service, AZURE_ANNOTATIONS.disableFloatingIp);
  return {
    ok: true,
    value: {
      ...common(ctx),
      protocol,
      frontendPort: port.port,
      backendPort: noFloating ? (port.nodePort ?? 0) : port.port,
      enableFloatingIP: !noFloating,
      ...(protocol === "Tcp" && ctx.options.sku === "Standard"
        ? { enableTcpReset: !flagOn(ctx.service, AZURE_ANNOTATIONS.disableTcpReset) }
        : {}),
      ...tail(ctx, timeout.value),
    },
  };
}

/** The HA-ports rule (`getExpectedHAModeLoadBalancingRuleProperties`): All, ports 0, TCP reset always set; the floating-IP annotation is not read. */
export function haRuleProperties(ctx: RuleContext): Outcome<RuleProperties> {
  const timeout = idleTimeout(ctx.service);
  if (!timeout.ok) return timeout;
  return {
    ok: true,
    value: {
      ...common(ctx),
      protocol: "All",
      frontendPort: 0,
      backendPort: 0,
      enableFloatingIP: !internalIpv6(ctx),
      enableTcpReset: !flagOn(ctx.service, AZURE_ANNOTATIONS.disableTcpReset),
      ...tail(ctx, timeout.value),
    },
  };
}
