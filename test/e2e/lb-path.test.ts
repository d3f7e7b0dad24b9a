/**
 * End to end through the whole data path: client → `passlb lb` (nftables, Maglev, policy
 * routing) in the LB namespace → the node, whose agent DNATs to a pod. Runs when this
 * build has `passlb lb` and an agent with `--dataplane`; root only; otherwise skipped with
 * the reason. Packets go only to addresses inside the lab (docs/lab.md), and the lab is
 * removed when the test ends, pass or fail.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { planSnapshot } from "../../src/plan/planner.ts";
import { labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { assertNodeLossBound } from "./node-loss.ts";
import { spreadProblem } from "./stats.ts";

const TOPOLOGY = "test/fixtures/lab/e2e/topology.yaml";
const why = labUnavailable();

test("LB path: weights, Cluster, zonal affinity, affinity, ranges, UDP, IPv6, long-lived connections", {
  timeout: 150_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "lb", lb: true });
  const CLIENT_A = lab.host("client-a").ipv4;

  await t.test("weighted Local: nodes get new connections 3:1 as their ready pods, pods evenly", async () => {
    const vip = await lab.vip("e2e/web");
    const r = await lab.client("client-a", [
      "--target",
      `${vip}:80`,
      "--count",
      "2000",
      "--concurrency",
      "16",
    ]);
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    assert.deepEqual(Object.keys(r.byNode).sort(), ["node-a1", "node-a2"], "only nodes with ready pods");
    const nodes = ["node-a1", "node-a2"];
    const pods = ["a1-1", "a1-2", "a1-3", "a2-1"];
    let resample: Promise<{ byNode: Record<string, number>; byPod: Record<string, number> }> | undefined;
    const again = () =>
      (resample ??= lab.client("client-a", [
        "--target",
        `${vip}:80`,
        "--count",
        "2000",
        "--concurrency",
        "16",
      ]));
    const nodeProblem = await spreadProblem(
      nodes.map((k) => r.byNode[k] ?? 0),
      [3, 1],
      async () => {
        const more = await again();
        return nodes.map((k) => more.byNode[k] ?? 0);
      },
    );
    assert.equal(nodeProblem, undefined, `nodes: ${nodeProblem}`);
    const podProblem = await spreadProblem(
      pods.map((k) => r.byPod[k] ?? 0),
      [1, 1, 1, 1],
      async () => {
        const more = await again();
        return pods.map((k) => more.byPod[k] ?? 0);
      },
    );
    assert.equal(podProblem, undefined, `pods: ${podProblem}`);
    assert.deepEqual(r.clients, { [CLIENT_A]: 2000 }, "Local keeps the client address");
  });

  await t.test("Cluster: every node takes connections and forwards them", async () => {
    const vip = await lab.vip("e2e/any");
    const r = await lab.client("client-a", [
      "--target",
      `${vip}:81`,
      "--count",
      "600",
      "--concurrency",
      "16",
    ]);
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    // a pod sees the client when it sits on the receiving node, else that node's address
    for (const node of ["node-a1", "node-a2", "node-b1"])
      assert.ok(
        (r.clients[lab.host(node).ipv4] ?? 0) > 0,
        `${node} received none: ${JSON.stringify(r.clients)}`,
      );
  });

  await t.test(
    "zonal affinity keeps clients in their zone and spills when the zone has no backend",
    async () => {
      const vip = await lab.vip("e2e/zonal");
      const a = await lab.client("client-a", [
        "--target",
        `${vip}:85`,
        "--count",
        "200",
        "--concurrency",
        "8",
      ]);
      assert.deepEqual(a.byNode, { "node-a1": 200 });
      const b = await lab.client("client-b", [
        "--target",
        `${vip}:85`,
        "--count",
        "200",
        "--concurrency",
        "8",
      ]);
      assert.deepEqual(b.byNode, { "node-b1": 200 });
      // b1-2 goes away (terminating, no longer serving): node-b1 stops being a member. (An
      // unready pod leaves the node a member that its health check rejects: GKE's rule.)
      await lab.update((topo) => {
        const pod = topo.zones[1]!.nodes[0]!.pods.find((p) => p.name === "b1-2")!;
        pod.ready = false;
        pod.terminating = true;
        return topo;
      });
      const spilled = await lab.client("client-b", [
        "--target",
        `${vip}:85`,
        "--count",
        "200",
        "--concurrency",
        "8",
      ]);
      assert.equal(spilled.failed, 0, JSON.stringify(spilled.errors));
      assert.deepEqual(spilled.byNode, { "node-a1": 200 }, "zone-b has no backend: zone-a serves");
    },
  );

  await t.test("ClientIP affinity holds through the LB and the node", async () => {
    const vip = await lab.vip("e2e/sticky");
    for (const client of ["client-a", "client-b"]) {
      const r = await lab.client(client, ["--target", `${vip}:82`, "--count", "200", "--concurrency", "8"]);
      assert.equal(r.failed, 0, JSON.stringify(r.errors));
      assert.equal(Object.keys(r.byPod).length, 1, `${client}: ${JSON.stringify(r.byPod)}`);
    }
  });

  await t.test("loadBalancerSourceRanges at the LB: other clients are dropped", async () => {
    const vip = await lab.vip("e2e/guarded");
    const a = await lab.client("client-a", ["--target", `${vip}:83`, "--count", "20"]);
    assert.equal(a.ok, 20, JSON.stringify(a.errors));
    const b = await lab.client("client-b", ["--target", `${vip}:83`, "--count", "3", "--timeout", "500"]);
    assert.deepEqual(b.errors, { ETIMEDOUT: 3 });
  });

  await t.test("UDP and IPv6 through the LB", async () => {
    const dns = await lab.vip("e2e/dns");
    const u = await lab.client("client-b", ["--target", `${dns}:53`, "--proto", "udp", "--count", "300"]);
    assert.equal(u.failed, 0, JSON.stringify(u.errors));
    assert.deepEqual(Object.keys(u.byPod).sort(), ["a1-1", "b1-1"]);
    const v6 = await lab.vip("e2e/any", "IPv6");
    const r = await lab.client("client-a", [
      "--target",
      `[${v6}]:81`,
      "--count",
      "200",
      "--concurrency",
      "8",
    ]);
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    assert.deepEqual(Object.keys(r.byPod).sort(), ["a1-1", "a1-2", "b1-1"]);
  });

  await t.test("long-lived connections survive adding and removing a node and an LB restart", async () => {
    const vip = await lab.vip("e2e/web");
    const held = lab.client("client-a", [
      "--mode",
      "hold",
      "--target",
      `${vip}:80`,
      "--connections",
      "16",
      "--duration",
      "9000",
      "--interval",
      "100",
    ]);
    await sleep(1000);
    // node-b1 joins the web Service (a ready pod), then leaves again
    await lab.update((topo) => {
      topo.zones[1]!.nodes[0]!.pods.find((p) => p.name === "b1-3")!.ready = true;
      return topo;
    });
    await sleep(1000);
    await lab.update((topo) => {
      topo.zones[1]!.nodes[0]!.pods.find((p) => p.name === "b1-3")!.ready = false;
      return topo;
    });
    await lab.restart("lb", "lb");
    const r = (await held) as unknown as {
      connections: { ok: boolean; error?: string; node?: string; pings: number }[];
    };
    assert.equal(r.connections.length, 16);
    const failed = r.connections.filter((c) => !c.ok);
    assert.deepEqual(failed, [], "no connection was reset or stalled");
    assert.ok(
      r.connections.every((c) => c.pings >= 50),
      JSON.stringify(r.connections.map((c) => c.pings)),
    );
  });
});

test("LB path: a node whose link goes down or whose agent dies stops getting new connections in time", {
  timeout: 120_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "hc", lb: true });
  const vip = await lab.vip("e2e/web");
  const plan = planSnapshot(await lab.snapshot()).plans.find((p) => p.service === "e2e/web")!;
  const check = plan.healthChecks[0]!;
  // the prober's worst case (docs/health.md: interval × unhealthyThreshold + timeout), plus
  // 1 s for the LB to program the change and for a loaded machine's late timers
  const boundMs = (check.intervalSeconds * check.unhealthyThreshold + check.timeoutSeconds + 1) * 1000;
  const cases: [string, () => Promise<void>][] = [
    ["link goes down", async () => lab.link("node-a2", false)],
    ["agent dies", async () => void (await lab.restart("agent", "node-a2", true))],
  ];
  for (const [what, fail] of cases) {
    await assertNodeLossBound(t, lab, {
      what,
      client: "client-a",
      target: `${vip}:80`,
      node: "node-a2",
      boundMs,
      fail,
    });
    if (what === "link goes down") lab.link("node-a2", true);
  }
});
