/**
 * What `planGke` returns per LoadBalancer Service: the Google Cloud resources in the
 * Compute Engine v1 API's field names (plus `scope`/`resource` where the API encodes scope in
 * the URL), the Events and conditions the controllers would write, and the decision path.
 * Types only.
 */
import type { GkeFlags } from "./gke-flags.ts";
import type { GkeVersion } from "./gke-version.ts";

export type GkePath =
  | "none"
  | "target-pool"
  | "ccm-ilb"
  | "rbs-instance-groups"
  | "rbs-neg"
  | "subsetting-ilb";
export type Scheme = "EXTERNAL" | "INTERNAL";
export type SubnetIpv6 = "internal" | "external" | "both" | "none";

export interface GkeOptions {
  readonly version: GkeVersion;
  /** undefined: on from 1.36 (GKE doc) */
  readonly subsetting?: boolean | undefined;
  readonly flags: GkeFlags;
  readonly subnetIpv6: SubnetIpv6;
}

export interface GkeEvent {
  readonly type: "Normal" | "Warning";
  readonly reason: string;
  readonly message: string;
}

export interface GkeFinding {
  readonly code: string;
  readonly severity: "error" | "warning" | "info";
  readonly subject: string;
  readonly message: string;
}

export interface ForwardingRule {
  readonly name: string;
  readonly IPProtocol: "TCP" | "UDP" | "L3_DEFAULT";
  readonly ipVersion: "IPV4" | "IPV6";
  readonly ports?: readonly string[];
  readonly portRange?: string;
  readonly allPorts?: boolean;
  readonly loadBalancingScheme: Scheme;
  readonly networkTier: "PREMIUM" | "STANDARD";
  readonly allowGlobalAccess?: boolean;
  readonly backendService?: string;
  readonly target?: string;
  readonly IPAddress?: string;
  readonly subnetwork?: string;
}

export interface BackendService {
  readonly name: string;
  readonly scope: "REGIONAL";
  readonly loadBalancingScheme: Scheme;
  readonly protocol: "TCP" | "UDP" | "UNSPECIFIED";
  readonly sessionAffinity: "NONE" | "CLIENT_IP";
  readonly localityLbPolicy?: "MAGLEV" | "WEIGHTED_MAGLEV" | "WEIGHTED_GCP_RENDEZVOUS";
  readonly connectionDraining: { readonly drainingTimeoutSec: number };
  readonly networkPassThroughLbTrafficPolicy?: {
    readonly zonalAffinity: {
      readonly spillover: "ZONAL_AFFINITY_SPILL_CROSS_ZONE" | "ZONAL_AFFINITY_DISABLED";
      readonly spilloverRatio: number;
    };
  };
  readonly connectionTrackingPolicy?: {
    readonly trackingMode: "PER_SESSION";
    readonly enableStrongAffinity: true;
    readonly idleTimeoutSec: number;
  };
  readonly healthChecks: readonly string[];
  readonly backends: readonly { readonly group: string; readonly balancingMode: "CONNECTION" }[];
}

export interface TargetPool {
  readonly name: string;
  readonly sessionAffinity: "NONE" | "CLIENT_IP";
  readonly healthChecks: readonly string[];
  readonly instances: readonly string[];
}

export interface NetworkEndpointGroup {
  readonly name: string;
  readonly zone: string;
  readonly networkEndpointType: "GCE_VM_IP";
  /** whether the backend service links this NEG (NetLB links zones with a Ready candidate only) */
  readonly linked: boolean;
  readonly candidates: number;
  readonly quota: number;
  readonly endpoints: readonly { readonly instance: string }[];
}

export interface InstanceGroup {
  readonly name: string;
  readonly zone: string;
  readonly instances: readonly string[];
}

export interface HealthCheck {
  readonly name: string;
  /** the API collection: legacy httpHealthChecks, global healthChecks or regionHealthChecks */
  readonly resource: "httpHealthChecks" | "healthChecks" | "regionHealthChecks";
  readonly type: "HTTP";
  readonly scope: "GLOBAL" | "REGIONAL";
  readonly shared: boolean;
  readonly checkIntervalSec: number;
  readonly timeoutSec: number;
  readonly healthyThreshold: number;
  readonly unhealthyThreshold: number;
  readonly port: number;
  readonly requestPath: string;
}

export interface FirewallRule {
  readonly IPProtocol: string;
  readonly ports?: readonly string[];
}

export interface Firewall {
  readonly name: string;
  readonly sourceRanges: readonly string[];
  readonly destinationRanges?: readonly string[];
  readonly allowed?: readonly FirewallRule[];
  readonly denied?: readonly FirewallRule[];
  readonly priority: number;
}

export interface Firewalls {
  readonly nodes?: Firewall;
  readonly nodesIPv6?: Firewall;
  readonly nodesDeny?: Firewall;
  readonly nodesDenyIPv6?: Firewall;
  readonly healthCheck?: Firewall;
  readonly healthCheckIPv6?: Firewall;
}

export interface NodeDecision {
  readonly name: string;
  readonly zone: string;
  readonly member: boolean;
  /** why it is out, or how it got in */
  readonly reason: string;
}

export interface GkeServicePlan {
  readonly service: string;
  readonly provisioned: boolean;
  readonly path: GkePath;
  readonly scheme: Scheme | null;
  readonly frontend: "TARGET_POOL" | "BACKEND_SERVICE" | null;
  readonly backendType: "TARGET_POOL" | "INSTANCE_GROUP" | "GCE_VM_IP_NEG" | null;
  readonly finalizer: string | null;
  readonly forwardingRules: readonly ForwardingRule[];
  readonly backendService: BackendService | null;
  readonly targetPool: TargetPool | null;
  readonly networkEndpointGroups: readonly NetworkEndpointGroup[];
  readonly instanceGroups: readonly InstanceGroup[];
  readonly healthCheck: HealthCheck | null;
  readonly firewalls: Firewalls;
  readonly nodes: readonly NodeDecision[];
  readonly events: readonly GkeEvent[];
  readonly conditions: readonly { readonly type: string; readonly status: string; readonly reason: string }[];
  readonly findings: readonly GkeFinding[];
  readonly explanation: readonly string[];
}
