/**
 * passlb's Grafana dashboard (docs/alerts.md "The Grafana dashboard"), typed with
 * @grafana/schema's dashboard model (the classic JSON model Grafana imports and its
 * dashboard sidecar loads): `passlbDashboard()` is the data, `dashboardPanels()` its panels
 * with their queries flat. Run as a script it writes
 * deploy/components/monitoring/passlb-dashboard.json (test/monitoring-dashboard.test.ts
 * fails when that file differs):
 *
 *   node --import tsx scripts/grafana-dashboard.ts
 *
 * Rows: the chosen Services and VIPs (traffic per node, health, weight and Maglev share,
 * who announces each VIP), the LB hosts (programming latency, drift repairs, conntrack and
 * flow-table use, BGP/BFD), the controller (leader, pool use, API errors), and the firing
 * passlb alerts. Every query names only metrics of docs/metrics.md and the variables below.
 * Not here: the alerts themselves (passlb-rules.yaml).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import {
  type Dashboard,
  type DataSourceRef,
  defaultDashboard,
  type Panel,
  type RowPanel,
  type VariableModel,
  VariableRefresh,
  VariableSort,
} from "@grafana/schema";

// biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's own variable syntax, not a JS template
const DS: DataSourceRef = { type: "prometheus", uid: "${datasource}" };
const WIDTH = 24;

interface Query {
  readonly expr: string;
  /** the series' name in the legend */
  readonly legend: string;
}

interface PanelSpec {
  readonly title: string;
  readonly type: "timeseries" | "state-timeline" | "stat";
  readonly description: string;
  readonly unit?: string;
  readonly queries: readonly Query[];
  /** grid columns of 24 (default 12) */
  readonly w?: number;
  readonly max?: number;
}

/** the panels of each row, in order */
const ROWS: readonly { title: string; panels: readonly PanelSpec[] }[] = [
  {
    title: "Services and VIPs ($service)",
    panels: [
      {
        title: "Packets per node (nftables)",
        type: "timeseries",
        unit: "pps",
        description:
          "Packets the LB hosts' nftables data plane sends to each node (all Services), per LB host.",
        queries: [
          {
            expr: 'sum by (instance, node) (rate(passlb_node_forwarded_packets_total{instance=~"$lbhost"}[$__rate_interval]))',
            legend: "{{instance}} → {{node}}",
          },
        ],
      },
      {
        title: "Bytes per node (nftables)",
        type: "timeseries",
        unit: "Bps",
        description: "Bytes (client → node) the nftables data plane sends to each node.",
        queries: [
          {
            expr: 'sum by (node) (rate(passlb_node_forwarded_bytes_total{instance=~"$lbhost"}[$__rate_interval]))',
            legend: "{{node}}",
          },
        ],
      },
      {
        title: "Packets and bytes per Service",
        type: "timeseries",
        unit: "pps",
        description: "Packets per Service through the nftables data plane (after the source-range check).",
        queries: [
          {
            expr: 'sum by (service) (rate(passlb_service_forwarded_packets_total{service=~"$service"}[$__rate_interval]))',
            legend: "{{service}} packets",
          },
          {
            expr: 'sum by (service) (rate(passlb_service_forwarded_bytes_total{service=~"$service"}[$__rate_interval]))',
            legend: "{{service}} bytes",
          },
        ],
      },
      {
        title: "Connections per node (userspace data plane)",
        type: "timeseries",
        unit: "cps",
        description:
          "New connections (TCP) and flows (UDP) per Service and node, counted by the userspace proxy (passlb up, passlb lb --dataplane userspace); the nftables data plane counts packets instead.",
        queries: [
          {
            expr: 'sum by (service, node) (rate(passlb_connections_total{service=~"$service"}[$__rate_interval]))',
            legend: "{{service}} → {{node}}",
          },
        ],
      },
      {
        title: "Backend nodes by health",
        type: "timeseries",
        description:
          "Backend nodes per Service by state (healthy, unhealthy, unknown = not probed yet, excluded by the plan); the lowest of the LB hosts.",
        queries: [
          {
            expr: 'min by (service, state) (passlb_service_backends{service=~"$service"})',
            legend: "{{service}} {{state}}",
          },
        ],
      },
      {
        title: "Node weight",
        type: "timeseries",
        description:
          "Weight each node's new connections are chosen with (0: drained, excluded or unhealthy); the weight-reading health check's answer where there is one.",
        queries: [
          {
            expr: 'max by (service, node) (passlb_node_weight{service=~"$service"})',
            legend: "{{service}} {{node}}",
          },
        ],
      },
      {
        title: "Maglev share",
        type: "timeseries",
        unit: "percentunit",
        max: 1,
        description:
          "Each node's share of the Service's Maglev table: its weight over the sum of weights (Maglev fills slots in proportion to weight, docs/maglev.md).",
        queries: [
          {
            expr: 'max by (service, node) (passlb_node_weight{service=~"$service"}) / ignoring (node) group_left () sum by (service) (max by (service, node) (passlb_node_weight{service=~"$service"}))',
            legend: "{{service}} {{node}}",
          },
        ],
      },
      {
        title: "Maglev rebuilds",
        type: "timeseries",
        description: "Maglev tables rebuilt because a Service's backends or weights changed.",
        queries: [
          {
            expr: 'sum by (service) (increase(passlb_maglev_rebuilds_total{service=~"$service"}[$__rate_interval]))',
            legend: "{{service}}",
          },
        ],
      },
      {
        title: "VIP holder",
        type: "state-timeline",
        description:
          "Which LB host announces each VIP (1 = held): one host per VIP on an L2 segment, every ready host on a BGP tier.",
        w: 16,
        queries: [
          {
            expr: 'max by (vip, instance) (passlb_announce_vip_held{vip=~"$vip", instance=~"$lbhost"})',
            legend: "{{vip}} on {{instance}}",
          },
        ],
      },
      {
        title: "LB hosts announcing each VIP",
        type: "timeseries",
        w: 8,
        description: "0 is an outage; more than 1 on an L2 segment (engine keepalived) is a split brain.",
        queries: [
          {
            expr: 'sum by (vip, engine) (passlb_announce_vip_held{vip=~"$vip"})',
            legend: "{{vip}} ({{engine}})",
          },
        ],
      },
      {
        title: "Announcement checked from the wire",
        type: "state-timeline",
        w: 24,
        description:
          "1 while the segment (ARP/NDP) or the BGP speaker's export table disagrees with passlb's decision for a VIP, by problem.",
        queries: [
          {
            expr: 'max by (vip, problem) (passlb_announce_wire_problems{vip=~"$vip"})',
            legend: "{{vip}} {{problem}}",
          },
        ],
      },
    ],
  },
  {
    title: "LB hosts ($lbhost)",
    panels: [
      {
        title: "Network programming latency (p99)",
        type: "timeseries",
        unit: "s",
        description:
          "From a change passlb saw (manifest or API object, health verdict) to the data plane taking it, 99th percentile per LB host.",
        queries: [
          {
            expr: 'histogram_quantile(0.99, sum by (le, instance, dataplane) (rate(passlb_network_programming_duration_seconds_bucket{instance=~"$lbhost"}[$__rate_interval])))',
            legend: "{{instance}} {{dataplane}}",
          },
        ],
      },
      {
        title: "nftables transactions",
        type: "timeseries",
        unit: "ops",
        description: "nft transactions sent to the kernel per LB host, by kind and result.",
        queries: [
          {
            expr: 'sum by (instance, kind, result) (rate(passlb_nft_transactions_total{instance=~"$lbhost"}[$__rate_interval]))',
            legend: "{{instance}} {{kind}} {{result}}",
          },
        ],
      },
      {
        title: "Drift repairs (last hour)",
        type: "timeseries",
        description: "Kernel state someone else changed and passlb repaired; the alert fires from 4 an hour.",
        queries: [
          {
            expr: 'sum by (instance, what) (increase(passlb_drift_repairs_total{instance=~"$lbhost"}[1h]))',
            legend: "{{instance}} {{what}}",
          },
        ],
      },
      {
        title: "Conntrack use",
        type: "timeseries",
        unit: "percentunit",
        max: 1,
        description:
          "Connection-tracking entries over nf_conntrack_max; the alert fires above 90 % for 5 minutes.",
        queries: [
          {
            expr: 'max by (instance) (passlb_conntrack_entries{instance=~"$lbhost"}) / max by (instance) (passlb_conntrack_max{instance=~"$lbhost"})',
            legend: "{{instance}}",
          },
        ],
      },
      {
        title: "Flow-table use",
        type: "timeseries",
        unit: "percentunit",
        max: 1,
        description: "Flow-table entries over its capacity, per data plane and family.",
        queries: [
          {
            expr: 'max by (instance, dataplane, family) (passlb_flow_table_entries{instance=~"$lbhost"}) / max by (instance, dataplane, family) (passlb_flow_table_capacity{instance=~"$lbhost"})',
            legend: "{{instance}} {{dataplane}} {{family}}",
          },
        ],
      },
      {
        title: "Announcement engine and sessions",
        type: "state-timeline",
        description:
          "1 while up: the announcement engine (keepalived, BIRD), each BGP session and its BFD session, per LB host.",
        queries: [
          {
            expr: 'max by (instance, engine) (passlb_announce_engine_up{instance=~"$lbhost"})',
            legend: "{{instance}} {{engine}}",
          },
          {
            expr: 'max by (instance, peer) (passlb_bgp_session_up{instance=~"$lbhost"})',
            legend: "{{instance}} BGP {{peer}}",
          },
          {
            expr: 'max by (instance, peer) (passlb_bfd_session_up{instance=~"$lbhost"})',
            legend: "{{instance}} BFD {{peer}}",
          },
        ],
      },
      {
        title: "VRRP instances in FAULT",
        type: "timeseries",
        description: "keepalived's vrrp_instances per LB host by state (MASTER, BACKUP, FAULT, STOP).",
        queries: [
          {
            expr: 'sum by (instance, state) (passlb_vrrp_instance_state{instance=~"$lbhost"})',
            legend: "{{instance}} {{state}}",
          },
        ],
      },
      {
        title: "Health probes failing",
        type: "timeseries",
        unit: "percentunit",
        max: 1,
        description: "Share of health probes to each node that failed, over all LB hosts.",
        queries: [
          {
            expr: 'sum by (node) (rate(passlb_health_probes_total{result="failure"}[$__rate_interval])) / sum by (node) (rate(passlb_health_probes_total[$__rate_interval]))',
            legend: "{{node}}",
          },
        ],
      },
    ],
  },
  {
    title: "Controller",
    panels: [
      {
        title: "Leader",
        type: "stat",
        w: 6,
        description: "Controller replicas holding the leader Lease: must be 1.",
        queries: [{ expr: "sum(passlb_controller_leader)", legend: "leaders" }],
      },
      {
        title: "IP pool use",
        type: "timeseries",
        unit: "percentunit",
        max: 1,
        w: 9,
        description: "Addresses given to Services over the pool's size, per pool and family.",
        queries: [
          {
            expr: "max by (pool, family) (passlb_ip_pool_addresses_used) / max by (pool, family) (passlb_ip_pool_addresses > 0)",
            legend: "{{pool}} {{family}}",
          },
        ],
      },
      {
        title: "Kubernetes API errors",
        type: "timeseries",
        unit: "reqps",
        w: 9,
        description:
          "Requests the API server refused or did not answer, by process, verb, resource and code; below them the channels failing now.",
        queries: [
          {
            expr: "sum by (job, verb, resource, code) (rate(passlb_kube_api_errors_total[$__rate_interval]))",
            legend: "{{job}} {{verb}} {{resource}} {{code}}",
          },
          {
            expr: "max by (job, channel) (passlb_kube_api_failing) > 0",
            legend: "{{job}} {{channel}} failing",
          },
        ],
      },
      {
        title: "passlb alerts firing",
        type: "state-timeline",
        w: 24,
        description: "passlb's alerts (docs/alerts.md) firing now, by alert and object.",
        queries: [
          {
            expr: 'ALERTS{alertname=~"Passlb.*", alertstate="firing"}',
            legend: "{{alertname}} {{service}}{{vip}}{{node}}{{peer}}{{pool}}{{channel}}",
          },
        ],
      },
    ],
  },
];

function variable(name: string, label: string, query: string): VariableModel {
  return {
    name,
    label,
    type: "query",
    datasource: DS,
    query: { query, refId: `${name}-var` },
    refresh: VariableRefresh.onTimeRangeChanged,
    sort: VariableSort.alphabeticalAsc,
    multi: true,
    includeAll: true,
    allValue: ".*",
    current: { text: "All", value: "$__all" },
  };
}

function panel(spec: PanelSpec, id: number, x: number, y: number): Panel {
  return {
    id,
    type: spec.type,
    title: spec.title,
    description: spec.description,
    datasource: DS,
    gridPos: { x, y, w: spec.w ?? 12, h: 8 },
    fieldConfig: {
      defaults: {
        ...(spec.unit && { unit: spec.unit }),
        ...(spec.max !== undefined && { min: 0, max: spec.max }),
      },
      overrides: [],
    },
    options: { legend: { displayMode: "list", placement: "bottom", showLegend: true } },
    targets: spec.queries.map((q, i) => ({
      datasource: DS,
      expr: q.expr,
      legendFormat: q.legend,
      refId: String.fromCharCode(65 + i),
    })),
  };
}

export function passlbDashboard(): Dashboard {
  const panels: (Panel | RowPanel)[] = [];
  let id = 1;
  let y = 0;
  for (const row of ROWS) {
    panels.push({
      type: "row",
      id: id++,
      title: row.title,
      collapsed: false,
      panels: [],
      gridPos: { x: 0, y, w: WIDTH, h: 1 },
    });
    y += 1;
    let x = 0;
    for (const spec of row.panels) {
      const w = spec.w ?? 12;
      if (x + w > WIDTH) {
        x = 0;
        y += 8;
      }
      panels.push(panel(spec, id++, x, y));
      x += w;
    }
    y += 8;
  }
  return {
    ...defaultDashboard,
    schemaVersion: defaultDashboard.schemaVersion ?? 42,
    uid: "passlb",
    title: "passlb",
    description: "passlb load balancing: Services and VIPs, LB hosts, controller (docs/alerts.md).",
    tags: ["passlb", "load-balancer"],
    editable: true,
    refresh: "30s",
    time: { from: "now-1h", to: "now" },
    templating: {
      list: [
        {
          name: "datasource",
          label: "Prometheus",
          type: "datasource",
          query: "prometheus",
          current: { text: "default", value: "default" },
        },
        variable("service", "Service", "label_values(passlb_service_backends, service)"),
        variable("vip", "VIP", "label_values(passlb_announce_vip_held, vip)"),
        variable("lbhost", "LB host", "label_values(passlb_vips_programmed, instance)"),
      ],
    },
    annotations: { list: [] },
    panels,
  };
}

/** Every panel with its queries (rows left out). */
export function dashboardPanels(d: Dashboard): Panel[] {
  return (d.panels ?? []).filter((p): p is Panel => p.type !== "row");
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const out = join(import.meta.dirname, "..", "deploy", "components", "monitoring", "passlb-dashboard.json");
  writeFileSync(out, `${JSON.stringify(passlbDashboard(), null, 2)}\n`);
}
