/**
 * End to end on loopback, no root: the test cluster (test/fixtures/userspace/cluster, copied
 * to a temporary folder so the test can edit it) runs as `passlb up` runs it — echo pods,
 * node agents, health probes and the userspace LB — and real connections check the
 * semantics. After the loopback rewrite: VIPs dns 127.0.1.200 (UDP 8053), echo 127.0.1.201
 * (TCP 9000), web 127.0.1.202 (TCP 8080); nodes n1..n3 127.0.2.201-203.
 */
import assert from "node:assert/strict";
import { cp, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { QuickstartRun } from "../../src/quickstart/quickstart-run.ts";
import { httpGet, openLine, udpAsk, until } from "./clients.ts";

const FIXTURE = new URL("../fixtures/userspace/cluster/", import.meta.url);
const WEB = "127.0.1.202";
const ECHO = "127.0.1.201";
const DNS = "127.0.1.200";
const NODE = { n1: "127.0.2.201", n2: "127.0.2.202", n3: "127.0.2.203" } as const;

let dir = "";
let run: QuickstartRun;

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "plb-userspace-"));
  await cp(FIXTURE, dir, { recursive: true });
  run = new QuickstartRun({ dir, probeIntervalMs: 100, pollMs: 200, windowMs: 60_000, log: () => {} });
  const started = await run.start();
  assert.deepEqual(started.errors, []);
  // every probed node has answered once
  await until(
    () => run.liveState().services.every((s) => s.nodes.every((n) => n.health !== "unknown")),
    3000,
    "first probes",
  );
});

after(async () => {
  await run.close();
  await rm(dir, { recursive: true, force: true });
});

test("Local, weighted: nodes get new connections in proportion to their ready pods, and pods see the client", async () => {
  const perNode = new Map<string, number>();
  const N = 300;
  for (let i = 0; i < N; i++) {
    const a = await httpGet(WEB, 8080);
    perNode.set(a.node, (perNode.get(a.node) ?? 0) + 1);
    assert.match(a.client, /^127\.0\.0\.1:\d+$/, "Local keeps the client address");
  }
  // n1 has 3 ready pods, n2 has 1, n3 none (not a member): expect 75% / 25%
  assert.equal(perNode.get("n3"), undefined);
  const share = (perNode.get("n1") ?? 0) / N;
  assert.ok(share > 0.65 && share < 0.85, `n1 share ${share}`);
});

test("Cluster with ClientIP affinity: one client sticks to one node and pod; pods see the node address", async () => {
  const seen = new Set<string>();
  for (let i = 0; i < 20; i++) {
    const c = await openLine(ECHO, 9000, "127.0.4.7");
    const line = await c.ask(`hello ${i}`);
    c.socket.destroy();
    const m = /^(\S+)@(\S+) (\S+):\d+> hello/.exec(line);
    assert.ok(m, line);
    seen.add(`${m[1]}@${m[2]}`);
    // masquerade under Cluster: the pod sees a node, not 127.0.4.7
    assert.ok(Object.values(NODE).includes(m[3] as never), `client seen ${m[3]}`);
  }
  assert.equal(seen.size, 1, [...seen].join(" "));
});

test("UDP: a flow stays on its pod; sources outside loadBalancerSourceRanges get nothing", async () => {
  const allowed = await udpAsk(DNS, 8053, ["q1", "q2", "q3"], "127.0.4.20");
  assert.ok(
    allowed.every((a) => a !== undefined),
    JSON.stringify(allowed),
  );
  const pods = new Set(allowed.map((a) => JSON.parse(a!.split(" ")[0]!).pod));
  assert.equal(pods.size, 1);
  const denied = await udpAsk(DNS, 8053, ["q"], "127.0.0.1", 400);
  assert.deepEqual(denied, [undefined]);
});

test("an established connection survives a backend change; new connections follow it", async () => {
  const c = await openLine(ECHO, 9000, "127.0.4.30");
  const first = await c.ask("one");
  const pod = first.split("@")[0]!; // `t/echo-1`
  // remove that pod's endpoint from the slice and reload
  const file = join(dir, "endpointslices.yaml");
  const text = await readFile(file, "utf8");
  const ip = pod === "t/echo-1" ? "203.0.113.231" : "203.0.113.232";
  await writeFile(
    file,
    text.replace(
      `- addresses: [${ip}]\n    conditions: { ready: true`,
      `- addresses: [${ip}]\n    conditions: { ready: false`,
    ),
  );
  await run.reload();
  const again = await c.ask("two");
  assert.equal(again.split("@")[0], pod, "same pod on the established connection");
  c.socket.destroy();
  for (let i = 0; i < 5; i++) {
    const n = await openLine(ECHO, 9000, `127.0.4.${40 + i}`);
    const l = await n.ask("new");
    n.socket.destroy();
    assert.notEqual(l.split("@")[0], pod, "new connections avoid the unready pod");
  }
  await writeFile(file, text);
  await run.reload();
});

test("failover: when a node agent stops, its health check fails and new connections avoid it", async () => {
  await run.stopAgent("n1");
  try {
    await until(
      () =>
        run
          .liveState()
          .services.find((s) => s.service === "t/web")!
          .nodes.find((n) => n.node === "n1")!.health === "unhealthy",
      3000,
      "n1 unhealthy",
    );
    for (let i = 0; i < 30; i++) {
      const a = await httpGet(WEB, 8080);
      assert.equal(a.node, "n2");
    }
  } finally {
    await run.startAgent("n1");
  }
  await until(
    () =>
      run
        .liveState()
        .services.find((s) => s.service === "t/web")!
        .nodes.find((n) => n.node === "n1")!.health === "healthy",
    3000,
    "n1 healthy again",
  );
});

test("live reload: switching web to Cluster shows in the view and in what pods see", async () => {
  const file = join(dir, "services.yaml");
  const text = await readFile(file, "utf8");
  // healthCheckNodePort goes too: the API only allows it under Local
  await writeFile(
    file,
    text
      .replace("externalTrafficPolicy: Local", "externalTrafficPolicy: Cluster")
      .replace("  healthCheckNodePort: 32200\n", ""),
  );
  try {
    // the poll (200 ms) notices the change by itself
    await until(
      () => run.liveState().services.find((s) => s.service === "t/web")?.policy === "Cluster",
      3000,
      "reload",
    );
    const view = run.liveState().services.find((s) => s.service === "t/web")!;
    assert.deepEqual(
      view.nodes.map((n) => n.node),
      ["n1", "n2", "n3"],
    );
    const a = await httpGet(WEB, 8080);
    assert.ok(Object.values(NODE).includes(a.client.split(":")[0] as never), `pod saw ${a.client}`);
  } finally {
    await writeFile(file, text);
  }
});
