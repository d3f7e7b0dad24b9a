/**
 * GKE plan scenarios: each folder under test/fixtures/gke/ holds `input.yaml` (manifests),
 * `scenario.json` (GKE options, optional generated nodes/endpoints, and a hand-written
 * `expect` summary taken from docs/providers-gke.md and the upstream sources it names) and
 * `expected.golden.json` (the full plan, golden; Biome leaves *.golden.json alone) and `expected-explain.txt`
 * (the text page with --explain). The summary is checked first so a golden can never silently drift from the
 * spec's figures.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { parseDocuments } from "../src/k8s/documents.ts";
import { type GkeFlagName, gkeFlags } from "../src/providers/gke/gke-flags.ts";
import { planGke } from "../src/providers/gke/gke-plan.ts";
import { renderGkeText } from "../src/providers/gke/gke-text.ts";
import type { GkeServicePlan, SubnetIpv6 } from "../src/providers/gke/gke-types.ts";
import { parseGkeVersion } from "../src/providers/gke/gke-version.ts";
import { assertGolden } from "./golden.ts";

interface Scenario {
  description: string;
  options: {
    version: string;
    subsetting?: boolean;
    flags?: Partial<Record<GkeFlagName, boolean>>;
    subnetIpv6?: SubnetIpv6;
  };
  generate?: {
    nodes?: { prefix: string; zone: string; count: number; ready?: boolean }[];
    /** one EndpointSlice for the Service with `count` ready pods on the listed node prefixes, round robin */
    endpoints?: { service: string; count: number; onNodes: string[] }[];
  };
  expect: Record<string, Partial<Summary>>;
}

interface Summary {
  provisioned: boolean;
  path: string;
  scheme: string | null;
  backendType: string | null;
  members: Record<string, number>;
  forwardingRules: string[];
  healthCheck: string | null;
  localityLbPolicy: string | null;
  zonalAffinity: string | null;
  firewalls: Record<string, string>;
  events: string[];
  findings: string[];
}

function summarize(p: GkeServicePlan): Summary {
  const members: Record<string, number> = {};
  for (const n of p.nodes) if (n.member) members[n.zone] = (members[n.zone] ?? 0) + 1;
  return {
    provisioned: p.provisioned,
    path: p.path,
    scheme: p.scheme,
    backendType: p.backendType,
    members,
    forwardingRules: p.forwardingRules.map(
      (r) =>
        `${r.name} ${r.ipVersion} ${r.IPProtocol} ${r.allPorts ? "all" : (r.portRange ?? r.ports?.join(","))}`,
    ),
    healthCheck: p.healthCheck
      ? `${p.healthCheck.name} ${p.healthCheck.resource} ${p.healthCheck.port} ${p.healthCheck.checkIntervalSec}/${p.healthCheck.timeoutSec}/${p.healthCheck.healthyThreshold}/${p.healthCheck.unhealthyThreshold}`
      : null,
    localityLbPolicy: p.backendService?.localityLbPolicy ?? null,
    zonalAffinity: p.backendService?.networkPassThroughLbTrafficPolicy?.zonalAffinity.spillover ?? null,
    firewalls: Object.fromEntries(
      Object.entries(p.firewalls).map(([role, f]) => [role, `${f.name} ${f.priority}`]),
    ),
    events: p.events.map((e) => `${e.type} ${e.reason}`),
    findings: p.findings.filter((f) => f.severity !== "info").map((f) => `${f.severity} ${f.code}`),
  };
}

function generated(g: Scenario["generate"]): unknown[] {
  const docs: unknown[] = [];
  const names: string[] = [];
  for (const group of g?.nodes ?? [])
    for (let i = 0; i < group.count; i++) {
      const name = `${group.prefix}-${String(i).padStart(3, "0")}`;
      names.push(name);
      docs.push({
        apiVersion: "v1",
        kind: "Node",
        metadata: { name, labels: { "topology.kubernetes.io/zone": group.zone } },
        spec: {
          providerID: `gce://proj/${group.zone}/${name}`,
          podCIDR: `10.${names.length >> 8}.${names.length & 255}.0/24`,
        },
        status: { conditions: [{ type: "Ready", status: group.ready === false ? "False" : "True" }] },
      });
    }
  for (const e of g?.endpoints ?? []) {
    const [namespace, service] = e.service.split("/");
    const hosts = names.filter((n) => e.onNodes.some((p) => n.startsWith(`${p}-`)));
    const endpoints = Array.from({ length: e.count }, (_, i) => ({
      addresses: [`10.200.${i >> 8}.${i & 255}`],
      conditions: { ready: true },
      nodeName: hosts[i % hosts.length],
      targetRef: { kind: "Pod", namespace, name: `${service}-${i}` },
    }));
    docs.push({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name: `${service}-gen`, namespace, labels: { "kubernetes.io/service-name": service } },
      addressType: "IPv4",
      endpoints,
      ports: [{ name: "", port: 8080, protocol: "TCP" }],
    });
  }
  return docs;
}

const root = join(import.meta.dirname, "fixtures", "gke");
for (const dir of readdirSync(root).sort()) {
  const folder = join(root, dir);
  const scenario = JSON.parse(readFileSync(join(folder, "scenario.json"), "utf8")) as Scenario;
  test(`${dir}: ${scenario.description}`, () => {
    const parsed = parseDocuments("input.yaml", readFileSync(join(folder, "input.yaml"), "utf8"));
    const extra = generated(scenario.generate).map((value, i) => ({
      source: "generated",
      index: i + 1,
      value,
    }));
    const decoded = decodeDocuments([...parsed.documents, ...extra]);
    assert.deepEqual([...parsed.problems, ...decoded.problems], []);
    const version = parseGkeVersion(scenario.options.version);
    assert.ok(version);
    const plans = planGke(decoded.snapshot, {
      version,
      subsetting: scenario.options.subsetting,
      flags: gkeFlags(version, scenario.options.flags ?? {}),
      subnetIpv6: scenario.options.subnetIpv6 ?? "both",
    });
    for (const [service, want] of Object.entries(scenario.expect)) {
      const plan = plans.find((p) => p.service === service);
      assert.ok(plan, `no plan for ${service}`);
      const got = summarize(plan);
      for (const key of Object.keys(want) as (keyof Summary)[])
        assert.deepEqual(got[key], want[key], `${service}: ${key}`);
    }
    assertGolden(join(folder, "expected.golden.json"), plans);
    assertGolden(join(folder, "expected-explain.txt"), renderGkeText(plans, { explain: true }));
  });
}
