/**
 * What the monitoring tests share (test/monitoring-*.test.ts, test/e2e/prometheus-alerts.test.ts):
 * the metric names passlb exports (its registry, histograms with their series suffixes), the
 * passlb_* names in a PromQL expression, and the metrics the alerts and the dashboard read
 * that other work in flight defines (docs/alerts.md says which).
 */
import { Metrics } from "../../src/web/metrics.ts";

/** metrics the alerts and the dashboard read that work in flight defines (none now: all have landed) */
export const PENDING_METRICS: ReadonlySet<string> = new Set([]);

export async function exportedMetricNames(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const m of await new Metrics().registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === "histogram") for (const s of ["_bucket", "_sum", "_count"]) names.add(m.name + s);
  }
  return names;
}

/** passlb_* names in a PromQL expression */
export const metricNames = (expr: string): Set<string> => new Set(expr.match(/\bpasslb_[a-z0-9_]+/g) ?? []);
