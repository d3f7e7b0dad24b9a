/**
 * Every Prometheus metric of passlb, defined once: name, help, type, label names and
 * buckets, registered in the Registry it is given (metrics.ts owns one per process). One
 * function per component that feeds them (planner, prober, programming, traffic, XDP, flow
 * table, conntrack, Kubernetes, and announcement in announce-metrics.ts); a metric two data
 * planes share is defined once and told apart by its `dataplane` label (the flow-table pair,
 * the forwarded counters).
 *
 * Naming follows the Prometheus conventions (prometheus.io/docs/practices/naming): the
 * `passlb_` prefix, base units in the name (`_seconds`, `_bytes`, `_ratio`), `_total` on
 * counters only. The programming-latency histogram follows the Kubernetes network
 * programming SLI (`network_programming_duration_seconds`, kubernetes/community
 * sig-scalability/slos/network_programming_latency.md): from the Kubernetes change a
 * process saw to the data plane taking it.
 *
 * docs/metrics.md lists each metric; metrics.test.ts keeps the two in step.
 * Not here: what is observed and when (the `Metrics` facade, metrics.ts).
 */
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { announceMetrics } from "./announce-metrics.ts";

/** Histogram buckets in seconds: probes and nft transactions (ms to a few s). */
const FAST_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Programming latency: the Kubernetes SLI's range (sub-second to a minute). */
const PROGRAMMING_SECONDS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60];
const RATIO = [0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1];

type Registers = Registry[];

/** `beforeScrape` runs when a scrape reads the traffic counters (pulls data-plane totals). */
export function defineMetrics(registry: Registry, beforeScrape: () => void) {
  const r = [registry];
  return {
    ...planMetrics(r),
    ...healthMetrics(r),
    ...programmingMetrics(r),
    ...trafficMetrics(r, beforeScrape),
    ...xdpMetrics(r),
    ...flowTableMetrics(r),
    ...conntrackMetrics(r),
    ...kubeMetrics(r),
    ...announceMetrics(r),
  };
}

/** What the planner decided and this process programs: Services, VIPs, backends by state, weights, fail-open, issues. */
function planMetrics(r: Registers) {
  return {
    servicesProgrammed: new Gauge({
      name: "passlb_services_programmed",
      help: "LoadBalancer Services this process currently programs.",
      registers: r,
    }),
    vipsProgrammed: new Gauge({
      name: "passlb_vips_programmed",
      help: "Virtual IP addresses this process currently programs, by address family.",
      labelNames: ["family"] as const,
      registers: r,
    }),
    backends: new Gauge({
      name: "passlb_service_backends",
      help: "Backend nodes per Service by state (healthy, unhealthy, unknown, excluded).",
      labelNames: ["service", "state"] as const,
      registers: r,
    }),
    nodeWeight: new Gauge({
      name: "passlb_node_weight",
      help: "Weight a node's new connections are chosen with, per Service (0 for a drained or excluded node).",
      labelNames: ["service", "node"] as const,
      registers: r,
    }),
    failOpen: new Gauge({
      name: "passlb_service_fail_open",
      help: "1 when no backend of a Service listener is healthy and all of them serve (fail-open).",
      labelNames: ["service"] as const,
      registers: r,
    }),
    issues: new Gauge({
      name: "passlb_plan_issues",
      help: "Current planner issues by code and severity.",
      labelNames: ["code", "severity"] as const,
      registers: r,
    }),
  };
}

/** The prober's results and transitions, and the LB host's tunnel check (`--encap-check`). */
function healthMetrics(r: Registers) {
  return {
    probes: new Counter({
      name: "passlb_health_probes_total",
      help: "Health probes finished, by node and result (success, failure).",
      labelNames: ["node", "result"] as const,
      registers: r,
    }),
    probeSeconds: new Histogram({
      name: "passlb_health_probe_duration_seconds",
      help: "Time a health probe took, by result.",
      labelNames: ["result"] as const,
      buckets: FAST_SECONDS,
      registers: r,
    }),
    transitions: new Counter({
      name: "passlb_health_transitions_total",
      help: "Health state changes of probe targets, by node and new state.",
      labelNames: ["node", "to"] as const,
      registers: r,
    }),
    tunnelCheck: new Gauge({
      name: "passlb_tunnel_check_up",
      help: "LB host --encap-check: 1 while the tunnel check of a routed node address passes, 0 while it fails (the node takes no new connections).",
      labelNames: ["node", "family"] as const,
      registers: r,
    }),
  };
}

/** Putting plans into the data plane: Maglev rebuilds, nft transactions, programming latency, drift repairs. */
function programmingMetrics(r: Registers) {
  return {
    maglevRebuilds: new Counter({
      name: "passlb_maglev_rebuilds_total",
      help: "Maglev tables rebuilt because their backends or weights changed, per Service.",
      labelNames: ["service"] as const,
      registers: r,
    }),
    slotsMoved: new Histogram({
      name: "passlb_maglev_slots_moved_ratio",
      help: "Share of Maglev slots that changed backend in a rebuild (tables of equal size).",
      buckets: RATIO,
      registers: r,
    }),
    nftTransactions: new Counter({
      name: "passlb_nft_transactions_total",
      help: "nftables transactions sent to the kernel, by kind (full, incremental) and result (ok, failed).",
      labelNames: ["kind", "result"] as const,
      registers: r,
    }),
    nftSeconds: new Histogram({
      name: "passlb_nft_transaction_duration_seconds",
      help: "Time an nftables transaction took, by kind.",
      labelNames: ["kind"] as const,
      buckets: FAST_SECONDS,
      registers: r,
    }),
    programming: new Histogram({
      name: "passlb_network_programming_duration_seconds",
      help: "Time from a Kubernetes change (or health change) seen by passlb to the data plane taking it, by data plane.",
      labelNames: ["dataplane"] as const,
      buckets: PROGRAMMING_SECONDS,
      registers: r,
    }),
    driftRepairs: new Counter({
      name: "passlb_drift_repairs_total",
      help: "Kernel state found changed behind passlb's back and repaired, by data plane and what drifted (table, routes).",
      labelNames: ["dataplane", "what"] as const,
      registers: r,
    }),
  };
}

/** Traffic per Service and node: the proxies' tallies (pulled at scrape time) and the kernel data planes' counters. */
function trafficMetrics(r: Registers, beforeScrape: () => void) {
  return {
    connections: new Counter({
      name: "passlb_connections_total",
      help: "Connections (TCP) and flows (UDP) sent to a backend node, per Service.",
      labelNames: ["service", "node"] as const,
      registers: r,
      collect: beforeScrape,
    }),
    bytes: new Counter({
      name: "passlb_bytes_total",
      help: "Bytes forwarded per Service and backend node, by direction (to_backend, to_client).",
      labelNames: ["service", "node", "direction"] as const,
      registers: r,
      collect: beforeScrape,
    }),
    nodePackets: new Counter({
      name: "passlb_node_forwarded_packets_total",
      help: "Packets the kernel data plane sent to a node (nftables counters, or the XDP program's per-CPU counters; all Services), by node and dataplane.",
      labelNames: ["node", "dataplane"] as const,
      registers: r,
    }),
    nodeBytes: new Counter({
      name: "passlb_node_forwarded_bytes_total",
      help: "Bytes the kernel data plane sent to a node (nftables counters, or the XDP program's per-CPU counters; all Services), by node and dataplane.",
      labelNames: ["node", "dataplane"] as const,
      registers: r,
    }),
    servicePackets: new Counter({
      name: "passlb_service_forwarded_packets_total",
      help: "Packets the kernel data plane forwarded for a Service (nftables or XDP counters, all its listeners), by service and dataplane.",
      labelNames: ["service", "dataplane"] as const,
      registers: r,
    }),
    serviceBytes: new Counter({
      name: "passlb_service_forwarded_bytes_total",
      help: "Bytes the kernel data plane forwarded for a Service (nftables or XDP counters, all its listeners), by service and dataplane.",
      labelNames: ["service", "dataplane"] as const,
      registers: r,
    }),
  };
}

/** The XDP program: its verdict counters and whether it is attached. */
function xdpMetrics(r: Registers) {
  return {
    xdpPackets: new Counter({
      name: "passlb_xdp_packets_total",
      help: "Packets the XDP program judged, by reason: pass_* (handed to the stack), drop_*, fwd_tx/fwd_redirect, flow_new (an entry added)/flow_hit/flow_replaced (an entry overwritten), syn_rate.",
      labelNames: ["reason"] as const,
      registers: r,
    }),
    xdpAttached: new Gauge({
      name: "passlb_xdp_attached",
      help: "1 while passlb's XDP program is attached (native mode) to the interface, 0 when the last check found it detached.",
      labelNames: ["interface"] as const,
      registers: r,
    }),
  };
}

/** The LB host's flow table, one pair for every data plane that pins flows (nftables and XDP label it). */
function flowTableMetrics(r: Registers) {
  return {
    flowTableEntries: new Gauge({
      name: "passlb_flow_table_entries",
      help: "Flows the LB host's flow table pins now (nftables: the TCP flow map's elements; xdp: the LRU map's), by data plane and family.",
      labelNames: ["dataplane", "family"] as const,
      registers: r,
    }),
    flowTableEvictions: new Counter({
      name: "passlb_flow_table_evictions_total",
      help: "Flows the LB host's flow table evicted to make room for new ones, by data plane (xdp: the LRU map's, derived from the entries it added and its size).",
      labelNames: ["dataplane"] as const,
      registers: r,
    }),
    flowTableCapacity: new Gauge({
      name: "passlb_flow_table_capacity",
      help: "Flows the LB host's flow table can hold, by data plane and family (the map's configured size; xdp: one table shared by both families).",
      labelNames: ["dataplane", "family"] as const,
      registers: r,
    }),
  };
}

/** The LB host's connection-tracking table (conntrack sizing, docs/dataplane-nftables.md). */
function conntrackMetrics(r: Registers) {
  return {
    conntrackEntries: new Gauge({
      name: "passlb_conntrack_entries",
      help: "Connection-tracking entries in this LB host's network namespace now (nf_conntrack_count).",
      registers: r,
    }),
    conntrackMax: new Gauge({
      name: "passlb_conntrack_max",
      help: "The kernel's connection-tracking table limit (nf_conntrack_max).",
      registers: r,
    }),
  };
}

/** The Kubernetes side: reconcile passes, watches, API failures, the controller's Lease and the IP pools. */
function kubeMetrics(r: Registers) {
  return {
    reconciles: new Counter({
      name: "passlb_reconciles_total",
      help: "Reconcile passes by controller and outcome (ok, retry, reprocess_all, failed).",
      labelNames: ["controller", "outcome"] as const,
      registers: r,
    }),
    watchRestarts: new Counter({
      name: "passlb_kube_watch_restarts_total",
      help: "Kubernetes API list+watch loops started over, by resource and reason (closed, expired, error, continue_expired).",
      labelNames: ["resource", "reason"] as const,
      registers: r,
    }),
    kubeApiErrors: new Counter({
      name: "passlb_kube_api_errors_total",
      help: "Kubernetes API requests the server refused or did not answer, by verb, resource and code (HTTP status, or unreachable).",
      labelNames: ["verb", "resource", "code"] as const,
      registers: r,
    }),
    kubeApiFailing: new Gauge({
      name: "passlb_kube_api_failing",
      help: "1 while a channel of Kubernetes API calls is failing (lease, service_writes, pool_status, events, endpointslices, reads; docs/kubernetes.md).",
      labelNames: ["channel"] as const,
      registers: r,
    }),
    controllerLeader: new Gauge({
      name: "passlb_controller_leader",
      help: "1 while this controller process holds the leader Lease (namespace/name), else 0.",
      labelNames: ["lease"] as const,
      registers: r,
    }),
    poolSize: new Gauge({
      name: "passlb_ip_pool_addresses",
      help: "Addresses an IP pool can hand out, by pool and family.",
      labelNames: ["pool", "family"] as const,
      registers: r,
    }),
    poolUsed: new Gauge({
      name: "passlb_ip_pool_addresses_used",
      help: "Addresses of an IP pool given to Services, by pool and family.",
      labelNames: ["pool", "family"] as const,
      registers: r,
    }),
  };
}

export type DefinedMetrics = ReturnType<typeof defineMetrics>;
