/**
 * Issue 18 in the lab, with real packets (docs/lab.md): a UDP client that keeps one source
 * port across the replacement of its Service's pod — on another node, then on the same
 * node — is answered by the new pod within 2 s (the agent deletes the conntrack entry that
 * pinned it to the old pod, as kube-proxy's CleanStaleEntries does); and a TCP client of a
 * Service without endpoints is refused within 1 s (the agent rejects, as kube-proxy does).
 * The old pods keep running here, so an entry left behind would keep being answered by
 * them: the test tells which pod answered. Root only; otherwise skipped with the reason.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Topology } from "../../src/lab/topology.ts";
import { planSnapshot } from "../../src/plan/planner.ts";
import { labUnavailable, sleep, startLab } from "./lab-harness.ts";

const TOPOLOGY = "test/fixtures/lab/udp-reject/topology.yaml";
const why = labUnavailable();

interface PinResult {
  readonly started: number;
  readonly sent: number;
  readonly answers: readonly { at: number; pod: string }[];
}

/** Moves the `pin` label to exactly these pods. */
const pinTo = (pods: readonly string[]) => (topo: Topology) => {
  for (const z of topo.zones)
    for (const n of z.nodes)
      for (const p of n.pods) {
        if (pods.includes(p.name)) p.labels.pin = "yes";
        else delete p.labels.pin;
      }
  return topo;
};

test("stale UDP flows and Services without endpoints, through the node agent", {
  timeout: 120_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "udprj" });
  const vip = await lab.vip("udprej/pinned");
  lab.route(vip, ["node-a1"]);

  /** Runs a fixed-port UDP client, replaces the pod 2 s in, and returns how long the new one took. */
  const across = async (sourcePort: number, from: string, to: string) => {
    const client = lab.client("client-a", [
      "--mode",
      "udp-pin",
      "--target",
      `${vip}:53`,
      "--source-port",
      String(sourcePort),
      "--interval",
      "100",
      "--duration",
      "7000",
    ]) as unknown as Promise<PinResult>;
    await sleep(2000);
    const changed = Date.now();
    await lab.update(pinTo([to]));
    const r = await client;
    const before = r.answers.filter((a) => a.at < changed);
    assert.ok(before.length >= 5, `answers before the change: ${JSON.stringify(before)}`);
    assert.ok(
      before.every((a) => a.pod === from),
      `before the change only ${from}: ${JSON.stringify(before)}`,
    );
    const first = r.answers.find((a) => a.pod === to);
    assert.ok(first, `${to} never answered: ${JSON.stringify(r.answers.slice(-10))} (sent ${r.sent})`);
    const took = first.at - changed;
    t.diagnostic(`${from} → ${to}: the new pod answered ${took} ms after the manifests changed`);
    assert.ok(took < 2000, `${to} answered ${took} ms after the change (bound 2000 ms)`);
    const late = r.answers.filter((a) => a.at > first.at && a.pod !== to);
    assert.deepEqual(late, [], "once the new pod answers, the old one never does again");
  };

  await t.test("UDP, fixed source port: pod replaced by one on another node", async () => {
    await across(54321, "p1", "p4");
  });

  await t.test("UDP, fixed source port: pod replaced by one on the same node", async () => {
    await lab.update(pinTo(["p1"]));
    await across(54322, "p1", "p2");
  });

  await t.test("UDP, fixed source port: pod replaced while the node's agent was down", async () => {
    // the agent's memory of what served is gone with it: its first sync lists instead
    await lab.update(pinTo(["p1"]));
    const client = lab.client("client-a", [
      "--mode",
      "udp-pin",
      "--target",
      `${vip}:53`,
      "--source-port",
      "54324",
      "--interval",
      "100",
      "--duration",
      "20000",
    ]) as unknown as Promise<PinResult>;
    await sleep(2000);
    await lab.restart("agent", "node-a1", true);
    await lab.update(pinTo(["p2"]));
    const started = Date.now();
    await lab.restart("agent", "node-a1");
    const r = await client;
    const between = r.answers.filter((a) => a.at < started);
    assert.ok(
      between.length >= 20 && between.every((a) => a.pod === "p1"),
      "while the agent is down its table and the entry stay: p1 answers",
    );
    const first = r.answers.find((a) => a.pod === "p2");
    assert.ok(first, `p2 never answered after the agent restarted: ${JSON.stringify(r.answers.slice(-3))}`);
    t.diagnostic(`agent restarted: p2 answered ${first.at - started} ms after the agent was started again`);
    assert.deepEqual(
      r.answers.filter((a) => a.at > first.at && a.pod !== "p2"),
      [],
    );
  });

  await t.test("TCP to a Service without endpoints is refused within 1 s", async () => {
    const empty = await lab.vip("udprej/empty");
    lab.route(empty, ["node-a1"]);
    const r = await lab.client("client-a", [
      "--target",
      `${empty}:85`,
      "--count",
      "3",
      "--concurrency",
      "3",
      "--timeout",
      "1000",
    ]);
    t.diagnostic(`3 connections refused in ${String(r.ms)} ms`);
    assert.deepEqual(r.errors, { ECONNREFUSED: 3 }, "refused, not timed out");
    assert.ok(Number(r.ms) < 1000, `took ${String(r.ms)} ms`);
  });
});

test("LB host: a UDP flow pinned to a node that left the Service's table moves to the new pod's node", {
  timeout: 150_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "udprl", lb: true });
  const vip = await lab.vip("udprej/local");
  const plan = planSnapshot(await lab.snapshot()).plans.find((p) => p.service === "udprej/local")!;
  const check = plan.healthChecks[0]!;
  // node-a2 leaves the table once its health check for the Service fails: the prober's
  // worst case (docs/health.md: interval × unhealthyThreshold + timeout); then the LB
  // programs the change and releases the pinned flow: 2 s more for that
  const boundMs = (check.intervalSeconds * check.unhealthyThreshold + check.timeoutSeconds + 2) * 1000;
  const client = lab.client("client-a", [
    "--mode",
    "udp-pin",
    "--target",
    `${vip}:54`,
    "--source-port",
    "54323",
    "--interval",
    "100",
    "--duration",
    String(3000 + boundMs + 3000),
  ]) as unknown as Promise<PinResult>;
  await sleep(3000);
  const changed = Date.now();
  // eTP Local: the Service's only pod moves from node-a2 (p3) to node-a1 (p1); node-a2
  // stays live on the LB host for Service `keep`
  await lab.update((topo) => {
    for (const z of topo.zones)
      for (const n of z.nodes)
        for (const p of n.pods) {
          if (p.name === "p1") p.labels.local = "yes";
          else delete p.labels.local;
        }
    return topo;
  });
  const r = await client;
  const before = r.answers.filter((a) => a.at < changed);
  assert.ok(before.length >= 10 && before.every((a) => a.pod === "p3"), JSON.stringify(before.slice(-5)));
  const first = r.answers.find((a) => a.pod === "p1");
  assert.ok(
    first,
    `the flow stayed pinned to node-a2: p1 never answered in ${boundMs + 3000} ms (last answers ${JSON.stringify(r.answers.slice(-3))}, sent ${r.sent})`,
  );
  const took = first.at - changed;
  t.diagnostic(
    `p3 (node-a2) → p1 (node-a1) under eTP Local: p1 answered ${took} ms after the change (bound ${boundMs} ms)`,
  );
  assert.ok(took < boundMs, `p1 answered ${took} ms after the change (bound ${boundMs} ms)`);
});
