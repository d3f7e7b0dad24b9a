/**
 * The catalogue of planner issue codes: stable snake_case names, each with its severity
 * and a line of meaning. `PlanIssue.code` is typed by it, so a new code cannot be used
 * before it is listed here; a test keeps docs/plan.md listing every one.
 */
import type { Severity } from "./load-balancer-plan.ts";

export const PLAN_ISSUE_CODES = {
  // addresses
  pool_exhausted: ["error", "every address of the pools the Service may use is taken"],
  no_pool_for_service: [
    "error",
    "no pool (with autoAssign, unless one is named) admits the Service for a family it needs",
  ],
  unknown_pool: ["error", "a pool annotation (passlb's or another tool's) names a pool that does not exist"],
  pool_not_allowed: ["error", "the named or requested pool's namespaces/serviceSelector exclude the Service"],
  requested_address_invalid: [
    "error",
    "a requested address does not parse, or two of one family are requested",
  ],
  requested_address_not_in_pool: ["error", "a requested address is in no pool"],
  requested_address_wrong_family: ["error", "a requested address is of a family the Service does not use"],
  conflicting_ip_request: [
    "error",
    "two request sources (annotations of passlb or another tool, spec.loadBalancerIP) name different addresses of one family",
  ],
  conflicting_pool_request: ["error", "pool annotations of different tools name different pools"],
  conflicting_sharing_key: ["error", "sharing-key annotations of different tools disagree"],
  sharing_not_allowed: [
    "error",
    "the sharing key's tool forbids this pair (MetalLB: backends differ; Cilium: namespace or backends)",
  ],
  deprecated_annotation: [
    "info",
    "a deprecated foreign key (metallb.universe.tf/*) is read as its current name",
  ],
  unsupported_annotation: ["warning", "a foreign annotation passlb does not support is ignored"],
  foreign_behaviour_differs: [
    "warning",
    "passlb deliberately behaves differently from the tool whose key is set",
  ],
  address_in_use: ["error", "the requested address is held by a Service it may not share with"],
  port_clash_on_shared_ip: ["error", "sharing the address would put two Services on one protocol/port"],
  address_conflict: ["warning", "the address in status is held by another Service; a new one is assigned"],
  status_address_not_in_pool: [
    "warning",
    "the address in status is in no pool the Service may use; a new one is assigned",
  ],
  dual_stack_unavailable: ["error", "RequireDualStack, but one family got no address"],
  dual_stack_partial: ["info", "PreferDualStack served on one family only"],
  node_ports_required: [
    "warning",
    "ipMode Proxy reaches nodes on NodePorts, and a port has none (allocateLoadBalancerNodePorts: false)",
  ],
  // backends
  no_eligible_nodes: ["error", "no eligible node with an address in the Service's families"],
  no_ready_endpoints: [
    "warning",
    "no ready endpoint: Local fails every health check, Cluster rejects connections",
  ],
  terminating_fallback: ["warning", "only terminating endpoints are left: their nodes carry the traffic"],
  cluster_subset: [
    "info",
    "more eligible nodes than clusterBackendLimit: a stable per-Service subset is used",
  ],
  local_backend_limit: ["warning", "more nodes host endpoints than localBackendLimit"],
  weighted_ignored_cluster_policy: [
    "warning",
    "pods-per-node weighting asked for under externalTrafficPolicy Cluster",
  ],
  weighted_unknown_value: [
    "warning",
    "networking.gke.io/weighted-load-balancing has a value other than pods-per-node",
  ],
  endpointslice_port_unnamed: [
    "warning",
    "an EndpointSlice port has no name, so kube-proxy (and passlb) skip it",
  ],
  endpointslice_port_missing_number: ["warning", "an EndpointSlice port has no number, so it is skipped"],
  // health, traffic
  health_check_node_port_allocated: ["info", "Local without healthCheckNodePort: passlb chose one"],
  azure_probe_annotation_invalid: ["error", "an Azure probe annotation AKS would reject"],
  azure_probes_ignored_local: [
    "info",
    "Azure probe annotations under Local: the healthCheckNodePort check gates every listener",
  ],
  listener_skipped_no_lb_rule: ["info", "port_<p>_no_lb_rule: the listener is left out"],
  zonal_affinity_without_client_zones: [
    "warning",
    "zonal affinity asked for, but PasslbConfig maps no client CIDRs to zones",
  ],
  source_ranges_family_mismatch: [
    "warning",
    "no source range of the Service's families: every client is dropped",
  ],
} as const satisfies Record<string, readonly [Severity, string]>;

export type PlanIssueCode = keyof typeof PLAN_ISSUE_CODES;
