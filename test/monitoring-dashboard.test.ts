// The Grafana dashboard (deploy/components/monitoring/passlb-dashboard.json, docs/alerts.md
// "The Grafana dashboard") checked against @grafana/schema: the file is what
// scripts/grafana-dashboard.ts builds (that value is typed as the schema's `Dashboard`, so
// `npm run check` checks its shape); its schemaVersion is the schema's; every panel is a
// panel plugin the schema defines, with a unique id, on the 24-column grid without overlap,
// and Prometheus targets (refId, expr, the data source variable); every variable a query
// uses is defined; every metric it reads is one passlb exports or one sibling work defines.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { defaultDashboard, type Panel, type RowPanel } from "@grafana/schema";
import { dashboardPanels, passlbDashboard } from "../scripts/grafana-dashboard.ts";
import { exportedMetricNames, metricNames, PENDING_METRICS } from "./support/monitoring.ts";

const FILE = join(import.meta.dirname, "..", "deploy", "components", "monitoring", "passlb-dashboard.json");
const shipped = JSON.parse(readFileSync(FILE, "utf8"));

/** the panel plugins @grafana/schema ships a panel configuration for (raw/composable/<id>) */
function schemaPanelTypes(): Set<string> {
  const entry = fileURLToPath(import.meta.resolve("@grafana/schema"));
  const dir = join(dirname(entry), "..", "types", "raw", "composable");
  const ids = readdirSync(dir).map((d) => (d === "statetimeline" ? "state-timeline" : d));
  return new Set(ids);
}

test("the shipped JSON is what scripts/grafana-dashboard.ts builds", () => {
  assert.deepEqual(
    shipped,
    JSON.parse(JSON.stringify(passlbDashboard())),
    "passlb-dashboard.json is stale: run `node --import tsx scripts/grafana-dashboard.ts`",
  );
});

test("@grafana/schema: schemaVersion, panel plugins, ids, grid and targets", () => {
  assert.equal(shipped.schemaVersion, defaultDashboard.schemaVersion);
  assert.equal(shipped.uid, "passlb");
  const types = schemaPanelTypes();
  assert.ok(types.has("timeseries") && types.has("stat"), "the schema's panel list was read");
  const all = shipped.panels as (Panel | RowPanel)[];
  const ids = all.map((p) => p.id);
  assert.equal(new Set(ids).size, ids.length, "panel ids are unique");
  const cells = new Set<string>();
  for (const p of all) {
    const g = p.gridPos!;
    assert.ok(g.x >= 0 && g.w > 0 && g.x + g.w <= 24 && g.h > 0, `${p.title}: gridPos ${JSON.stringify(g)}`);
    for (let x = g.x; x < g.x + g.w; x++)
      for (let y = g.y; y < g.y + g.h; y++) {
        assert.ok(!cells.has(`${x},${y}`), `${p.title}: overlaps another panel at ${x},${y}`);
        cells.add(`${x},${y}`);
      }
  }
  const panels = dashboardPanels(shipped);
  assert.ok(panels.length >= 20, `only ${panels.length} panels`);
  for (const p of panels) {
    assert.ok(types.has(p.type), `${p.title}: panel type ${p.type} is not one of @grafana/schema's`);
    assert.ok(p.title && p.description, `${p.title}: title and description`);
    // biome-ignore lint/suspicious/noTemplateCurlyInString: Grafana's variable syntax
    assert.deepEqual(p.datasource, { type: "prometheus", uid: "${datasource}" });
    assert.ok(p.targets?.length, `${p.title}: no query`);
    const refIds = p.targets.map((t) => t.refId);
    assert.equal(new Set(refIds).size, refIds.length, `${p.title}: refIds unique`);
    for (const t of p.targets) assert.equal(typeof t.expr, "string", `${p.title}: target without expr`);
  }
});

test("queries use only defined variables and metrics passlb exports (or sibling work defines)", async () => {
  const vars = new Set<string>(
    (shipped.templating.list as { name: string }[]).map((v) => v.name).concat(["__rate_interval"]),
  );
  const exported = await exportedMetricNames();
  const read = new Set<string>();
  for (const p of dashboardPanels(shipped))
    for (const t of p.targets ?? []) {
      const expr = String(t.expr);
      for (const m of expr.matchAll(/\$(\w+)/g))
        assert.ok(vars.has(m[1]!), `${p.title}: $${m[1]} is not defined`);
      for (const m of metricNames(expr)) {
        assert.ok(exported.has(m) || PENDING_METRICS.has(m), `${p.title}: ${m} is no passlb metric`);
        read.add(m.replace(/_(bucket|sum|count)$/, ""));
      }
    }
  // the panels: per VIP, per LB host, controller
  for (const m of [
    "passlb_node_forwarded_packets_total",
    "passlb_node_forwarded_bytes_total",
    "passlb_connections_total",
    "passlb_service_backends",
    "passlb_node_weight",
    "passlb_announce_vip_held",
    "passlb_network_programming_duration_seconds",
    "passlb_drift_repairs_total",
    "passlb_flow_table_entries",
    "passlb_conntrack_entries",
    "passlb_ip_pool_addresses_used",
    "passlb_kube_api_errors_total",
  ])
    assert.ok(read.has(m), `no panel reads ${m}`);
});
