/**
 * Every Prometheus metric of passlb, defined once: name, help, type, label names and
 * buckets, registered in the Registry it is given (metrics.ts owns one per process).
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

/** Histogram buckets in seconds: probes and nft transactions (ms to a few s). */
const FAST_SECONDS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
/** Programming latency: the Kubernetes SLI's range (sub-second to a minute). */
const PROGRAMMING_SECONDS = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60];
const RATIO = [0.001, 0.01, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1];

/** `beforeScrape` runs when a scrape reads the traffic counters (pulls data-plane totals). */
export function defineMetrics(registry: Registry, beforeScrape: () => void) {
  const r = [registry];
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
      help: "Packets the nftables data plane marked for a node (kernel counters, all Services), by node.",
      labelNames: ["node"] as const,
      registers: r,
    }),
    nodeBytes: new Counter({
      name: "passlb_node_forwarded_bytes_total",
      help: "Bytes the nftables data plane marked for a node (kernel counters, all Services), by node.",
      labelNames: ["node"] as const,
      registers: r,
    }),
    servicePackets: new Counter({
      name: "passlb_service_forwarded_packets_total",
      help: "Packets the nftables data plane forwarded for a Service (kernel counters, all its listeners), by service.",
      labelNames: ["service"] as const,
      registers: r,
    }),
    serviceBytes: new Counter({
      name: "passlb_service_forwarded_bytes_total",
      help: "Bytes the nftables data plane forwarded for a Service (kernel counters, all its listeners), by service.",
      labelNames: ["service"] as const,
      registers: r,
    }),
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
    announceVips: new Gauge({
      name: "passlb_announce_vips",
      help: "VIPs by announcement state on this host (held, backup, withdrawn), by engine.",
      labelNames: ["engine", "state"] as const,
      registers: r,
    }),
    announceEngineUp: new Gauge({
      name: "passlb_announce_engine_up",
      help: "1 while the announcement engine (keepalived or bird) runs, 0 while it is down or restarting.",
      labelNames: ["engine"] as const,
      registers: r,
    }),
    announceTransitions: new Counter({
      name: "passlb_announce_transitions_total",
      help: "State transitions the announcement engine reported (keepalived: VRRP instance states; bird: a VIP held or withdrawn), by state.",
      labelNames: ["engine", "state"] as const,
      registers: r,
    }),
    bgpSessionUp: new Gauge({
      name: "passlb_bgp_session_up",
      help: "1 when the BGP session to a peer is Established, else 0 (passlb lb --announce bgp).",
      labelNames: ["peer"] as const,
      registers: r,
    }),
    bfdSessionUp: new Gauge({
      name: "passlb_bfd_session_up",
      help: "1 when the BFD session to a BGP peer is Up, else 0 (only with BFD on).",
      labelNames: ["peer"] as const,
      registers: r,
    }),
    bgpSpeakerState: new Gauge({
      name: "passlb_bgp_speaker_state",
      help: "1 for the BGP speaker's session health (healthy, degraded, down), 0 for the others (engine bird).",
      labelNames: ["state"] as const,
      registers: r,
    }),
  };
}

export type DefinedMetrics = ReturnType<typeof defineMetrics>;
