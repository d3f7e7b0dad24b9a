/**
 * The fake API server (test/support/fake-api-server.ts) against the real
 * @kubernetes/client-node 1.4.0: list, watch, 410 Gone, 409 Conflict, patches, finalizers,
 * injected failures, down and back on the same port.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  type ApiException,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  Watch,
} from "@kubernetes/client-node";
import { FakeApiServer } from "./fake-api-server.ts";

function service(name: string, extra: Record<string, unknown> = {}) {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "default" },
    spec: { type: "LoadBalancer", ports: [{ port: 80, protocol: "TCP" }] },
    ...extra,
  };
}

async function started(options = {}): Promise<FakeApiServer> {
  const api = new FakeApiServer(options);
  await api.start();
  return api;
}

interface Seen {
  readonly type: string;
  readonly name: string;
  readonly rv: string;
  readonly code?: number;
}

/** Opens a watch with the real client and collects its events until `done`. */
async function collect(api: FakeApiServer, path: string, rv: string) {
  const events: Seen[] = [];
  let finished: (err: unknown) => void = () => {};
  const ended = new Promise<unknown>((resolve) => {
    finished = resolve;
  });
  const ctrl = await new Watch(api.kubeConfig("admin")).watch(
    path,
    { resourceVersion: rv },
    (type, obj: { metadata?: { name?: string; resourceVersion?: string }; code?: number }) => {
      events.push({
        type,
        name: obj.metadata?.name ?? "",
        rv: obj.metadata?.resourceVersion ?? "",
        ...(obj.code !== undefined ? { code: obj.code } : {}),
      });
    },
    (err) => finished(err),
  );
  return { events, ended, abort: () => ctrl.abort() };
}

async function until(cond: () => boolean, ms = 3000): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error("condition not met in time");
    await new Promise((r) => setTimeout(r, 5));
  }
}

test("list carries the global resourceVersion; a watch from it sees later changes in order", async (t) => {
  const api = await started();
  t.after(() => api.close());
  const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
  await core.createNamespacedService({ namespace: "default", body: service("a") });
  await core.createNamespacedService({ namespace: "default", body: service("b") });
  const list = await core.listServiceForAllNamespaces();
  assert.deepEqual(
    list.items.map((s) => s.metadata?.name),
    ["a", "b"],
  );
  const listRv = list.metadata?.resourceVersion ?? "";
  assert.equal(listRv, api.store.resourceVersion);
  assert.ok(list.items[0]?.metadata?.uid, "uid set on create");
  assert.ok(list.items[0]?.metadata?.creationTimestamp, "creationTimestamp set on create");

  const w = await collect(api, "/api/v1/services", listRv);
  await api.waitForWatches(1, "services");
  await core.createNamespacedService({ namespace: "default", body: service("c") });
  await core.deleteNamespacedService({ name: "a", namespace: "default" });
  await until(() => w.events.length === 2);
  assert.deepEqual(
    w.events.map((e) => `${e.type} ${e.name}`),
    ["ADDED c", "DELETED a"],
  );
  assert.ok(Number(w.events[1]?.rv) > Number(w.events[0]?.rv), "resourceVersions increase");
  w.abort();
});

test("a watch from an old resourceVersion replays history; after compact() it ends with a 410 ERROR", async (t) => {
  const api = await started();
  t.after(() => api.close());
  const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
  const rv0 = api.store.resourceVersion;
  await core.createNamespacedService({ namespace: "default", body: service("a") });
  const replay = await collect(api, "/api/v1/namespaces/default/services", rv0);
  await until(() => replay.events.length === 1);
  assert.equal(replay.events[0]?.name, "a");
  replay.abort();

  api.compact();
  await core.createNamespacedService({ namespace: "default", body: service("b") });
  const gone = await collect(api, "/api/v1/services", rv0);
  const err = await gone.ended;
  assert.equal(err, null, "the stream ends normally after the ERROR event");
  assert.deepEqual(gone.events, [{ type: "ERROR", name: "", rv: "", code: 410 }]);

  api.goneAs = "http";
  const http = await collect(api, "/api/v1/services", rv0);
  const httpErr = (await http.ended) as { statusCode?: number };
  assert.equal(httpErr.statusCode, 410);
});

test("watch from resourceVersion 0 starts with the current objects as ADDED", async (t) => {
  const api = await started();
  t.after(() => api.close());
  api.put({ apiVersion: "v1", kind: "Node", metadata: { name: "n1" }, status: { addresses: [] } });
  api.put({ apiVersion: "v1", kind: "Node", metadata: { name: "n2" } });
  const w = await collect(api, "/api/v1/nodes", "0");
  await until(() => w.events.length === 2);
  assert.deepEqual(
    w.events.map((e) => `${e.type} ${e.name}`),
    ["ADDED n1", "ADDED n2"],
  );
  w.abort();
});

test("update with a stale resourceVersion is 409 Conflict; status writes keep the spec", async (t) => {
  const api = await started();
  t.after(() => api.close());
  const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
  const created = await core.createNamespacedService({
    namespace: "default",
    body: service("a", { status: { loadBalancer: { ingress: [{ ip: "192.0.2.9" }] } } }),
  });
  assert.equal(created.status?.loadBalancer?.ingress, undefined, "status dropped on create");
  const stale = structuredClone(created);
  created.status = { loadBalancer: { ingress: [{ ip: "192.0.2.10" }] } };
  const written = await core.replaceNamespacedServiceStatus({
    name: "a",
    namespace: "default",
    body: created,
  });
  assert.equal(written.status?.loadBalancer?.ingress?.[0]?.ip, "192.0.2.10");

  stale.status = { loadBalancer: { ingress: [{ ip: "192.0.2.11" }] } };
  await assert.rejects(
    core.replaceNamespacedServiceStatus({ name: "a", namespace: "default", body: stale }),
    (e: ApiException<unknown>) => e.code === 409,
  );
  // a spec change through /status is ignored, a status change through the main resource too
  written.spec = { ...written.spec, ports: [{ port: 81, protocol: "TCP" }] };
  const again = await core.replaceNamespacedServiceStatus({ name: "a", namespace: "default", body: written });
  assert.equal(again.spec?.ports?.[0]?.port, 80);
  again.status = {};
  const main = await core.replaceNamespacedService({ name: "a", namespace: "default", body: again });
  assert.equal(main.status?.loadBalancer?.ingress?.[0]?.ip, "192.0.2.10");
});

test("merge and JSON patches; finalizers hold a delete until they are removed", async (t) => {
  const api = await started();
  t.after(() => api.close());
  const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
  const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
  const jsonp = setHeaderOptions("Content-Type", PatchStrategy.JsonPatch);
  await core.createNamespacedService({ namespace: "default", body: service("a") });
  await core.patchNamespacedService(
    {
      name: "a",
      namespace: "default",
      body: { metadata: { finalizers: ["service.kubernetes.io/load-balancer-cleanup"] } },
    },
    merge,
  );
  await core.patchNamespacedServiceStatus(
    {
      name: "a",
      namespace: "default",
      body: { status: { loadBalancer: { ingress: [{ ip: "192.0.2.1" }] } } },
    },
    merge,
  );
  const w = await collect(api, "/api/v1/services", api.store.resourceVersion);
  await api.waitForWatches(1);
  const deleting = await core.deleteNamespacedService({ name: "a", namespace: "default" });
  assert.ok((deleting as { metadata?: { deletionTimestamp?: unknown } }).metadata?.deletionTimestamp);
  const held = await core.readNamespacedService({ name: "a", namespace: "default" });
  assert.ok(held.metadata?.deletionTimestamp, "still there, marked for deletion");
  assert.equal(held.status?.loadBalancer?.ingress?.[0]?.ip, "192.0.2.1");

  await core.patchNamespacedService(
    {
      name: "a",
      namespace: "default",
      body: [
        { op: "test", path: "/metadata/resourceVersion", value: held.metadata?.resourceVersion },
        { op: "remove", path: "/metadata/finalizers" },
      ],
    },
    jsonp,
  );
  await assert.rejects(
    core.readNamespacedService({ name: "a", namespace: "default" }),
    (e: ApiException<unknown>) => e.code === 404,
  );
  await until(() => w.events.length === 2);
  assert.deepEqual(
    w.events.map((e) => e.type),
    ["MODIFIED", "DELETED"],
  );
  w.abort();
});

test("injected failures, request counts, a cluster-scoped custom resource with /status", async (t) => {
  const api = await started();
  t.after(() => api.close());
  const kc = api.kubeConfig("admin");
  const custom = kc.makeApiClient(CustomObjectsApi);
  const merge = setHeaderOptions("Content-Type", PatchStrategy.MergePatch);
  const pool = {
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name: "p1" },
    spec: { addresses: ["192.0.2.0/28"] },
  };
  const ids = { group: "passlb.io", version: "v1alpha1", plural: "loadbalancerippools" };
  await custom.createClusterCustomObject({ ...ids, body: pool });
  api.failNext({
    verb: "patch",
    resource: "passlb.io/loadbalancerippools",
    subresource: "status",
    count: 2,
    status: 500,
  });
  const patchStatus = () =>
    custom.patchClusterCustomObjectStatus(
      { ...ids, name: "p1", body: { status: { ipv4: { total: "16", used: 1 } } } },
      merge,
    );
  await assert.rejects(patchStatus(), (e: ApiException<unknown>) => e.code === 500);
  await assert.rejects(patchStatus(), (e: ApiException<unknown>) => e.code === 500);
  const ok = (await patchStatus()) as { status?: { ipv4?: { used?: number } }; spec?: unknown };
  assert.equal(ok.status?.ipv4?.used, 1);
  assert.equal(api.count("patch", "passlb.io/loadbalancerippools", "status"), 3);
  assert.equal(api.count("create"), 1);
  const list = (await custom.listClusterCustomObject(ids)) as { items: { kind?: string }[] };
  assert.equal(list.items[0]?.kind, "LoadBalancerIPPool", "custom list items keep their kind");
});

test("stop() cuts open watches and refuses connections; start() comes back on the same port", async (t) => {
  const api = await started();
  t.after(() => api.close());
  const kc = api.kubeConfig("admin");
  const core = kc.makeApiClient(CoreV1Api);
  const port = api.port;
  const w = await collect(api, "/api/v1/services", "0");
  await api.waitForWatches(1);
  await api.stop();
  await w.ended; // resolves only when the client saw the stream end
  assert.equal(api.openWatches(), 0);
  assert.equal(api.running, false);
  await assert.rejects(core.listServiceForAllNamespaces());
  api.put(service("while-down"));
  await api.start();
  assert.equal(api.port, port);
  const list = await core.listServiceForAllNamespaces();
  assert.deepEqual(
    list.items.map((s) => s.metadata?.name),
    ["while-down"],
  );
  const anonymous = await fetch(`${api.url}/api/v1/services`);
  assert.equal(anonymous.status, 403, "no token: system:anonymous, who may list nothing");
  assert.match(
    ((await anonymous.json()) as { message: string }).message,
    /^services is forbidden: User "system:anonymous" cannot list resource "services" in API group "" at the cluster scope$/,
  );
  const wrong = await fetch(`${api.url}/api/v1/services`, { headers: { authorization: "Bearer nope" } });
  assert.equal(wrong.status, 401, "an unknown token is refused");
});

test("closeWatches ends streams cleanly; a label selector filters list and watch", async (t) => {
  const api = await started();
  t.after(() => api.close());
  api.put({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: "s1", namespace: "default", labels: { "kubernetes.io/service-name": "a" } },
    addressType: "IPv4",
    endpoints: [],
  });
  api.put({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: "s2", namespace: "default", labels: { "kubernetes.io/service-name": "b" } },
    addressType: "IPv4",
    endpoints: [],
  });
  const res = await fetch(
    `${api.url}/apis/discovery.k8s.io/v1/endpointslices?labelSelector=${encodeURIComponent("kubernetes.io/service-name=a")}`,
    { headers: { authorization: "Bearer admin" } },
  );
  const list = (await res.json()) as { items: { metadata: { name: string }; kind?: string }[] };
  assert.deepEqual(
    list.items.map((i) => i.metadata.name),
    ["s1"],
  );
  assert.equal(list.items[0]?.kind, undefined, "built-in list items have no kind, as the real server sends");
  const w = await collect(api, "/apis/discovery.k8s.io/v1/endpointslices", "0");
  await until(() => w.events.length === 2);
  api.closeWatches();
  assert.equal(await w.ended, null);
  assert.equal(api.openWatches(), 0);
});
