/**
 * `passlb controller` against the fake API server (test/support/fake-api-server.ts) through
 * the real client-node: assignment and status, 409 on a status write, the API down and
 * back, leader failover between two replicas, class change, deletion with the finalizer,
 * pool exhaustion. Timings are shortened (lease 3 s) so the file stays fast.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { CoreV1Api, DiscoveryV1Api, type V1EndpointSlice } from "@kubernetes/client-node";
import { buildProgram } from "../../src/cli/program.ts";
import { ControllerRuntime } from "../../src/controller/controller-runtime.ts";
import { realClock } from "../../src/health/clock.ts";
import type { FakeApiServer } from "../support/fake-api-server.ts";
import { eventually, fakeCluster, fixtureObjects } from "./kube-fixture.ts";

const FINALIZER = "service.kubernetes.io/load-balancer-cleanup";
/** whole seconds (the Lease holds seconds), short for speed, with room for a loaded machine */
const FAST_ELECTION = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 250 };

// biome-ignore lint/suspicious/noExplicitAny: JSON from the fake API server, read only in assertions
type Obj = Record<string, any>;

function replica(api: FakeApiServer, identity: string, election = FAST_ELECTION): ControllerRuntime {
  return new ControllerRuntime({
    kubeConfig: api.kubeConfig("controller"),
    namespace: "passlb-system",
    identity,
    controller: { defaultClass: false, ipMode: "VIP" },
    election,
    clock: realClock(),
    random: Math.random,
    tuning: {
      debounce: { quietMs: 20, maxMs: 200 },
      sourceBackoff: { initialMs: 20, maxMs: 200 },
      loopBackoff: { initialMs: 20, maxMs: 200 },
    },
  });
}

async function cluster(): Promise<FakeApiServer> {
  return fakeCluster("../controller/cluster.yaml");
}

const svc = (api: FakeApiServer, name: string): Obj | undefined => api.find("v1", "Service", name, "shop");
const pool = (api: FakeApiServer): Obj | undefined =>
  api.find("passlb.io/v1alpha1", "LoadBalancerIPPool", "main");
const ips = (o: Obj | undefined): string[] => (o?.status?.loadBalancer?.ingress ?? []).map((i: Obj) => i.ip);
const condition = (o: Obj | undefined) =>
  (o?.status?.conditions ?? []).find((c: Obj) => c.type === "passlb.io/LoadBalancerReady");
const lateService = () => {
  const o = fixtureObjects("../controller/cluster.yaml").find(
    (x) => (x as Obj).metadata.name === "late",
  ) as Obj;
  return { ...o, metadata: { name: o.metadata.name, namespace: o.metadata.namespace } };
};

async function events(api: FakeApiServer, name: string): Promise<string[]> {
  const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
  const list = await core.listNamespacedEvent({ namespace: "shop" });
  return list.items.filter((e) => e.involvedObject.name === name).map((e) => `${e.type}/${e.reason}`);
}

/** Waits until the Events of `name` include every one of `wanted` (type/reason). */
async function recorded(api: FakeApiServer, name: string, wanted: string[]): Promise<void> {
  let seen: string[] = [];
  const deadline = Date.now() + 3000;
  while (Date.now() < deadline) {
    seen = await events(api, name);
    if (wanted.every((w) => seen.includes(w))) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.fail(`Events of ${name}: ${seen.join(", ")}; wanted ${wanted.join(", ")}`);
}

test("assigns addresses with the finalizer, status, Events and pool status; then writes nothing more", async (t) => {
  const api = await cluster();
  api.remove("v1", "Service", "late", "shop");
  const c = replica(api, "a");
  t.after(async () => {
    await c.stop();
    await api.close();
  });
  await c.start();
  await eventually(() => ips(svc(api, "web")).length === 1 && ips(svc(api, "db")).length === 1, "addresses");
  assert.deepEqual(ips(svc(api, "web")), ["203.0.113.10"]);
  assert.deepEqual(ips(svc(api, "db")), ["203.0.113.11"]);
  assert.equal(svc(api, "web")?.status.loadBalancer.ingress[0].ipMode, "VIP");
  assert.deepEqual(svc(api, "web")?.metadata.finalizers, [FINALIZER]);
  assert.equal(condition(svc(api, "web"))?.status, "True");
  assert.equal(condition(svc(api, "web"))?.reason, "AddressAssigned");
  assert.deepEqual(ips(svc(api, "foreign")), [], "another implementation's Service is left alone");
  assert.equal(svc(api, "foreign")?.metadata.finalizers, undefined);
  await eventually(() => pool(api)?.status?.ipv4?.used === 2, "pool status");
  assert.deepEqual(pool(api)?.status?.ipv4, {
    total: "2",
    used: 2,
  });
  assert.deepEqual((await events(api, "web")).sort(), [
    "Normal/EnsuredLoadBalancer",
    "Normal/EnsuringLoadBalancer",
  ]);

  // settled: another read of the same cluster writes nothing
  await new Promise((r) => setTimeout(r, 300));
  await c.loop.idle();
  api.resetCounts();
  const before = c.loop.passes;
  api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: "unrelated" } });
  await eventually(() => c.loop.passes > before, "a pass after the change", 5000);
  await c.loop.idle();
  // (the Lease renewals are the only updates)
  assert.equal(api.count("update", "services"), 0, "an unchanged cluster writes no Service");
  assert.equal(api.count("update", "passlb.io/loadbalancerippools"), 0, "nor a pool");
  assert.equal(api.count("create", "events"), 0, "nor an Event");
  assert.deepEqual(api.forbidden(), [], "nothing refused by deploy/'s RBAC");
});

test("a 409 on the status write is re-read and retried", async (t) => {
  const api = await cluster();
  api.remove("v1", "Service", "late", "shop");
  api.failNext({ verb: "update", resource: "services", subresource: "status", status: 409, count: 2 });
  const c = replica(api, "a");
  t.after(async () => {
    await c.stop();
    await api.close();
  });
  await c.start();
  await eventually(() => ips(svc(api, "web")).length === 1 && ips(svc(api, "db")).length === 1, "addresses");
  assert.ok(api.count("update", "services", "status") >= 4, "two refused status writes, then both written");
  assert.ok(api.count("get", "services") >= 2, "the refused objects were read again");
  assert.deepEqual([...ips(svc(api, "web")), ...ips(svc(api, "db"))].sort(), [
    "203.0.113.10",
    "203.0.113.11",
  ]);
});

test("API server down and back: writes resume, nothing is lost", async (t) => {
  const api = await cluster();
  api.remove("v1", "Service", "late", "shop");
  const c = replica(api, "a", { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 200 });
  t.after(async () => {
    await c.stop();
    await api.close();
  });
  await c.start();
  await eventually(() => ips(svc(api, "db")).length === 1, "addresses");
  await api.stop();
  api.put(lateService()); // created while the controller cannot see it
  api.remove("v1", "Service", "web", "shop"); // and web is gone without the finalizer dance
  await new Promise((r) => setTimeout(r, 400));
  await api.start();
  await eventually(() => ips(svc(api, "late")).length === 1, "the late Service's address", 8000);
  assert.deepEqual(ips(svc(api, "late")), ["203.0.113.10"], "web's address was free again");
  assert.deepEqual(ips(svc(api, "db")), ["203.0.113.11"], "db kept its address");
});

test("leader failover: the follower takes over within the lease duration and assigns no address twice", async (t) => {
  const api = await cluster();
  api.remove("v1", "Service", "late", "shop");
  api.remove("v1", "Service", "db", "shop");
  const a = replica(api, "replica-a");
  const b = replica(api, "replica-b");
  t.after(async () => {
    await a.stop({ release: false });
    await b.stop();
    await api.close();
  });
  await a.start();
  await eventually(() => a.elector.isLeader(), "a leads", 10_000);
  await b.start();
  await eventually(() => ips(svc(api, "web")).length === 1, "web's address");
  assert.ok(!b.elector.isLeader(), "one leader");
  assert.equal(
    (api.find("coordination.k8s.io/v1", "Lease", "passlb-controller", "passlb-system") as Obj | undefined)
      ?.spec.holderIdentity,
    "replica-a",
  );

  const killedAt = Date.now();
  await a.stop({ release: false }); // a crash: the Lease is not given up
  const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
  await core.createNamespacedService({ namespace: "shop", body: lateService() as never });
  await eventually(() => b.elector.isLeader(), "b takes over", 8000);
  const takeoverMs = Date.now() - killedAt;
  t.diagnostic(
    `takeover ${takeoverMs} ms after the leader stopped (lease ${FAST_ELECTION.leaseDurationMs} ms)`,
  );
  assert.ok(
    takeoverMs <= FAST_ELECTION.leaseDurationMs + 2 * FAST_ELECTION.retryPeriodMs + 500,
    `takeover after ${takeoverMs} ms`,
  );
  await eventually(() => ips(svc(api, "late")).length === 1, "late's address from the new leader");
  assert.deepEqual(ips(svc(api, "web")), ["203.0.113.10"], "web kept its address");
  assert.deepEqual(ips(svc(api, "late")), ["203.0.113.11"], "the new leader did not reuse web's address");
  const lease = api.find("coordination.k8s.io/v1", "Lease", "passlb-controller", "passlb-system") as
    | Obj
    | undefined;
  assert.equal(lease?.spec.holderIdentity, "replica-b");
  assert.equal(lease?.spec.leaseTransitions, 1);
});

test("class change releases; deletion removes the finalizer; the freed address goes to the next Service", async (t) => {
  const api = await cluster();
  api.remove("v1", "Service", "late", "shop");
  const c = replica(api, "a");
  t.after(async () => {
    await c.stop();
    await api.close();
  });
  await c.start();
  await eventually(() => ips(svc(api, "db")).length === 1, "addresses");
  const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);

  // class change (the fake does not enforce immutability; a type change takes the same path)
  const db = await core.readNamespacedService({ name: "db", namespace: "shop" });
  db.spec!.loadBalancerClass = "example.com/other";
  await core.replaceNamespacedService({ name: "db", namespace: "shop", body: db });
  await eventually(
    () => ips(svc(api, "db")).length === 0 && !(svc(api, "db")?.metadata.finalizers ?? []).length,
    "db released",
  );
  assert.equal(condition(svc(api, "db")), undefined, "passlb's condition is gone");
  await recorded(api, "db", ["Normal/DeletingLoadBalancer", "Normal/DeletedLoadBalancer"]);

  // deletion: the finalizer holds the object until passlb released the address
  await core.deleteNamespacedService({ name: "web", namespace: "shop" });
  await eventually(() => svc(api, "web") === undefined, "web deleted once the finalizer is removed");
  await core.createNamespacedService({ namespace: "shop", body: lateService() as never });
  await eventually(() => ips(svc(api, "late")).length === 1, "late's address");
  assert.deepEqual(ips(svc(api, "late")), ["203.0.113.10"]);
  await eventually(() => pool(api)?.status?.ipv4?.used === 1, "pool used 1");
});

test("pool exhaustion: the Service says why, an Event is recorded, the pool says it is full", async (t) => {
  const api = await cluster();
  const c = replica(api, "a");
  t.after(async () => {
    await c.stop();
    await api.close();
  });
  api.remove("v1", "Service", "late", "shop");
  await c.start();
  await eventually(() => ips(svc(api, "db")).length === 1, "two addresses given");
  const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
  await core.createNamespacedService({ namespace: "shop", body: lateService() as never });
  await eventually(() => condition(svc(api, "late"))?.status === "False", "late's condition");
  assert.equal(condition(svc(api, "late"))?.reason, "PoolExhausted");
  assert.deepEqual(ips(svc(api, "late")), []);
  await recorded(api, "late", ["Warning/SyncLoadBalancerFailed", "Warning/PoolExhausted"]);
  const main = pool(api);
  assert.deepEqual(main?.status?.ipv4, { total: "2", used: 2 });
  const exhausted = (main?.status?.conditions ?? []).find((x: Obj) => x.type === "passlb.io/Exhausted");
  assert.equal(exhausted?.status, "True");
});

test("passlb controller (the CLI) assigns, and gives the Lease up when it stops", async (t) => {
  const api = await cluster();
  api.remove("v1", "Service", "late", "shop");
  const dir = mkdtempSync(join(tmpdir(), "plb-controller-"));
  const stop = new AbortController();
  t.after(async () => {
    stop.abort();
    await api.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const kubeconfig = join(dir, "kubeconfig");
  writeFileSync(kubeconfig, api.kubeconfigYaml("controller"));
  let stderr = "";
  const program = buildProgram(
    { stdout: () => {}, stderr: (s) => (stderr += s), readStdin: async () => "" },
    () => {},
    () => stop.signal,
  );
  const run = program.parseAsync([
    "node",
    "passlb",
    "controller",
    "--kubeconfig",
    kubeconfig,
    "--namespace",
    "passlb-system",
    "--identity",
    "cli-replica",
    "--ip-mode",
    "Proxy",
    "--dashboard-address",
    "off",
  ]);
  await eventually(() => ips(svc(api, "web")).length === 1, "web's address", 8000);
  assert.equal(svc(api, "web")?.status.loadBalancer.ingress[0].ipMode, "Proxy");
  stop.abort();
  await run;
  const lease = api.find("coordination.k8s.io/v1", "Lease", "passlb-controller", "passlb-system") as
    | Obj
    | undefined;
  assert.equal(lease?.spec.holderIdentity, "", `the Lease is given up (${stderr.slice(0, 500)})`);
  assert.match(stderr, /"event":"leader_acquired"/);
});

test("--manage-endpointslices: passlb's own slices for its Services, once, and nobody else's", async (t) => {
  const api = await fakeCluster("../controller/slices.yaml");
  const c = new ControllerRuntime({
    kubeConfig: api.kubeConfig("controller"),
    namespace: "passlb-system",
    identity: "a",
    controller: { defaultClass: false, ipMode: "VIP" },
    election: FAST_ELECTION,
    manageEndpointSlices: true,
    clock: realClock(),
    random: Math.random,
    tuning: { debounce: { quietMs: 20, maxMs: 200 }, sourceBackoff: { initialMs: 20, maxMs: 200 } },
  });
  t.after(async () => {
    await c.stop();
    await api.close();
  });
  const discovery = api.kubeConfig("admin").makeApiClient(DiscoveryV1Api);
  const slices = async () => (await discovery.listNamespacedEndpointSlice({ namespace: "shop" })).items;
  await c.start();
  let ours: V1EndpointSlice[] = [];
  const end = Date.now() + 5000;
  while (Date.now() < end) {
    ours = (await slices()).filter(
      (s) =>
        s.metadata?.labels?.["endpointslice.kubernetes.io/managed-by"] ===
        "endpointslice-controller.passlb.io",
    );
    if (ours.length > 0 && ours[0]?.endpoints?.length === 2) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  assert.equal(ours.length, 1);
  assert.equal(ours[0]?.metadata?.labels?.["kubernetes.io/service-name"], "web");
  assert.deepEqual(ours[0]?.endpoints?.map((e) => e.addresses[0]).sort(), ["198.51.100.5", "198.51.100.6"]);
  assert.deepEqual(
    ours[0]?.ports?.map((p) => p.port),
    [8080],
  );
  // settled: a new read writes no slice, and the other controller's slice is as it was
  await new Promise((r) => setTimeout(r, 300));
  api.resetCounts();
  const before = c.loop.passes;
  api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: "unrelated" } });
  await eventually(() => c.loop.passes > before, "a pass after the change", 5000);
  await new Promise((r) => setTimeout(r, 200));
  const sliceWrites = (["create", "update", "patch", "delete"] as const).reduce(
    (n, verb) => n + api.count(verb, "discovery.k8s.io/endpointslices"),
    0,
  );
  assert.equal(sliceWrites, 0, "no slice writes once settled");
  assert.equal(api.count("create", "discovery.k8s.io/endpointslices"), 0, "created once");
  const other = (await slices()).find((s) => s.metadata?.name === "other-abcde");
  assert.equal(
    other?.metadata?.labels?.["endpointslice.kubernetes.io/managed-by"],
    "endpointslice-controller.k8s.io",
  );
  assert.equal(other?.endpoints?.length, 1);
});
