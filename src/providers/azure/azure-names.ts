/**
 * Names and resource ids exactly as cloud-provider-azure derives them (`GetLoadBalancerName`, `getLoadBalancerRuleName` in azure_standard.go, `getResourceByIPFamily` in azure_utils.go):
 * the rule prefix from the Service UID, rule and probe names, the `-IPv6` suffix for the
 * IPv6 half of a dual-stack Service, and the ARM ids rules use to reference probes,
 * frontend IP configurations and backend pools. Deliberately no policy: which names are
 * used for what is decided in azure-plan.ts.
 *
 * Beyond the spec (from upstream `getBackendPoolName` / `getDefaultFrontendIPConfigName`):
 * the backend pool is the cluster name, `<cluster>-IPv6` for IPv6; the frontend IP
 * configuration is named after the rule prefix (plus the internal subnet), `-IPv6` in dual-stack.
 */
import type { Protocol, Service } from "../../k8s/objects.ts";
import type { IpFamily } from "../../net/ip.ts";
import { AZURE_ANNOTATIONS, annotation, isInternalExact } from "./azure-annotations.ts";
import type { AzureOptions } from "./azure-model.ts";

/** `cluster-service-shared-health-probe` (consts.SharedProbeName); same for both families. */
export const SHARED_PROBE_NAME = "cluster-service-shared-health-probe";

/** Rule names may be 80 characters; 5 are kept for the `-IPv6` suffix. */
const RULE_NAME_BUDGET = 80 - 5;

/** `a` + the UID without dashes, cut to 32 characters (cloud-provider DefaultLoadBalancerName). */
export function rulePrefix(uid: string): string {
  return `a${uid.replaceAll("-", "")}`.slice(0, 32);
}

/** The internal subnet segment, when the Service is internal (exactly `true`) and names a non-blank subnet. */
function internalSubnet(service: Service): string | undefined {
  if (!isInternalExact(service)) return undefined;
  const subnet = annotation(service, AZURE_ANNOTATIONS.internalSubnet);
  return subnet !== undefined && subnet.trim() !== "" ? subnet : undefined;
}

export interface NameScope {
  readonly service: Service;
  /** the rule prefix (from the UID) */
  readonly prefix: string;
  readonly family: IpFamily;
  readonly dualStack: boolean;
}

const byFamily = (name: string, scope: NameScope): string =>
  scope.dualStack && scope.family === "IPv6" ? `${name}-IPv6` : name;

/** `<prefix>-<PROTO>-<port>`, or `<prefix>-<subnet>-<PROTO>-<port>` for an internal subnet (spec §2). */
export function ruleName(scope: NameScope, protocol: Protocol, port: number): string {
  const plain = `${scope.prefix}-${protocol}-${port}`;
  const subnet = internalSubnet(scope.service);
  if (subnet === undefined) return byFamily(plain, scope);
  const room = RULE_NAME_BUDGET - plain.length - 1;
  const segment =
    plain.length + subnet.length + 1 > RULE_NAME_BUDGET ? subnet.slice(0, Math.max(0, room)) : subnet;
  return byFamily(`${scope.prefix}-${segment}-${protocol}-${port}`, scope);
}

/** The frontend IP configuration name (see the header). */
export function frontendConfigName(scope: NameScope): string {
  const subnet = internalSubnet(scope.service);
  const base = subnet === undefined ? scope.prefix : `${scope.prefix}-${subnet}`.slice(0, RULE_NAME_BUDGET);
  return byFamily(base, scope);
}

/** The load balancer a Service lands on: `<cluster>` or `<cluster>-internal` unless overridden. */
export function loadBalancerName(service: Service, options: AzureOptions): string {
  if (options.loadBalancerName !== undefined) return options.loadBalancerName;
  return isInternalExact(service) ? `${options.clusterName}-internal` : options.clusterName;
}

function lbId(options: AzureOptions, lbName: string): string {
  return `/subscriptions/${options.subscriptionId}/resourceGroups/${options.resourceGroup}/providers/Microsoft.Network/loadBalancers/${lbName}`;
}

/** getLoadBalancerProbeID: `…/loadBalancers/<lb>/probes/<name>`. */
export const probeId = (options: AzureOptions, lbName: string, probe: string): string =>
  `${lbId(options, lbName)}/probes/${probe}`;

export const frontendConfigId = (options: AzureOptions, lbName: string, scope: NameScope): string =>
  `${lbId(options, lbName)}/frontendIPConfigurations/${frontendConfigName(scope)}`;

/** The backend pool: the cluster name, `-IPv6` for the IPv6 pool (even single-stack). */
export const backendPoolId = (options: AzureOptions, lbName: string, family: IpFamily): string =>
  `${lbId(options, lbName)}/backendAddressPools/${options.clusterName}${family === "IPv6" ? "-IPv6" : ""}`;
