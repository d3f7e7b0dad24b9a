import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { webPlan } from "../../test/support/web-fixture.ts";
import { serviceForwarding } from "../forwarding/forwarding-state.ts";
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
  metrics.nodeTraffic("node-a", 7, 700, "xdp");
  metrics.flowTable("xdp", "IPv6", 12, 262144);
  metrics.flowEvictions("xdp", 0);
  metrics.flowEvictions("xdp", 40);
  metrics.flowEvictions("xdp", 45);
  metrics.xdpReason("drop_source", 3);
  metrics.kubeWatchRestart("services", "expired");
  metrics.kubeWatchRestart("services", "expired");
  const text = await metrics.text();
  assert.match(text, /passlb_node_forwarded_packets_total\{node="node-a",dataplane="nftables"\} 18/);
  assert.match(text, /passlb_node_forwarded_bytes_total\{node="node-a",dataplane="nftables"\} 1800/);
  assert.match(text, /passlb_node_forwarded_packets_total\{node="node-a",dataplane="xdp"\} 7/);
  assert.match(
    text,
    /passlb_service_forwarded_packets_total\{service="default\/web",dataplane="nftables"\} 4/,
  );
  assert.match(text, /passlb_flow_table_entries\{dataplane="xdp",family="IPv6"\} 12/);
  assert.match(text, /passlb_flow_table_capacity\{dataplane="xdp",family="IPv6"\} 262144/);
  assert.match(text, /passlb_flow_table_evictions_total\{dataplane="xdp"\} 45/);
  assert.match(text, /passlb_xdp_packets_total\{reason="drop_source"\} 3/);
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

test("alerting metrics: VIPs held per host, VRRP instance states, drift repairs, conntrack use, leadership", async () => {
  const metrics = new Metrics();
  const base = { host: "lb-1", engine: "keepalived", state: "running", generation: 1 } as const;
  assert.doesNotMatch(
    await metrics.text(),
    /^passlb_controller_leader/m,
    "no series in a process that elects nothing",
  );
  metrics.leading("passlb-system/passlb-controller", false);
  assert.match(
    await metrics.text(),
    /passlb_controller_leader\{lease="passlb-system\/passlb-controller"\} 0/,
  );
  metrics.leading("passlb-system/passlb-controller", true);
  metrics.announce({
    ...base,
    vips: [
      { vip: "203.0.113.1", state: "held", reason: "vrrp_master" },
      { vip: "203.0.113.2", state: "backup", reason: "vrrp_backup" },
    ],
    groups: [
      { name: "passlb_v4_1", state: "MASTER", priority: 250, vips: 1 },
      { name: "passlb_v4_2", state: "FAULT", priority: 0, vips: 1 },
    ],
  });
  metrics.driftRepair("nftables", "table");
  metrics.driftRepair("nftables", "table");
  metrics.conntrack(900, 1000);
  let text = await metrics.text();
  assert.match(text, /passlb_announce_vip_held\{engine="keepalived",vip="203\.0\.113\.1"\} 1/);
  assert.match(text, /passlb_announce_vip_held\{engine="keepalived",vip="203\.0\.113\.2"\} 0/);
  assert.match(text, /passlb_vrrp_instance_state\{vrrp_instance="passlb_v4_2",state="FAULT"\} 1/);
  assert.match(text, /passlb_vrrp_instance_state\{vrrp_instance="passlb_v4_2",state="MASTER"\} 0/);
  assert.match(text, /passlb_vrrp_instance_state\{vrrp_instance="passlb_v4_1",state="MASTER"\} 1/);
  assert.match(text, /passlb_drift_repairs_total\{dataplane="nftables",what="table"\} 2/);
  assert.match(text, /passlb_conntrack_entries 900/);
  assert.match(text, /passlb_conntrack_max 1000/);
  assert.match(text, /passlb_controller_leader\{lease="passlb-system\/passlb-controller"\} 1/);
  // a VIP gone from the plan and an instance gone lose their series; another engine's stay
  metrics.announce({
    ...base,
    engine: "bird",
    groups: [],
    vips: [{ vip: "203.0.113.9", state: "held", reason: "to 198.51.100.1" }],
  });
  metrics.announce({
    ...base,
    vips: [{ vip: "203.0.113.1", state: "withdrawn", reason: "engine_down" }],
    groups: [{ name: "passlb_v4_1", state: "STOP", priority: 0, vips: 1 }],
  });
  text = await metrics.text();
  assert.match(text, /passlb_announce_vip_held\{engine="keepalived",vip="203\.0\.113\.1"\} 0/);
  assert.doesNotMatch(text, /vip="203\.0\.113\.2"/);
  assert.match(text, /passlb_announce_vip_held\{engine="bird",vip="203\.0\.113\.9"\} 1/);
  assert.doesNotMatch(text, /vrrp_instance="passlb_v4_2"/);
  assert.match(text, /passlb_vrrp_instance_state\{vrrp_instance="passlb_v4_1",state="STOP"\} 1/);
});

test("the wire: a problem is 1 while it lasts, then 0; foreign VRRP speakers; BGP and BFD flaps counted", async () => {
  const metrics = new Metrics();
  const base = { host: "lb-1", state: "running", generation: 1, groups: [], vips: [] } as const;
  const check = (vip: string, problem: "duplicate_answer" | null) => ({
    vip,
    problem,
    answers: [],
    message: vip,
  });
  const vrrp = (vrids: number[]) => ({
    watching: true,
    interface: "eth0",
    range: { first: 1, last: 255 },
    foreign: vrids.map((vrid) => ({
      interface: "eth0",
      family: "IPv4" as const,
      vrid,
      source: "192.0.2.9",
      mac: "02:00:00:00:00:09",
      priority: 100,
      lastSeen: 0,
      adverts: 1,
    })),
  });
  const wire = (vips: ReturnType<typeof check>[], vrids: number[]) => ({
    checkedAt: 1,
    periodMs: 10_000,
    vips,
    errors: [],
    vrrp: vrrp(vrids),
  });
  metrics.announce({
    ...base,
    engine: "keepalived",
    wire: wire([check("203.0.113.1", "duplicate_answer")], [3]),
  });
  let text = await metrics.text();
  assert.match(text, /passlb_announce_wire_problems\{vip="203\.0\.113\.1",problem="duplicate_answer"\} 1/);
  assert.match(text, /passlb_announce_wire_problems\{vip="203\.0\.113\.1",problem="no_answer"\} 0/);
  assert.match(text, /passlb_vrrp_foreign_speaker\{interface="eth0",vrid="3"\} 1/);
  metrics.announce({ ...base, engine: "keepalived", wire: wire([check("203.0.113.1", null)], []) });
  text = await metrics.text();
  assert.match(text, /passlb_announce_wire_problems\{vip="203\.0\.113\.1",problem="duplicate_answer"\} 0/);
  assert.match(text, /passlb_vrrp_foreign_speaker\{interface="eth0",vrid="3"\} 0/);

  const speaker = (established: boolean, bfd: string) => ({
    health: "healthy" as const,
    findings: [],
    sessions: [{ peer: "198.51.100.1", state: established ? "Established" : "Active", established, bfd }],
  });
  for (const [up, bfd] of [
    [true, "Up"],
    [false, "Down"],
    [true, "Up"],
    [true, "Up"],
  ] as const)
    metrics.announce({ ...base, engine: "bird", speaker: speaker(up, bfd) });
  text = await metrics.text();
  assert.match(text, /passlb_bgp_session_transitions_total\{peer="198\.51\.100\.1",to="down"\} 1/);
  assert.match(text, /passlb_bgp_session_transitions_total\{peer="198\.51\.100\.1",to="up"\} 1/);
  assert.match(text, /passlb_bfd_session_transitions_total\{peer="198\.51\.100\.1",to="down"\} 1/);
});
