/**
 * End to end through the node side (no LB data plane): a client in one namespace, the
 * LB namespace routing a Service's VIP to a chosen node, that node's agent DNAT rules,
 * and echo-server pods that report the address they saw. Real packets only to addresses
 * inside the lab (docs/lab.md); the lab is removed when the test ends, pass or fail.
 * Root only; otherwise skipped with the reason.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { labUnavailable, startLab } from "./lab-harness.ts";
import { spreadProblem } from "./stats.ts";

const TOPOLOGY = "test/fixtures/lab/e2e/topology.yaml";
const why = labUnavailable();

test("agent path: eTP, client address, affinity, UDP, IPv6, source ranges, terminating", {
  timeout: 120_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "ag" });
  const CLIENT_A = lab.host("client-a").ipv4;
  const CLIENT_A6 = lab.host("client-a").ipv6;

  await t.test("Local: only the node's own ready pods, evenly, and they see the real client", async () => {
    const vip = await lab.vip("e2e/web");
    lab.route(vip, ["node-a1"]);
    const r = await lab.client("client-a", [
      "--target",
      `${vip}:80`,
      "--count",
      "900",
      "--concurrency",
      "16",
    ]);
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    assert.deepEqual(Object.keys(r.byPod).sort(), ["a1-1", "a1-2", "a1-3"]);
    assert.deepEqual(r.clients, { [CLIENT_A]: 900 });
    const pods = ["a1-1", "a1-2", "a1-3"];
    const problem = await spreadProblem(
      pods.map((k) => r.byPod[k] ?? 0),
      [1, 1, 1],
      async () => {
        const again = await lab.client("client-a", ["--target", `${vip}:80`, "--count", "900"]);
        return pods.map((k) => again.byPod[k] ?? 0);
      },
    );
    assert.equal(problem, undefined, `spread over pods: ${problem}`);
  });

  await t.test("Local: a node without local endpoints drops the traffic", async () => {
    const vip = await lab.vip("e2e/web");
    lab.route(vip, ["node-b1"]);
    const r = await lab.client("client-a", ["--target", `${vip}:80`, "--count", "3", "--timeout", "500"]);
    assert.equal(r.ok, 0);
    assert.deepEqual(r.errors, { ETIMEDOUT: 3 }, "dropped, not answered by anyone");
  });

  await t.test("Cluster: works from every node; remote endpoints are masqueraded", async () => {
    const vip = await lab.vip("e2e/any");
    for (const node of ["node-a1", "node-a2", "node-b1"]) {
      lab.route(vip, [node]);
      const r = await lab.client("client-a", [
        "--target",
        `${vip}:81`,
        "--count",
        "300",
        "--concurrency",
        "8",
      ]);
      assert.equal(r.failed, 0, `${node}: ${JSON.stringify(r.errors)}`);
      assert.deepEqual(Object.keys(r.byPod).sort(), ["a1-1", "a1-2", "b1-1"], node);
      const pods = ["a1-1", "a1-2", "b1-1"];
      const problem = await spreadProblem(
        pods.map((k) => r.byPod[k] ?? 0),
        [1, 1, 1],
        async () => {
          const again = await lab.client("client-a", ["--target", `${vip}:81`, "--count", "300"]);
          return pods.map((k) => again.byPod[k] ?? 0);
        },
      );
      assert.equal(problem, undefined, `${node}: ${problem}`);
      const nodeIp = lab.host(node).ipv4;
      // pods on the receiving node see the client; pods elsewhere see the receiving node
      const local = node === "node-a1" ? ["a1-1", "a1-2"] : node === "node-b1" ? ["b1-1"] : [];
      const expectClient = local.reduce((n, k) => n + (r.byPod[k] ?? 0), 0);
      assert.equal(r.clients[CLIENT_A] ?? 0, expectClient, `${node}: ${JSON.stringify(r.clients)}`);
      assert.equal(r.clients[nodeIp] ?? 0, 300 - expectClient, `${node}: ${JSON.stringify(r.clients)}`);
    }
  });

  await t.test("IPv6: a dual-stack Service answers on its IPv6 VIP, IPv6 endpoints only", async () => {
    const vip6 = await lab.vip("e2e/any", "IPv6");
    lab.route(vip6, ["node-a1"]);
    const r = await lab.client("client-a", ["--target", `[${vip6}]:81`, "--count", "150"]);
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    assert.deepEqual(Object.keys(r.byPod).sort(), ["a1-1", "a1-2", "b1-1"]);
    const local = (r.byPod["a1-1"] ?? 0) + (r.byPod["a1-2"] ?? 0);
    assert.equal(r.clients[CLIENT_A6], local, JSON.stringify(r.clients));
    assert.equal(r.clients[lab.host("node-a1").ipv6], r.byPod["b1-1"], JSON.stringify(r.clients));
  });

  await t.test("ClientIP affinity: every connection of a client reaches one pod", async () => {
    const vip = await lab.vip("e2e/sticky");
    lab.route(vip, ["node-a2"]);
    for (const client of ["client-a", "client-b"]) {
      const r = await lab.client(client, ["--target", `${vip}:82`, "--count", "200", "--concurrency", "8"]);
      assert.equal(r.failed, 0, JSON.stringify(r.errors));
      assert.equal(Object.keys(r.byPod).length, 1, `${client}: ${JSON.stringify(r.byPod)}`);
    }
  });

  await t.test("UDP: requests from fresh source ports spread over both pods", async () => {
    const vip = await lab.vip("e2e/dns");
    lab.route(vip, ["node-b1"]);
    const r = await lab.client("client-b", ["--target", `${vip}:53`, "--proto", "udp", "--count", "400"]);
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    const pods = ["a1-1", "b1-1"];
    const problem = await spreadProblem(
      pods.map((k) => r.byPod[k] ?? 0),
      [1, 1],
      async () => {
        const again = await lab.client("client-b", [
          "--target",
          `${vip}:53`,
          "--proto",
          "udp",
          "--count",
          "400",
        ]);
        return pods.map((k) => again.byPod[k] ?? 0);
      },
    );
    assert.equal(problem, undefined, problem);
  });

  await t.test("loadBalancerSourceRanges: zone-a clients get in, zone-b clients are dropped", async () => {
    const vip = await lab.vip("e2e/guarded");
    lab.route(vip, ["node-a1"]);
    const a = await lab.client("client-a", ["--target", `${vip}:83`, "--count", "20"]);
    assert.equal(a.ok, 20, JSON.stringify(a.errors));
    const b = await lab.client("client-b", ["--target", `${vip}:83`, "--count", "3", "--timeout", "500"]);
    assert.equal(b.ok, 0);
    assert.deepEqual(b.errors, { ETIMEDOUT: 3 });
  });

  await t.test("terminating endpoints are used when nothing else is left, and only then", async () => {
    const vip = await lab.vip("e2e/drain");
    lab.route(vip, ["node-a2"]);
    const r = await lab.client("client-a", ["--target", `${vip}:84`, "--count", "50"]);
    assert.equal(r.failed, 0, JSON.stringify(r.errors));
    assert.deepEqual(r.byPod, { "a2-2": 50 }, "the serving terminating pod, never the unready one");
    // a2-3 becomes ready: the terminating pod stops getting new connections
    await lab.update((topo) => {
      const pod = topo.zones[0]!.nodes[1]!.pods.find((p) => p.name === "a2-3")!;
      pod.ready = true;
      return topo;
    });
    const after = await lab.client("client-a", ["--target", `${vip}:84`, "--count", "50"]);
    assert.equal(after.failed, 0, JSON.stringify(after.errors));
    assert.deepEqual(after.byPod, { "a2-3": 50 });
  });
});
