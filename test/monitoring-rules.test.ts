// deploy/components/monitoring checked (docs/alerts.md): the PrometheusRule carries exactly
// the groups of the plain rules file (the one source); every alert has a severity, a
// summary, a description naming its object and a runbook section in docs/alerts.md that
// states its threshold and how soon it fires; every metric an alert reads is one passlb
// exports (docs/metrics.md) or one named here as defined on a sibling branch; `promtool
// check rules` and `promtool test rules` (the unit tests on synthetic series beside the
// rules) pass; and `kubectl kustomize` builds the component with the rules and the dashboard
// in their ConfigMaps. promtool (Debian's prometheus package) and kubectl are optional:
// their tests skip saying so.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { test } from "node:test";
import { parse, parseAllDocuments } from "yaml";
import { exportedMetricNames, metricNames, PENDING_METRICS } from "./support/monitoring.ts";

const ROOT = join(import.meta.dirname, "..");
const DIR = join(ROOT, "deploy", "components", "monitoring");
const ALERTS_DOC = readFileSync(join(ROOT, "docs", "alerts.md"), "utf8");

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  labels: Record<string, string>;
  annotations: Record<string, string>;
}
interface Group {
  name: string;
  rules: Rule[];
}

const plain = parse(readFileSync(join(DIR, "passlb-rules.yaml"), "utf8")) as { groups: Group[] };
const rules = plain.groups.flatMap((g) => g.rules);

/** GitHub's anchor of a markdown heading */
const anchor = (heading: string) =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\w\- ]/g, "")
    .replace(/ /g, "-");

/** docs/alerts.md's `### Name` sections: their anchors and texts */
function docSections(): Map<string, string> {
  const out = new Map<string, string>();
  const parts = ALERTS_DOC.split(/^### /m).slice(1);
  for (const p of parts) out.set(anchor(p.split("\n")[0]!), p);
  return out;
}

test("the PrometheusRule is the plain rules file's groups, as scripts/render-prometheus-rule.mjs writes it", () => {
  const text = readFileSync(join(DIR, "prometheus-rule.yaml"), "utf8");
  const rule = parse(text) as {
    apiVersion: string;
    kind: string;
    metadata: { name: string; namespace: string; labels: Record<string, string> };
    spec: { groups: Group[] };
  };
  assert.equal(rule.apiVersion, "monitoring.coreos.com/v1");
  assert.equal(rule.kind, "PrometheusRule");
  assert.equal(rule.metadata.namespace, "passlb-system");
  assert.equal(rule.metadata.labels["app.kubernetes.io/part-of"], "passlb");
  assert.deepEqual(
    rule.spec.groups,
    plain.groups,
    "prometheus-rule.yaml is stale: run `node scripts/render-prometheus-rule.mjs`",
  );
});

test("every alert: a severity, a summary and description naming its object, a runbook section with threshold and fires-within", () => {
  assert.ok(rules.length >= 15, `only ${rules.length} alerts`);
  const sections = docSections();
  const names = new Set<string>();
  for (const r of rules) {
    assert.match(r.alert, /^Passlb[A-Z][A-Za-z]+$/, r.alert);
    assert.ok(!names.has(r.alert), `${r.alert} twice`);
    names.add(r.alert);
    assert.ok(["critical", "warning"].includes(r.labels.severity ?? ""), `${r.alert}: severity`);
    for (const a of ["summary", "description", "runbook_url"])
      assert.ok(r.annotations[a]?.trim(), `${r.alert}: no ${a}`);
    // the object: a label of the alert's own series, by name
    assert.match(
      `${r.annotations.summary} ${r.annotations.description}`,
      /\{\{ \$labels\.\w+ \}\}|\$value/,
      r.alert,
    );
    const url = r.annotations.runbook_url!;
    assert.equal(url, `docs/alerts.md#${r.alert.toLowerCase()}`, `${r.alert}: runbook_url`);
    const section = sections.get(r.alert.toLowerCase());
    assert.ok(section, `docs/alerts.md has no "### ${r.alert}" section`);
    for (const field of ["Severity", "Threshold", "Fires within", "Runbook"])
      assert.match(section, new RegExp(`\\*\\*${field}`), `docs/alerts.md ${r.alert}: no **${field}**`);
    assert.ok(section.includes(r.labels.severity!), `docs/alerts.md ${r.alert}: says another severity`);
    if (r.for) assert.ok(section.includes(r.for), `docs/alerts.md ${r.alert}: does not state for: ${r.for}`);
  }
  assert.deepEqual(
    [...sections.keys()].filter((a) => a.startsWith("passlb")).sort(),
    [...names].map((n) => n.toLowerCase()).sort(),
    "docs/alerts.md documents exactly the alerts",
  );
});

test("the alerts read only metrics passlb exports (or, named here, that sibling work defines)", async () => {
  const exported = await exportedMetricNames();
  for (const r of rules)
    for (const m of metricNames(r.expr))
      assert.ok(exported.has(m) || PENDING_METRICS.has(m), `${r.alert}: ${m} is no passlb metric`);
  const documented = readFileSync(join(ROOT, "docs", "metrics.md"), "utf8");
  for (const m of PENDING_METRICS)
    if (exported.has(m)) assert.ok(documented.includes(`\`${m}\``), `${m}: exported, not in docs/metrics.md`);
});

function promtool(): string | undefined {
  return spawnSync("promtool", ["--version"]).error
    ? "promtool is not installed (Debian package prometheus)"
    : undefined;
}

test("promtool check rules: both files", (t) => {
  const why = promtool();
  if (why) return t.skip(why);
  // the PrometheusRule's spec is a rules file too
  const tmp = mkdtempSync(join(tmpdir(), "plb-rules-"));
  t.after(() => rmSync(tmp, { recursive: true, force: true }));
  const spec = (parse(readFileSync(join(DIR, "prometheus-rule.yaml"), "utf8")) as { spec: unknown }).spec;
  writeFileSync(join(tmp, "spec.yaml"), JSON.stringify(spec));
  const r = spawnSync(
    "promtool",
    ["check", "rules", join(DIR, "passlb-rules.yaml"), join(tmp, "spec.yaml")],
    {
      encoding: "utf8",
    },
  );
  assert.equal(r.status, 0, r.stdout + r.stderr);
  assert.match(r.stdout, new RegExp(`SUCCESS: ${rules.length} rules found`));
});

test("promtool test rules: the unit tests on synthetic series, production durations", (t) => {
  const why = promtool();
  if (why) return t.skip(why);
  const files = readdirSync(DIR).filter((f) => f.endsWith(".test.yaml"));
  assert.ok(files.length > 0);
  const r = spawnSync("promtool", ["test", "rules", ...files], { cwd: DIR, encoding: "utf8" });
  assert.equal(r.status, 0, r.stdout + r.stderr);
  // every alert has a case that expects it firing
  const tested = new Set(
    files.flatMap((f) =>
      (
        parse(readFileSync(join(DIR, f), "utf8")) as {
          tests: { alert_rule_test?: { alertname: string; exp_alerts?: unknown[] }[] }[];
        }
      ).tests.flatMap((c) =>
        (c.alert_rule_test ?? []).filter((a) => a.exp_alerts?.length).map((a) => a.alertname),
      ),
    ),
  );
  assert.deepEqual([...tested].sort(), rules.map((r) => r.alert).sort(), "an alert without a firing case");
});

test("kubectl kustomize builds the component: rules, PodMonitors, and the dashboard and rules ConfigMaps", (t) => {
  const r = spawnSync("kubectl", ["kustomize", "--help"], { encoding: "utf8", timeout: 10_000 });
  if (r.error || r.status !== 0) return t.skip("kubectl with kustomize is not on PATH");
  const overlay = mkdtempSync(join(tmpdir(), "plb-kustomize-"));
  t.after(() => rmSync(overlay, { recursive: true, force: true }));
  const base = relative(overlay, join(ROOT, "deploy"));
  writeFileSync(
    join(overlay, "kustomization.yaml"),
    `resources: [${base}]\ncomponents: [${base}/components/monitoring]\n`,
  );
  const objects = parseAllDocuments(
    execFileSync("kubectl", ["kustomize", overlay], { encoding: "utf8", timeout: 30_000 }),
  ).map(
    (d) =>
      d.toJS() as {
        kind: string;
        metadata: { name: string; namespace?: string; labels?: Record<string, string> };
        data?: Record<string, string>;
        spec?: { selector?: { matchLabels: Record<string, string> } };
      },
  );
  const find = (kind: string, name: string) => {
    const o = objects.find((x) => x.kind === kind && x.metadata.name === name);
    assert.ok(o, `no ${kind}/${name}`);
    assert.equal(o.metadata.namespace, "passlb-system");
    return o;
  };
  find("PrometheusRule", "passlb");
  const dashboard = find("ConfigMap", "passlb-grafana-dashboard");
  assert.equal(dashboard.metadata.labels?.grafana_dashboard, "1");
  assert.deepEqual(
    JSON.parse(dashboard.data?.["passlb-dashboard.json"] ?? "{}"),
    JSON.parse(readFileSync(join(DIR, "passlb-dashboard.json"), "utf8")),
  );
  const rulesMap = find("ConfigMap", "passlb-prometheus-rules");
  assert.deepEqual(parse(rulesMap.data?.["passlb-rules.yaml"] ?? ""), plain);
  // the PodMonitors select the workloads' pods, which name the port they scrape
  for (const component of ["lb", "controller"]) {
    const m = find("PodMonitor", `passlb-${component}`);
    const workload = objects.find(
      (o) =>
        ["DaemonSet", "Deployment"].includes(o.kind) &&
        o.metadata.labels?.["app.kubernetes.io/component"] === component,
    ) as unknown as {
      spec: {
        template: {
          metadata: { labels: Record<string, string> };
          spec: { containers: { ports?: { name: string }[] }[] };
        };
      };
    };
    for (const [k, v] of Object.entries(m.spec?.selector?.matchLabels ?? {}))
      assert.equal(workload.spec.template.metadata.labels[k], v, `${component}: ${k}`);
    assert.ok(
      workload.spec.template.spec.containers.some((c) => c.ports?.some((p) => p.name === "dashboard")),
    );
  }
});
