// The strict test API server behaves like kube-apiserver across requests: subresources,
// concurrency, watches, deletion, patches, selectors and RBAC (the deploy/ roles).
import assert from "node:assert/strict";
import { test } from "node:test";
import { admin, call } from "./fake-api-call.ts";
import { FakeApiServer, type FakeApiServerOptions } from "./fake-api-server.ts";

async function started(
  t: { after: (f: () => unknown) => void },
  o: FakeApiServerOptions = {},
): Promise<FakeApiServer> {
  const api = new FakeApiServer(o);
  await api.start();
  t.after(() => api.close());
  for (const name of ["passlb-system", "shop"])
    api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name } });
  return api;
}

const SERVICE = "/api/v1/namespaces/shop/services/web";
const POOL = "/apis/passlb.io/v1alpha1/loadbalancerippools/main";
const web = (extra: Record<string, unknown> = {}) => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name: "web", namespace: "shop", labels: { app: "web" } },
  spec: { type: "LoadBalancer", ports: [{ port: 80, protocol: "TCP" }] },
  ...extra,
});

test("subresources (registry strategies): the main resource ignores status, /status everything else", async (t) => {
  const api = await started(t);
  api.put(web({ status: { loadBalancer: { ingress: [{ ip: "203.0.113.1", ipMode: "VIP" }] } } }));
  const stored = (await admin(api, "GET", SERVICE)).body;
  const main = await admin(api, "PUT", SERVICE, {
    ...stored,
    status: { loadBalancer: { ingress: [{ ip: "203.0.113.9", ipMode: "VIP" }] } },
  });
  assert.equal(main.body.status.loadBalancer.ingress[0].ip, "203.0.113.1", "status kept on a main write");
  const status = await admin(api, "PUT", `${SERVICE}/status`, {
    ...main.body,
    metadata: { ...main.body.metadata, labels: { app: "changed" } },
    spec: { ...main.body.spec, type: "ClusterIP" },
    status: { loadBalancer: { ingress: [{ ip: "203.0.113.2", ipMode: "VIP" }] } },
  });
  assert.equal(status.body.spec.type, "LoadBalancer", "spec kept on a status write");
  assert.equal(status.body.status.loadBalancer.ingress[0].ip, "203.0.113.2");
  assert.deepEqual(
    status.body.metadata.labels,
    { app: "changed" },
    "a Service's status strategy resets only the spec",
  );
  api.put({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name: "main", labels: { a: "1" } },
    spec: { addresses: ["203.0.113.0/28"] },
  });
  const p = (await admin(api, "GET", POOL)).body;
  const made = await admin(api, "PUT", `${POOL}/status`, {
    ...p,
    metadata: { ...p.metadata, labels: { a: "2" } },
    spec: { addresses: ["192.0.2.0/24"] },
    status: { ipv4: { total: "16", used: 0 } },
  });
  assert.deepEqual(made.body.metadata.labels, { a: "1" }, "a custom resource's status write resets metadata");
  assert.deepEqual(made.body.spec.addresses, ["203.0.113.0/28"]);
  const back = await admin(api, "PUT", POOL, { ...made.body, status: { ipv4: { total: "1", used: 1 } } });
  assert.deepEqual(back.body.status, { ipv4: { total: "16", used: 0 } }, "and its main write keeps status");
});

test("concurrency (storage/etcd3): stale resourceVersion 409, existing name 409 AlreadyExists", async (t) => {
  const api = await started(t);
  const made = await admin(api, "POST", "/api/v1/namespaces/shop/services", web());
  assert.equal(made.status, 201);
  const again = await admin(api, "POST", "/api/v1/namespaces/shop/services", web());
  assert.equal(again.status, 409);
  assert.equal(again.body.reason, "AlreadyExists");
  assert.equal(again.body.message, 'services "web" already exists');
  await admin(api, "PUT", SERVICE, made.body);
  const stale = await admin(api, "PUT", SERVICE, made.body);
  assert.equal(stale.status, 409);
  assert.equal(stale.body.reason, "Conflict");
  assert.equal(
    stale.body.message,
    'Operation cannot be fulfilled on services "web": the object has been modified; please apply your changes to the latest version and try again',
  );
});

async function readWatch(api: FakeApiServer, query: string, until: (lines: string[]) => boolean, ms = 5000) {
  const started = Date.now();
  const res = await fetch(`${api.url}/api/v1/services?watch=true&${query}`, {
    headers: { authorization: "Bearer admin" },
  });
  const reader = res.body?.getReader();
  const lines: string[] = [];
  let ended = false;
  let buf = "";
  const deadline = setTimeout(() => void reader?.cancel(), ms);
  while (reader && !until(lines)) {
    const { done, value } = await reader.read();
    if (done) {
      ended = true;
      break;
    }
    buf += Buffer.from(value).toString("utf8");
    const parts = buf.split("\n");
    buf = parts.pop() ?? "";
    lines.push(...parts.filter((l) => l !== ""));
  }
  clearTimeout(deadline);
  if (!ended) await reader?.cancel();
  return {
    status: res.status,
    types: lines.map((l) => JSON.parse(l).type as string),
    ended,
    ms: Date.now() - started,
  };
}

test("watches (apiserver get.go, cacher): 410 from a compacted version, bookmarks, ended by the server", async (t) => {
  const api = await started(t, { maxWatchSeconds: 1, bookmarkMs: 100 });
  api.put(web());
  const rv = api.store.resourceVersion;
  api.put(web({ metadata: { name: "web", namespace: "shop", labels: { v: "2" } } }));
  api.compact();
  const gone = await readWatch(api, `resourceVersion=${rv}`, (l) => l.length > 0);
  assert.deepEqual(gone.types, ["ERROR"], "a compacted version is an ERROR event with 410 Expired");
  const marks = await readWatch(
    api,
    `resourceVersion=${api.store.resourceVersion}&allowWatchBookmarks=true`,
    (l) => l.length >= 2,
  );
  assert.deepEqual(marks.types, ["BOOKMARK", "BOOKMARK"], "bookmarks come by themselves");
  const ended = await readWatch(
    api,
    `resourceVersion=${api.store.resourceVersion}&timeoutSeconds=600`,
    () => false,
  );
  assert.ok(ended.ended, "the server closed the stream although the client asked for 600 s");
  assert.ok(ended.ms >= 900 && ended.ms < 4000, `after about maxWatchSeconds (${ended.ms} ms)`);
});

test("deletion (generic registry store.go, objectmeta.go, namespace lifecycle admission)", async (t) => {
  const api = await started(t);
  api.put(
    web({
      metadata: {
        name: "web",
        namespace: "shop",
        finalizers: ["service.kubernetes.io/load-balancer-cleanup"],
      },
    }),
  );
  const del = await admin(api, "DELETE", SERVICE);
  assert.equal(del.status, 200);
  const held = (await admin(api, "GET", SERVICE)).body;
  assert.ok(held.metadata.deletionTimestamp, "a finalizer keeps the object, marked");
  const more = await admin(api, "PUT", SERVICE, {
    ...held,
    metadata: { ...held.metadata, finalizers: [...held.metadata.finalizers, "example.com/other"] },
  });
  assert.equal(more.status, 422);
  assert.equal(
    more.body.message,
    'Service "web" is invalid: metadata.finalizers: Forbidden: no new finalizers can be added if the object is being deleted, found new finalizers []string{"example.com/other"}',
  );
  const done = await admin(api, "PUT", SERVICE, { ...held, metadata: { ...held.metadata, finalizers: [] } });
  assert.equal(done.status, 200);
  assert.equal((await admin(api, "GET", SERVICE)).status, 404, "gone once the last finalizer is removed");
  const missing = await admin(api, "POST", "/api/v1/namespaces/nowhere/events", {
    metadata: { generateName: "x." },
    involvedObject: { namespace: "nowhere" },
  });
  assert.equal(missing.status, 404);
  assert.equal(missing.body.message, 'namespaces "nowhere" not found');
  api.put({
    apiVersion: "v1",
    kind: "Namespace",
    metadata: { name: "shop", deletionTimestamp: "2026-01-01T00:00:00Z" },
    status: { phase: "Terminating" },
  });
  const ending = await admin(api, "POST", "/api/v1/namespaces/shop/services", web());
  assert.equal(ending.status, 403);
  assert.equal(
    ending.body.message,
    'services "web" is forbidden: unable to create new content in namespace shop because it is being terminated',
  );
});

test("patches (handlers/patch.go, customresource_handler.go): 415 strategic merge on a CR, null deletes, JSON patch test", async (t) => {
  const api = await started(t);
  api.put(web());
  api.put({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name: "main" },
    spec: { addresses: ["203.0.113.0/28"] },
  });
  const smp = await admin(
    api,
    "PATCH",
    POOL,
    { spec: { disabled: true } },
    "application/strategic-merge-patch+json",
  );
  assert.equal(smp.status, 415);
  assert.match(
    smp.body.message,
    /^the body of the request was in an unknown format - accepted media types include: application\/json-patch\+json, application\/merge-patch\+json/,
  );
  assert.equal(
    (
      await admin(
        api,
        "PATCH",
        SERVICE,
        { metadata: { labels: { app: "x" } } },
        "application/strategic-merge-patch+json",
      )
    ).status,
    200,
    "built-ins take it",
  );
  const nulled = await admin(
    api,
    "PATCH",
    SERVICE,
    { metadata: { labels: { app: null } } },
    "application/merge-patch+json",
  );
  assert.equal(nulled.body.metadata.labels?.app, undefined, "merge patch null deletes");
  const test = [
    { op: "test", path: "/spec/type", value: "ClusterIP" },
    { op: "replace", path: "/spec/type", value: "NodePort" },
  ];
  const failed = await admin(api, "PATCH", SERVICE, test, "application/json-patch+json");
  assert.equal(failed.status, 422);
  assert.match(failed.body.message, /testing value \/spec\/type failed/);
});

test("field selectors (core/v1/conversion.go): only the labels the resource supports", async (t) => {
  const api = await started(t);
  api.put(web());
  const ok = await admin(api, "GET", "/api/v1/services?fieldSelector=spec.type%3DLoadBalancer");
  assert.equal(ok.body.items.length, 1);
  const no = await admin(api, "GET", "/api/v1/services?fieldSelector=status.phase%3DRunning");
  assert.equal(no.status, 400);
  assert.equal(no.body.message, "field label not supported: status.phase");
  assert.equal((await admin(api, "GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn1")).status, 200);
  assert.equal(
    (
      await admin(
        api,
        "GET",
        "/apis/passlb.io/v1alpha1/loadbalancerippools?fieldSelector=spec.disabled%3Dtrue",
      )
    ).status,
    400,
  );
  assert.equal(
    (await admin(api, "GET", "/api/v1/nodes?watch=true&fieldSelector=metadata.namespace%3Dx")).status,
    400,
    "watches too",
  );
});

test("RBAC (plugin/pkg/auth/authorizer/rbac): deploy/'s grants per ServiceAccount, 403 with the real message", async (t) => {
  const api = await started(t);
  // the LB hosts may create Events (their wire checks' findings) but never hold a Lease
  const lb = await call(api, "lb", "POST", "/apis/coordination.k8s.io/v1/namespaces/shop/leases", {
    metadata: { name: "x" },
    spec: {},
  });
  assert.equal(lb.status, 403);
  assert.equal(
    lb.body.message,
    'leases.coordination.k8s.io is forbidden: User "system:serviceaccount:passlb-system:passlb-lb" cannot create resource "leases" in API group "coordination.k8s.io" in the namespace "shop"',
  );
  assert.equal((await call(api, "lb", "GET", "/api/v1/services")).status, 200);
  const status = await call(api, "lb", "PUT", `${SERVICE}/status`, web());
  assert.match(
    status.body.message,
    /cannot update resource "services\/status" in API group "" in the namespace "shop"$/,
  );
  const LEASES = "/apis/coordination.k8s.io/v1/namespaces/passlb-system/leases";
  assert.equal(
    (await call(api, "controller", "POST", LEASES, { metadata: { name: "passlb-controller" }, spec: {} }))
      .status,
    201,
    "create needs no name",
  );
  assert.equal((await call(api, "controller", "GET", `${LEASES}/passlb-controller`)).status, 200);
  const other = await call(api, "controller", "GET", `${LEASES}/someone-else`);
  assert.equal(
    other.body.message,
    'leases.coordination.k8s.io "someone-else" is forbidden: User "system:serviceaccount:passlb-system:passlb-controller" cannot get resource "leases" in API group "coordination.k8s.io" in the namespace "passlb-system"',
  );
  const elsewhere = await call(
    api,
    "controller",
    "GET",
    "/apis/coordination.k8s.io/v1/namespaces/shop/leases/passlb-controller",
  );
  assert.equal(elsewhere.status, 403, "a RoleBinding grants in its namespace only");
  const jane = await call(api, "jane", "GET", "/apis/passlb.io/v1alpha1/loadbalancerippools");
  assert.match(
    jane.body.message,
    /^loadbalancerippools\.passlb\.io is forbidden: User "jane" cannot list resource "loadbalancerippools" in API group "passlb.io" at the cluster scope$/,
  );
  assert.equal(
    (await call(api, "jane", "GET", "/apis")).status,
    200,
    "discovery for every authenticated user",
  );
  assert.equal((await call(api, undefined, "GET", "/apis")).status, 403, "not for anonymous");
  assert.equal((await call(api, undefined, "GET", "/version")).status, 200, "but /version is public");
  assert.equal((await call(api, "nobody", "GET", "/version")).status, 401, "an unknown token is 401");
});
