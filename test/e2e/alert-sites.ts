/**
 * What both Prometheus alert labs (prometheus-alerts.test.ts, prometheus-alerts-wire.test.ts)
 * share about their two sites: the scrape targets of a lab, an alert's key and match, the
 * alerts both sites hold, and the wait for a quiet start.
 */
import type { TestContext } from "node:test";
import type { Site, Sites } from "./alert-lab-faults.ts";
import { type Lab, sleep } from "./lab-harness.ts";
import { type PromAlert, type Prometheus, relayTarget, type ScrapeTarget } from "./prometheus-harness.ts";

/** every LB host's and node agent's metrics, relayed out of their namespaces */
export async function labTargets(t: TestContext, lab: Lab, dir: string): Promise<ScrapeTarget[]> {
  const l = lab.state.layout;
  return Promise.all([
    ...l.lbHosts.map(async (h) => ({
      job: "lb",
      instance: h.name,
      address: await relayTarget(t, h.ns, "127.0.0.1:9797", dir),
    })),
    ...l.nodes.map(async (n) => ({
      job: "agent",
      instance: n.name,
      address: await relayTarget(t, n.ns, "127.0.0.1:10249", dir),
    })),
  ]);
}

/** an alert as `name{label=value,…}`, without alertname and severity */
export const key = (a: PromAlert) =>
  `${a.labels.alertname}{${Object.entries(a.labels)
    .filter(([k]) => !["alertname", "severity"].includes(k))
    .map(([k, v]) => `${k}=${v}`)
    .join(",")}}`;

/** the alert fires and carries the expected name and labels */
export const matches = (
  a: PromAlert,
  e: { readonly alert: string; readonly labels: Readonly<Record<string, string>> },
) =>
  a.state === "firing" &&
  a.labels.alertname === e.alert &&
  Object.entries(e.labels).every(([k, v]) => a.labels[k] === v);

/** the alerts of both sites in these states */
export async function activeAlerts(sites: Sites, states: readonly PromAlert["state"][] = ["firing"]) {
  const out: { site: Site; alert: PromAlert }[] = [];
  for (const [site, p] of Object.entries(sites) as [Site, Prometheus][])
    for (const a of await p.alerts()) if (states.includes(a.state)) out.push({ site, alert: a });
  return out;
}

/** Waits up to `giveUpMs` for every target up and no alert firing or pending for `quietMs`
 * in a row; what was left when it gave up. */
export async function waitQuiet(
  sites: Sites,
  quietMs: number,
  giveUpMs: number,
): Promise<{ down: string[]; noisy: string[] }> {
  let down: string[] = [];
  let noisy: string[] = [];
  let quietSince = Date.now();
  for (let end = Date.now() + giveUpMs; Date.now() < end; await sleep(1000)) {
    down = (await Promise.all(Object.values(sites).map((p) => p.targetsDown()))).flat();
    noisy = (await activeAlerts(sites, ["firing", "pending"])).map(
      (f) => `${f.site} ${f.alert.state} ${key(f.alert)}`,
    );
    if (down.length > 0 || noisy.length > 0) quietSince = Date.now();
    else if (Date.now() - quietSince >= quietMs) break;
  }
  return { down, noisy };
}
