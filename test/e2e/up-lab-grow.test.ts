/**
 * `passlb up --dataplane nftables` follows a folder that grows and shrinks (root): from one
 * node and one pod (test/fixtures/up-lab/grow/), a pod added on the node answers through
 * the VIP within 10 s and shows in the live view; a node added with a pod of its own gets
 * its namespace, agent and traffic; both removed again, their namespaces and processes are
 * gone and traffic reaches only the first pod. Everything the lab built is removed in
 * `t.after`, also when the test fails. Skips without root, ip or nft.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { labExec } from "../../src/lab/lab-runner.ts";
import { until } from "../userspace/clients.ts";
import { type ClientResult, labUnavailable, REPO_ROOT } from "./lab-harness.ts";
import { alive, hostLinks, namespaces, startUpLab } from "./up-lab-run.ts";

const FIXTURE = join(REPO_ROOT, "test", "fixtures", "up-lab", "grow");
const skip = labUnavailable();

const pod = (name: string, node: string) => `---
apiVersion: v1
kind: Pod
metadata:
  name: ${name}
  namespace: default
  labels: { app: web }
spec:
  nodeName: ${node}
  containers:
    - name: web
      image: passlb/echo
      ports: [{ name: http, containerPort: 8080, protocol: TCP }]
status:
  phase: Running
  conditions: [{ type: Ready, status: "True" }]
`;

const node = (name: string) => `---
apiVersion: v1
kind: Node
metadata:
  name: ${name}
  labels:
    topology.kubernetes.io/zone: zone-a
status:
  conditions: [{ type: Ready, status: "True" }]
`;

test("passlb up --dataplane nftables builds pods and nodes added to the folder and removes those taken out", {
  skip,
  timeout: 150_000,
}, async (t) => {
  const linksBefore = hostLinks();
  const run = await startUpLab(t, {
    name: `g${randomBytes(3).toString("hex")}`,
    source: FIXTURE,
    durationS: 120,
    ports: 20460,
    readyMs: 90_000,
  });
  const { name, prefix, stateDir, dir, child, exited } = run;
  const m = /demo\/web: ingress (\S+?)[, ]|default\/web: ingress (\S+?)[, ]/.exec(run.out);
  assert.ok(m, `the ingress of default/web in ${run.out}`);
  const target = `${m[1] ?? m[2]}:80`;
  const send = (): ClientResult => {
    const r = labExec(name, "client-zone-a", [
      "node",
      join(stateDir, "bin", "lab-client.mjs"),
      `--target=${target}`,
      "--count=12",
      "--concurrency=4",
    ]);
    assert.equal(r.status, 0, r.stderr);
    return JSON.parse(r.stdout) as ClientResult;
  };
  /** bounded: a batch every 300 ms until `ok` holds or `ms` pass; the time it took */
  const sendUntil = async (ok: (r: ClientResult) => boolean, ms: number, what: string) => {
    const t0 = Date.now();
    let last: ClientResult | undefined;
    while (Date.now() - t0 < ms) {
      last = send();
      if (ok(last)) return Date.now() - t0;
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.fail(`${what} within ${ms} ms; last answers: ${JSON.stringify(last)}\n${run.out.slice(-3000)}`);
  };

  // the reload prints what it built once all of it runs, and `send` blocks this process
  // (spawnSync), so a line printed while it ran is only read after: wait for it
  const logged = (re: RegExp) =>
    until(() => re.test(run.out), 5000, `${re} in the output: ${run.out.slice(-1500)}`);

  const first = send();
  assert.equal(first.ok, 12, JSON.stringify(first));
  assert.deepEqual(Object.keys(first.byPod), ["web-1"]);

  // scale up on the running node: web-2 answers through the VIP within 10 s
  const pods = join(dir, "pods.yaml");
  const nodes = join(dir, "nodes.yaml");
  const original = { pods: readFileSync(pods, "utf8"), nodes: readFileSync(nodes, "utf8") };
  writeFileSync(pods, original.pods + pod("web-2", "node-a1"));
  const tookPod = await sendUntil(
    (r) => (r.byPod["web-2"] ?? 0) > 0 && r.ok === 12,
    10_000,
    "web-2 to answer",
  );
  assert.ok(namespaces(prefix).includes(`${prefix}web-2`));
  await logged(/pod default\/web-2 started on node-a1 \(203\.0\.113\.66\)/);
  // the live view counts the new pod (its node's counter table grew)
  await until(() => / web-2=\d+/.test(run.out), 10_000, `web-2 in the live view: ${run.out.slice(-1500)}`);

  // a new node with a pod of its own: namespace, agent, traffic
  writeFileSync(nodes, original.nodes + node("node-a2"));
  writeFileSync(pods, original.pods + pod("web-2", "node-a1") + pod("web-3", "node-a2"));
  const tookNode = await sendUntil((r) => (r.byPod["web-3"] ?? 0) > 0, 40_000, "web-3 on node-a2 to answer");
  // the new node's agent serves its health check: the LB takes it in
  await until(
    () => /node-a2=up\/w1/.test(run.out),
    40_000,
    `node-a2 healthy in the view: ${run.out.slice(-1500)}`,
  );
  await logged(/node node-a2 added in zone-a \(198\.51\.100\.12\)/);
  const grown = ["node-a2", "web-2", "web-3"].map((h) => `${prefix}${h}`);
  const grownPids = grown.flatMap((ns) =>
    (spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).stdout ?? "")
      .split("\n")
      .map(Number)
      .filter((n) => n > 1),
  );
  assert.ok(grownPids.length >= 3, `two echo servers and an agent run (${grownPids.length})`);

  // back to the start: the added hosts are torn down, traffic reaches web-1 only
  writeFileSync(nodes, original.nodes);
  writeFileSync(pods, original.pods);
  await until(
    () => grown.every((ns) => !namespaces(prefix).includes(ns)),
    15_000,
    `the added namespaces to go: ${namespaces(prefix).join(" ")}`,
  );
  assert.deepEqual(grownPids.filter(alive), [], "no process of the removed hosts remains");
  const lbRoutes = labExec(name, "lb", ["ip", "route", "show", "203.0.113.0/24"]).stdout;
  assert.doesNotMatch(lbRoutes, /203\.0\.113\.6[67]/, "the LB no longer routes the removed pods");
  assert.doesNotMatch(labExec(name, "lb", ["ip", "-o", "link"]).stdout, /plbn1@/, "node-a2's veth is gone");
  assert.doesNotMatch(
    labExec(name, "node-a1", ["ip", "-o", "link"]).stdout,
    /plbp1@/,
    "web-2's veth is gone",
  );
  const after = send();
  assert.equal(after.ok, 12, JSON.stringify(after));
  assert.deepEqual(Object.keys(after.byPod), ["web-1"]);

  // and again: the freed slot is taken by the next pod
  writeFileSync(pods, original.pods + pod("web-4", "node-a1"));
  await sendUntil((r) => (r.byPod["web-4"] ?? 0) > 0, 10_000, "web-4 to answer");
  await logged(/pod default\/web-4 started on node-a1 \(203\.0\.113\.66\)/);

  child.kill("SIGINT");
  assert.equal(await exited, 0, run.out.slice(-2000));
  assert.deepEqual(namespaces(prefix), [], "no namespace of the lab remains");
  assert.equal(hostLinks(), linksBefore, "no link was left in the caller's namespace");
  t.diagnostic(`a new pod answered after ${tookPod} ms, a new node's pod after ${tookNode} ms`);
});
