/**
 * The data `passlb plan --provider azure` produces: the options that stand in for the
 * cloud config, and the Azure Resource Manager shapes (probes, load-balancing rules) that
 * cloud-provider-azure would PUT for one Service. Types and defaults only, no behaviour.
 *
 * ARM shapes: `{ name, properties: {…} }` as in the Microsoft.Network/loadBalancers API;
 * which properties are set, and when, follows cloud-provider-azure
 * `pkg/provider/azure_loadbalancer_healthprobe.go` and `azure_loadbalancer.go` (docs/providers-azure.md "What
 * is reproduced"). Deliberately not modelled: frontend IP addresses, public IPs, security rules, outbound
 * rules, the ServiceGateway/PodIP path (`pkg/provider/servicegateway`).
 */

export type AzureSku = "Standard" | "Basic";
export type AzureProbeMode = "servicenodeport" | "shared";

export interface AzureOptions {
  /** `loadBalancerSku` of the cloud config; AKS defaults to Standard (spec §7) */
  readonly sku: AzureSku;
  /** `clusterServiceLoadBalancerHealthProbeMode` (spec §3.2) */
  readonly probeMode: AzureProbeMode;
  /** `clusterServiceSharedLoadBalancerHealthProbePort` (default 10256) */
  readonly sharedProbePort: number;
  /** `clusterServiceSharedLoadBalancerHealthProbePath` (default /healthz) */
  readonly sharedProbePath: string;
  /** only used to spell resource ids */
  readonly subscriptionId: string;
  /** the load balancer's resource group (AKS: the node resource group, `MC_…`) */
  readonly resourceGroup: string;
  /** the cluster name: the backend pool name and the base of the LB name (AKS: `kubernetes`) */
  readonly clusterName: string;
  /** overrides the LB name (default: clusterName, or clusterName + `-internal` for internal Services) */
  readonly loadBalancerName?: string;
  /** cloud config `disableOutboundSNAT`; only honoured on Standard (spec §5.1) */
  readonly disableOutboundSnat: boolean;
}

export const AZURE_DEFAULTS: AzureOptions = {
  sku: "Standard",
  probeMode: "servicenodeport",
  sharedProbePort: 10256,
  sharedProbePath: "/healthz",
  subscriptionId: "00000000-0000-0000-0000-000000000000",
  resourceGroup: "mc_passlb",
  clusterName: "kubernetes",
  disableOutboundSnat: false,
};

export type AzureProbeProtocol = "Tcp" | "Http" | "Https";

export interface AzureProbe {
  readonly name: string;
  readonly properties: {
    readonly protocol: AzureProbeProtocol;
    readonly port: number;
    /** only for Http and Https */
    readonly requestPath?: string;
    readonly intervalInSeconds: number;
    /** the resolved num-of-probe; `numberOfProbes` is never set (spec §4.4) */
    readonly probeThreshold: number;
  };
}

export interface AzureSubResource {
  readonly id: string;
}

export interface AzureRule {
  readonly name: string;
  readonly properties: {
    readonly frontendIPConfiguration: AzureSubResource;
    readonly backendAddressPool: AzureSubResource;
    readonly protocol: "Tcp" | "Udp" | "All";
    readonly frontendPort: number;
    readonly backendPort: number;
    readonly enableFloatingIP: boolean;
    /** set only for Tcp rules on Standard, and for HA-ports rules (`getExpectedLoadBalancingRulePropertiesForPort`, `getExpectedHAModeLoadBalancingRuleProperties`) */
    readonly enableTcpReset?: boolean;
    readonly idleTimeoutInMinutes: number;
    readonly loadDistribution: "Default" | "SourceIP";
    readonly disableOutboundSnat: boolean;
    readonly probe?: AzureSubResource;
  };
}

/** Why cloud-provider-azure would refuse to reconcile the Service. */
export interface AzureFailure {
  /** stable snake_case code (docs/providers-azure.md lists them) */
  readonly code: AzureFailureCode;
  readonly message: string;
  /** the annotation at fault, when one is */
  readonly annotation?: string;
  readonly value?: string;
}

export type AzureFailureCode =
  | "invalid_probe_port"
  | "invalid_probe_interval"
  | "invalid_probe_num_of_probe"
  | "probe_window_too_long"
  | "invalid_idle_timeout"
  | "sctp_unsupported";

interface PlanCommon {
  /** `namespace/name` */
  readonly service: string;
  readonly sku: AzureSku;
  readonly loadBalancer: string;
}

export interface AzureServicePlanOk extends PlanCommon {
  readonly probes: readonly AzureProbe[];
  readonly loadBalancingRules: readonly AzureRule[];
  readonly warnings: readonly string[];
  readonly explanation: readonly string[];
}

export interface AzureServicePlanFailed extends PlanCommon {
  readonly error: AzureFailure;
  readonly warnings: readonly string[];
  readonly explanation: readonly string[];
}

export type AzureServicePlan = AzureServicePlanOk | AzureServicePlanFailed;

/** Expected failures are values (docs/architecture.md "Conventions"): every step returns one of these. */
export type Outcome<T> =
  | { readonly ok: true; readonly value: T }
  | { readonly ok: false; readonly failure: AzureFailure };

/** Collects the explanation and warning lines of one Service while it is planned. */
export interface AzureNotes {
  readonly explain: string[];
  readonly warn: string[];
}
