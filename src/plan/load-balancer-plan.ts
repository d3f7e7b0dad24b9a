/**
 * LoadBalancerPlan: the one description of what must exist for a Service. Every executor
 * (nftables, userspace proxy, status writer, dashboard, `passlb plan`) consumes it; none
 * re-derives policy. Plain data; its serialised form is `planJson` (plan-json.ts, the schema
 * in docs/plan.md).
 */
import type { Protocol } from "../k8s/objects.ts";
import type { IpFamily } from "../net/ip.ts";
import type { PlanIssueCode } from "./issue-codes.ts";

export type Severity = "error" | "warning" | "info";

/** A finding of any part of passlb: data, not an exception (logs, Events, CLI output). */
export interface Finding {
  /** stable snake_case */
  readonly code: string;
  readonly severity: Severity;
  /** what it is about: `Service ns/name`, `Node n1`, `Pool default` */
  readonly subject: string;
  readonly message: string;
}

/** A planner finding: codes catalogued in issue-codes.ts and docs/plan.md. */
export interface PlanIssue extends Finding {
  readonly code: PlanIssueCode;
}

export interface Vip {
  readonly family: IpFamily;
  readonly address: string;
  /** the pool it came from; undefined for an address no pool contains (kept, with an issue) */
  readonly pool: string | undefined;
  /** how it was chosen */
  readonly source: "status" | "requested" | "allocated" | "shared";
}

/** A foreign Service annotation as address management read it (address-request.ts). */
export interface ForeignKeyRead {
  readonly key: string;
  readonly value: string;
  readonly origin: "passlb" | "metallb" | "cilium" | "kube-vip" | "purelb" | "openelb";
  readonly use: "honoured" | "ignored" | "unsupported";
  readonly how: string;
}

export interface Listener {
  /** the service port's name ("" when unnamed) */
  readonly name: string;
  readonly protocol: Protocol;
  readonly port: number;
  readonly nodePort: number | null;
  readonly targetPort: number | string;
}

export type HealthCheckProtocol = "HTTP" | "HTTPS" | "TCP";

export interface HealthCheck {
  /** stable id within the plan, e.g. `node-healthz`, `local`, `azure-TCP-80` */
  readonly id: string;
  readonly protocol: HealthCheckProtocol;
  readonly port: number;
  /** request path for HTTP(S); null for TCP */
  readonly path: string | null;
  readonly intervalSeconds: number;
  readonly timeoutSeconds: number;
  readonly healthyThreshold: number;
  readonly unhealthyThreshold: number;
  /** listener names (`protocol/port`) this check gates */
  readonly listeners: readonly string[];
  /** read `X-Load-Balancing-Endpoint-Weight` from the answer (weighted Local Services) */
  readonly readsWeight: boolean;
  /** why this check, in a phrase: "GKE default for externalTrafficPolicy: Local" */
  readonly origin: string;
}

export type BackendReason =
  | "eligible"
  | "has_local_endpoints"
  | "in_subset"
  | "not_in_subset"
  | "no_local_endpoints"
  | "only_terminating_endpoints"
  | "over_local_limit"
  | "no_address_for_family"
  | "node_deleting"
  | "node_to_be_deleted"
  | "node_excluded_by_label";

export interface Backend {
  readonly node: string;
  readonly zone: string;
  readonly addresses: { readonly IPv4?: string; readonly IPv6?: string };
  /** the weight new connections start with; the health check may update it at run time */
  readonly weight: number;
  readonly included: boolean;
  readonly reason: BackendReason;
  /** plain words for `--explain` */
  readonly explanation: string;
  /** the node's Ready condition; unready nodes stay members, the health check decides (KEP-3458) */
  readonly ready: boolean;
  /** externalTrafficPolicy Local: ready local endpoints (distinct IPs), what the node's
   * health check reports as its weight; null under Cluster */
  readonly localReadyEndpoints: number | null;
}

export interface SessionAffinity {
  readonly type: "None" | "ClientIP";
  readonly timeoutSeconds: number | null;
}

export interface LoadBalancerPlan {
  /** `namespace/name` */
  readonly service: string;
  readonly uid: string | undefined;
  readonly externalTrafficPolicy: "Cluster" | "Local";
  readonly ipFamilies: readonly IpFamily[];
  readonly vips: readonly Vip[];
  /** the foreign annotations address management read and how (present only when any) */
  readonly foreignKeys?: readonly ForeignKeyRead[];
  readonly listeners: readonly Listener[];
  /** every node the Service could use, included or not, sorted by zone then name
   * (built on first read) */
  readonly backends: readonly Backend[];
  /** the included backends only, same order; left out of the JSON view (plan-json.ts: it
   * repeats `backends`) */
  readonly members: readonly Backend[];
  readonly healthChecks: readonly HealthCheck[];
  readonly weighted: boolean;
  readonly zonalAffinity: boolean;
  readonly sessionAffinity: SessionAffinity;
  /** per family, canonical CIDRs; empty means every source */
  readonly sourceRanges: readonly string[];
  readonly ipMode: "VIP" | "Proxy";
  readonly issues: readonly PlanIssue[];
}

/** `TCP/80`: how health checks and the data plane name a listener. */
export function listenerKey(l: { protocol: Protocol; port: number }): string {
  return `${l.protocol}/${l.port}`;
}
