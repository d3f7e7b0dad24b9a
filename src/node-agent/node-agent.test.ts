/**
 * A NodeAgent built from a config with fake drivers (fake-drivers.ts): the parts the config
 * asks for, started in order, stopped in reverse; a start that fails undoes what it did; a
 * read with problems keeps the last good state; a failed DNAT sync leaves the health
 * answers unrefreshed; decapsulation alone runs on its own timer until stop.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { readManifests } from "../cluster/manifest-files.ts";
import type { SourceRead } from "../cluster/snapshot-source.ts";
import { decodeDocuments } from "../k8s/decode.ts";
import { type AgentConfig, type AgentFlags, agentConfig } from "./agent-config.ts";
import type { AgentSink } from "./agent-reporter.ts";
import { buildNodeAgent } from "./build-node-agent.ts";
import { fakeAgentDrivers } from "./fake-drivers.ts";

async function goodRead(): Promise<SourceRead> {
  const read = await readManifests(["test/fixtures/lab/agent/quickstart.yaml"], async () => "");
  return { ok: true, snapshot: decodeDocuments(read.documents).snapshot, notices: [], problems: [] };
}

function config(flags: Partial<AgentFlags>): AgentConfig {
  const r = agentConfig({
    node: "node-a1",
    dataplane: "none",
    manifests: "unused-by-the-fake-source",
    healthzBindAddress: ":10256",
    syncPeriod: "30",
    procSys: "/proc/sys",
    ...flags,
  });
  if ("error" in r) throw new Error(r.error);
  return r.config;
}

function sink(): AgentSink & { lines: string[] } {
  const lines: string[] = [];
  return {
    lines,
    log: (level, event, reason, line) =>
      lines.push(`${level} ${event}${reason ? `/${reason}` : ""}: ${line}`),
    finding: () => {},
    setFindings: () => {},
  };
}

test("nftables with decap: parts start in order, each read syncs decap → dnat → health, stop reverses", async () => {
  const drivers = fakeAgentDrivers({ firstRead: await goodRead() });
  const agent = buildNodeAgent(config({ dataplane: "nftables", decap: "ipip" }), drivers, sink());
  assert.deepEqual(
    Object.entries(agent.parts)
      .filter(([, v]) => v !== undefined && typeof v === "object")
      .map(([k]) => k),
    ["report", "input", "health", "dnat", "decap"],
    "no userspace proxy for nftables",
  );
  await agent.start();
  assert.deepEqual(drivers.calls, [
    "decap.ensure",
    "source.start",
    "decap.ensure",
    "nft.run",
    "health.update",
    "health.updated", // node-a1 has an IPv4 and an IPv6 address: one mark per family
    "health.updated",
  ]);
  assert.deepEqual(agent.running(), ["input", "health"]);
  drivers.calls.length = 0;
  await agent.stop();
  assert.deepEqual(drivers.calls, ["source.close", "health.close"], "the DNAT table stays (no nft call)");
  assert.deepEqual(agent.running(), []);
});

test("a start that fails undoes what it had started, last first", async () => {
  const drivers = fakeAgentDrivers({ firstRead: await goodRead() });
  drivers.fail.add("source.start");
  const agent = buildNodeAgent(config({ dataplane: "userspace" }), drivers, sink());
  await assert.rejects(agent.start(), /fake source.start refused/);
  assert.deepEqual(drivers.calls, ["source.start", "source.close", "health.close"], "no proxy was made");
  assert.deepEqual(agent.running(), []);
  await assert.rejects(agent.start(), /stopped already/, "a stopped agent is not started again");

  // the first read fails after the proxy started: it is closed too, between the input and health
  const later = fakeAgentDrivers({ firstRead: await goodRead() });
  later.fail.add("health.updated");
  const second = buildNodeAgent(config({ dataplane: "userspace" }), later, sink());
  await assert.rejects(second.start(), /fake health.updated refused/);
  assert.deepEqual(later.calls.slice(-3), ["source.close", "proxy.close", "health.close"]);
  assert.deepEqual(second.running(), []);
});

test("a decapsulation that fails at start fails the start, naming --decap, and nothing is left running", async () => {
  const drivers = fakeAgentDrivers({ firstRead: await goodRead() });
  drivers.fail.add("decap.ensure");
  const agent = buildNodeAgent(config({ decap: "gre" }), drivers, sink());
  await assert.rejects(agent.start(), /^Error: --decap gre: fake decap.ensure refused$/);
  assert.deepEqual(drivers.calls, ["decap.ensure"], "no health server, no source");
});

test("userspace: the proxy starts at the first good read and follows; bad input keeps the last good state", async () => {
  const drivers = fakeAgentDrivers({ firstRead: { ok: false, problems: ["broken.yaml: line 1"] } });
  const out = sink();
  const agent = buildNodeAgent(config({ dataplane: "userspace" }), drivers, out);
  await agent.start();
  assert.deepEqual(
    drivers.calls,
    ["source.start", "health.update"],
    "an unknown node's answers, no proxy yet",
  );
  assert.equal(agent.snapshot, undefined);
  drivers.calls.length = 0;
  const good = await goodRead();
  await drivers.push(good);
  assert.deepEqual(drivers.calls, [
    "health.queued", // the families known before this read: IPv4 only
    "health.update",
    "proxy.new",
    "proxy.update",
    "health.updated", // IPv4 and IPv6 now
    "health.updated",
  ]);
  assert.ok(
    out.lines.some((l) => l.startsWith("info dataplane_started: userspace data plane: nodePorts on ")),
  );
  drivers.calls.length = 0;
  await drivers.push({ ok: false, problems: ["broken.yaml: line 2"] });
  assert.deepEqual(
    drivers.calls,
    ["health.queued", "health.queued"],
    "queued, not marked fresh: they go stale",
  );
  assert.equal(agent.snapshot, good.ok ? good.snapshot : undefined, "the last good state stays");
  assert.ok(out.lines.some((l) => l.includes("keeping the last good state")));
  await agent.stop();
});

test("a refused DNAT sync does not refresh the health answers", async () => {
  const drivers = fakeAgentDrivers({ firstRead: await goodRead() });
  drivers.fail.add("nft.run");
  const out = sink();
  const agent = buildNodeAgent(config({ dataplane: "nftables" }), drivers, out);
  await agent.start();
  assert.deepEqual(drivers.calls, ["source.start", "nft.run", "health.update"]);
  assert.ok(out.lines.some((l) => l.includes("error nft_failed")));
  drivers.fail.delete("nft.run");
  drivers.calls.length = 0;
  await drivers.push(await goodRead());
  assert.deepEqual(drivers.calls, [
    "health.queued",
    "health.queued",
    "nft.run",
    "health.update",
    "health.updated",
    "health.updated",
  ]);
  await agent.stop();
});

test("decapsulation alone: checked every sync period until stop, no health servers", async () => {
  const drivers = fakeAgentDrivers();
  const out = sink();
  const agent = buildNodeAgent(
    config({ manifests: undefined, decap: "vxlan-gpe", syncPeriod: "10" }),
    drivers,
    out,
  );
  assert.equal(agent.parts.health, undefined);
  await agent.start();
  assert.deepEqual(agent.running(), ["decap"]);
  drivers.clock.advance(10_000);
  await new Promise((r) => setImmediate(r));
  drivers.fail.add("decap.ensure");
  drivers.clock.advance(10_000);
  await new Promise((r) => setImmediate(r));
  drivers.clock.advance(10_000);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(drivers.calls, ["decap.ensure", "decap.ensure", "decap.ensure", "decap.ensure"]);
  assert.equal(
    out.lines.filter((l) => l.startsWith("error decap/failed: tunnel_failed")).length,
    1,
    "a lasting failure is told once",
  );
  await agent.stop();
  drivers.clock.advance(60_000);
  await new Promise((r) => setImmediate(r));
  assert.equal(drivers.calls.length, 4, "no check after stop");
});
