import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { webPlan } from "../../test/support/web-fixture.ts";
import { serviceForwarding } from "../dataplane/forwarding-state.ts";
import { Metrics } from "./metrics.ts";

const DOC = new URL("../../docs/metrics.md", import.meta.url);

/** `| \`passlb_x\` | counter | ...` rows of docs/metrics.md */
function documented(): Map<string, string> {
  const out = new Map<string, string>();
  for (const line of readFileSync(DOC, "utf8").split("\n")) {
    const m = /^\|\s*`(passlb_[a-z0-9_]+)`\s*\|\s*(counter|gauge|histogram|summary)\s*\|/.exec(line);
    if (m) out.set(m[1]!, m[2]!);
  }
  return out;
}

test("docs/metrics.md lists every passlb metric with its type, and nothing else", async () => {
  const metrics = new Metrics({ processMetrics: true });
  const registered = new Map(
    (await metrics.registry.getMetricsAsJSON())
      .filter((m) => m.name.startsWith("passlb_"))
      .map((m) => [m.name, String(m.type)]),
  );
  const docs = documented();
  assert.ok(docs.size >= 15, "the table parsed");
  assert.deepEqual([...docs].sort(), [...registered].sort());
});

test("names follow the conventions: counters end in _total, nothing else does", async () => {
  const metrics = new Metrics();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    assert.equal(m.name.endsWith("_total"), String(m.type) === "counter", m.name);
    assert.match(m.name, /^passlb_[a-z0-9_]+$/);
  }
});

test("facade calls show up in the exposition", async () => {
  const metrics = new Metrics();
  metrics.probeResult("node-a", true, 0.003);
  metrics.probeResult("node-a", false, 2);
  metrics.healthTransition("node-a", "unhealthy");
  metrics.nftTransaction("full", false, 0.02);
  metrics.connection("default/web", "node-a");
  metrics.connectionTotals("default/web", "node-b", 5);
  metrics.connectionTotals("default/web", "node-b", 7);
  metrics.bytes("default/web", "node-a", "to_client", 1500);
  metrics.ipPool("default", "IPv4", 14, 3);
  metrics.nodeTraffic("node-a", 10, 1000);
  metrics.nodeTraffic("node-a", 15, 1500);
  metrics.nodeTraffic("node-a", 3, 300); // the kernel counter was recreated
  metrics.serviceTraffic("default/web", 4, 400);
  metrics.kubeWatchRestart("services", "expired");
  metrics.kubeWatchRestart("services", "expired");
  const text = await metrics.text();
  assert.match(text, /passlb_node_forwarded_packets_total\{node="node-a"\} 18/);
  assert.match(text, /passlb_node_forwarded_bytes_total\{node="node-a"\} 1800/);
  assert.match(text, /passlb_service_forwarded_packets_total\{service="default\/web"\} 4/);
  assert.match(text, /passlb_health_probes_total\{node="node-a",result="failure"\} 1/);
  assert.match(text, /passlb_health_probe_duration_seconds_count\{result="success"\} 1/);
  assert.match(text, /passlb_health_transitions_total\{node="node-a",to="unhealthy"\} 1/);
  assert.match(text, /passlb_nft_transactions_total\{kind="full",result="failed"\} 1/);
  assert.match(text, /passlb_connections_total\{service="default\/web",node="node-b"\} 7/);
  assert.match(text, /passlb_bytes_total\{service="default\/web",node="node-a",direction="to_client"\} 1500/);
  assert.match(text, /passlb_ip_pool_addresses_used\{pool="default",family="IPv4"\} 3/);
  assert.match(text, /passlb_kube_watch_restarts_total\{resource="services",reason="expired"\} 2/);
});

test("observeForwarding: backends by state, weights, and Maglev rebuilds with slots moved", async () => {
  const metrics = new Metrics();
  const plan = webPlan("default/web");
  const healthy = serviceForwarding(plan, () => ({ state: "healthy" }), { seed: 1 });
  metrics.observeForwarding([healthy]);
  metrics.observeForwarding([healthy]);
  let text = await metrics.text();
  assert.match(text, /passlb_services_programmed 1/);
  assert.match(text, /passlb_service_backends\{service="default\/web",state="healthy"\} 2/);
  assert.match(text, /passlb_service_backends\{service="default\/web",state="excluded"\} 1/);
  assert.match(text, /passlb_node_weight\{service="default\/web",node="node-a"\} 1/);
  assert.doesNotMatch(text, /passlb_maglev_rebuilds_total\{/, "the same table twice is no rebuild");
  const oneDown = serviceForwarding(
    plan,
    (_s, _c, node) => ({ state: node === "node-b" ? "unhealthy" : "healthy" }),
    { seed: 1, sizeFor: () => 251 },
  );
  const before = serviceForwarding(plan, () => ({ state: "healthy" }), { seed: 1, sizeFor: () => 251 });
  metrics.observeForwarding([before]);
  metrics.observeForwarding([oneDown]);
  text = await metrics.text();
  assert.match(text, /passlb_service_backends\{service="default\/web",state="unhealthy"\} 1/);
  assert.match(text, /passlb_maglev_rebuilds_total\{service="default\/web"\} 2/);
  // one rebuild per listener (TCP/80, TCP/443), each moving node-b's half of the slots
  assert.match(text, /passlb_maglev_slots_moved_ratio_count 2/);
  const sum = Number(/passlb_maglev_slots_moved_ratio_sum ([0-9.]+)/.exec(text)?.[1]);
  assert.ok(sum / 2 > 0.3 && sum / 2 < 0.7, `about node-b's half of the slots moved: ${sum / 2}`);
});

test("announce: one set of metrics for both engines; BIRD adds its sessions, BFD and health", async () => {
  const metrics = new Metrics();
  const base = { host: "lb-1", state: "running", generation: 1, groups: [] } as const;
  metrics.announce({
    ...base,
    engine: "keepalived",
    vips: [
      { vip: "203.0.113.1", state: "held", reason: "vrrp_master" },
      { vip: "203.0.113.2", state: "backup", reason: "vrrp_backup" },
    ],
  });
  metrics.announce({
    ...base,
    engine: "bird",
    vips: [
      { vip: "203.0.113.1", state: "held", reason: "to 198.51.100.1" },
      { vip: "203.0.113.3", state: "withdrawn", reason: "not ready" },
    ],
    speaker: {
      health: "degraded",
      findings: ["BGP up, BFD Down"],
      sessions: [
        { peer: "198.51.100.1", state: "Established", established: true, bfd: "Down" },
        { peer: "fd00::1", state: "Active", established: false },
      ],
    },
  });
  metrics.announceTransition("bird", "held");
  const text = await metrics.text();
  assert.match(text, /passlb_announce_vips\{engine="keepalived",state="backup"\} 1/);
  assert.match(text, /passlb_announce_vips\{engine="bird",state="held"\} 1/);
  assert.match(text, /passlb_announce_vips\{engine="bird",state="withdrawn"\} 1/);
  assert.match(text, /passlb_announce_engine_up\{engine="bird"\} 1/);
  assert.match(text, /passlb_announce_transitions_total\{engine="bird",state="held"\} 1/);
  assert.match(text, /passlb_bgp_session_up\{peer="198\.51\.100\.1"\} 1/);
  assert.match(text, /passlb_bgp_session_up\{peer="fd00::1"\} 0/);
  assert.match(text, /passlb_bfd_session_up\{peer="198\.51\.100\.1"\} 0/);
  assert.doesNotMatch(text, /passlb_bfd_session_up\{peer="fd00::1"\}/, "no BFD session, no series");
  assert.match(text, /passlb_bgp_speaker_state\{state="degraded"\} 1/);
  assert.doesNotMatch(text, /passlb_bgp_vips_announced/, "passlb_announce_vips says it");
});
