/**
 * The Kubernetes source (src/cluster/kube-source.ts) against the fake API server over HTTP
 * with the real client: first read, a bad object reported and left out, burst debouncing,
 * watch expiry and relist, the API server down and back.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import type { KubeResourceName } from "../../src/cluster/kube-source.ts";
import { clientNodeTransport } from "../../src/cluster/kube-transport.ts";
import type { RestartReason } from "../../src/cluster/kube-watch.ts";
import type { SourceRead } from "../../src/cluster/snapshot-source.ts";
import { DEFAULT_CONFIG } from "../../src/k8s/snapshot.ts";
import { FakeApiServer } from "../support/fake-api-server.ts";
import { eventually, fakeCluster, fixtureObjects, kubeSource } from "./kube-fixture.ts";

type OkRead = Extract<SourceRead, { ok: true }>;

function recorder() {
  const reads: OkRead[] = [];
  let changes = 0;
  return {
    reads,
    get changes() {
      return changes;
    },
    handlers: {
      onChange: () => {
        changes++;
      },
      onRead: (r: SourceRead) => {
        if (r.ok) reads.push(r);
      },
    },
    get last(): OkRead {
      const r = reads[reads.length - 1];
      if (!r) throw new Error("no read yet");
      return r;
    },
  };
}

const names = (xs: readonly { metadata: { name?: string | undefined } }[]) =>
  xs.map((x) => x.metadata.name ?? "").sort();

test("the first read has every resource decoded; a bad Service is reported and left out", async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const source = kubeSource(api);
  t.after(() => source.close());
  const rec = recorder();
  await source.start(rec.handlers);
  assert.equal(rec.reads.length, 1);
  const { snapshot, problems } = rec.last;
  assert.deepEqual(names(snapshot.services), ["pending", "web"]);
  assert.deepEqual(names(snapshot.nodes), ["node-a", "node-b"]);
  assert.deepEqual(names(snapshot.endpointSlices), ["web-1"]);
  // the fixture's namespace and the four every API server makes at start
  assert.deepEqual(names(snapshot.namespaces), [
    "default",
    "kube-node-lease",
    "kube-public",
    "kube-system",
    "shop",
  ]);
  assert.deepEqual(snapshot.pods, [], "pods are not watched unless asked");
  assert.equal(api.count("list", "pods"), 0);
  assert.equal(problems.length, 1);
  assert.match(problems[0] ?? "", /^Service shop\/broken: spec\.ports\[0\]\.port: /);
  // list items arrive without kind/apiVersion; the source restores them before decoding
  assert.equal(snapshot.services[0]?.kind, "Service");

  // fixing the object brings it in; the problem goes away
  const broken = api.find("v1", "Service", "broken", "shop")!;
  api.put({
    ...broken,
    spec: { ...(broken.spec as object), ports: [{ name: "http", port: 82, protocol: "TCP" }] },
  });
  await eventually(() => rec.last.snapshot.services.length === 3, "the fixed Service");
  assert.deepEqual(rec.last.problems, []);
});

test("a burst of 1,000 updates produces a handful of reads, and the last one has the final state", async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const source = kubeSource(api, { debounce: { quietMs: 100, maxMs: 1000 } });
  t.after(() => source.close());
  const rec = recorder();
  await source.start(rec.handlers);
  const before = rec.reads.length;
  const node = api.find("v1", "Node", "node-a")!;
  const started = Date.now();
  for (let i = 1; i <= 1000; i++) {
    api.put({ ...node, metadata: { ...node.metadata, labels: { "passlb.test/generation": String(i) } } });
    // let the watch stream deliver now and then, as a real burst arrives over time
    if (i % 100 === 0) await new Promise((r) => setTimeout(r, 5));
  }
  const label = () =>
    rec.last.snapshot.nodes.find((n) => n.metadata.name === "node-a")?.metadata.labels?.[
      "passlb.test/generation"
    ];
  await eventually(() => label() === "1000", "the last update");
  const elapsed = Date.now() - started;
  await new Promise((r) => setTimeout(r, 250)); // any read still pending would show now
  const reads = rec.reads.length - before;
  t.diagnostic(`${reads} reads for 1,000 updates in ${elapsed} ms`);
  // the 1 s ceiling allows one read per second of a long burst; on a quiet machine the
  // burst takes well under a second and this is at most 5 (a loaded CI machine may stretch it)
  const bound = Math.max(5, Math.ceil(elapsed / 1000) + 2);
  assert.ok(reads >= 1 && reads <= bound, `${reads} reads for 1,000 updates in ${elapsed} ms`);
  assert.ok(rec.changes >= 1000, "every change is announced at once");
  // the unchanged kinds keep their arrays: the planner's memo sees them as unchanged
  assert.equal(rec.last.snapshot.services, rec.reads[before - 1]?.snapshot.services);
});

test("watch expiry: a resume from a compacted resourceVersion relists and sees a deletion it missed", async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const restarts: string[] = [];
  const source = kubeSource(api, {
    onRestart: (resource: KubeResourceName, reason: RestartReason) => restarts.push(`${resource} ${reason}`),
  });
  t.after(() => source.close());
  const rec = recorder();
  await source.start(rec.handlers);
  await api.waitForWatches(4);
  const listsBefore = api.count("list", "services");
  // all in one tick: the source cannot re-watch between these steps
  api.closeWatches();
  api.remove("v1", "Service", "pending", "shop");
  api.compact();
  await eventually(() => names(rec.last.snapshot.services).join() === "web", "the relisted Services");
  assert.ok(restarts.includes("services expired"), restarts.join(", "));
  assert.equal(api.count("list", "services"), listsBefore + 1, "exactly one relist");
  assert.ok(restarts.includes("nodes closed"), "a plain close re-watches without a relist");
});

test("API server down: no reads, the last snapshot stays; back up: the changes made meanwhile converge", async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const restarts: string[] = [];
  const states: string[] = [];
  const source = kubeSource(api, {
    onRestart: (resource, reason) => restarts.push(`${resource} ${reason}`),
    onState: (resource, state) => states.push(`${resource} ${state}`),
  });
  t.after(() => source.close());
  const rec = recorder();
  await source.start(rec.handlers);
  await api.waitForWatches(4);
  const readsBefore = rec.reads.length;
  const last = rec.last.snapshot;

  await api.stop();
  await eventually(() => restarts.filter((r) => r.endsWith("error")).length >= 8, "failed reconnects");
  assert.equal(rec.reads.length, readsBefore, "no read while the API server is away");
  assert.equal(source.snapshot, last);
  assert.ok(states.includes("services backoff"));

  // the cluster changes while we cannot see it
  const node = api.find("v1", "Node", "node-b")!;
  api.put({ ...node, spec: { unschedulable: true } });
  api.remove("discovery.k8s.io/v1", "EndpointSlice", "web-1", "shop");
  await api.start();
  await eventually(
    () =>
      rec.last.snapshot.endpointSlices.length === 0 &&
      rec.last.snapshot.nodes.find((n) => n.metadata.name === "node-b")?.spec?.unschedulable === true,
    "the changes made while down",
  );
  assert.equal(api.count("list", "services"), 1, "resumed from the last resourceVersion, no relist needed");
});

test("a bearer token from the kubeconfig is sent on lists and watches; a wrong one backs off", async (t) => {
  const api = new FakeApiServer();
  await api.start();
  t.after(() => api.close());
  for (const o of fixtureObjects("cluster.yaml")) api.put(o);
  const source = kubeSource(api);
  t.after(() => source.close());
  const rec = recorder();
  await source.start(rec.handlers);
  assert.deepEqual(names(rec.last.snapshot.nodes), ["node-a", "node-b"]);

  const details: string[] = [];
  const kc = new KubeConfig();
  kc.loadFromString(api.kubeconfigYaml("lb").replace("token: lb", "token: wrong"));
  const denied = kubeSource(api, {
    transport: clientNodeTransport(kc),
    onRestart: (_r, reason, detail) => details.push(`${reason} ${detail}`),
  });
  t.after(() => denied.close());
  void denied.start(recorder().handlers);
  await eventually(() => details.length >= 4, "refused lists");
  assert.match(details[0] ?? "", /^error list: GET \/api\/v1\/\w+: HTTP 401 Unauthorized/);
  assert.equal(denied.synced, false);
});

test("asked for Pods and LoadBalancerIPPools: pods in the snapshot, pools after config.pools, a bad pool reported", async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  api.put({
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: "web-0", namespace: "shop", labels: { app: "web" } },
    spec: { nodeName: "node-a", containers: [{ name: "web", ports: [{ containerPort: 8080 }] }] },
    status: { podIP: "198.51.100.101", conditions: [{ type: "Ready", status: "True" }] },
  });
  const pool = (name: string, addresses: unknown) => ({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name },
    spec: { addresses },
  });
  api.put(pool("blue", ["203.0.113.0/28"]));
  api.put(pool("bad", "not-a-list"));
  const source = kubeSource(
    api,
    {
      pods: true,
      pools: true,
      config: {
        ...DEFAULT_CONFIG,
        pools: [{ name: "file", addresses: ["192.0.2.0/28"], autoAssign: true, avoidBuggyIPs: false }],
      },
    },
    "controller",
  );
  t.after(() => source.close());
  const rec = recorder();
  await source.start(rec.handlers);
  assert.deepEqual(names(rec.last.snapshot.pods), ["web-0"]);
  assert.deepEqual(
    rec.last.snapshot.config.pools.map((p) => p.name),
    ["file", "blue"],
  );
  assert.deepEqual(
    source.ipPools.map((p) => p.metadata.name),
    ["blue"],
  );
  assert.ok(rec.last.problems.some((p) => p.startsWith("LoadBalancerIPPool bad: spec.addresses: ")));
  const config = rec.last.snapshot.config;
  api.put(pool("green", ["203.0.113.16/28"]));
  await eventually(() => rec.last.snapshot.config.pools.length === 3, "the new pool");
  assert.notEqual(rec.last.snapshot.config, config, "a pool change is a new config");
  const node = api.find("v1", "Node", "node-b")!;
  const withGreen = rec.last.snapshot.config;
  api.put({ ...node, metadata: { ...node.metadata, labels: { changed: "yes" } } });
  await eventually(
    () => rec.last.snapshot.nodes.some((n) => n.metadata.labels?.changed === "yes"),
    "node change",
  );
  assert.equal(rec.last.snapshot.config, withGreen, "other changes keep the config object");
});
