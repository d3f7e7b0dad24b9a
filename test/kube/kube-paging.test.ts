/**
 * Paged lists against the fake API server over HTTP with the real client: the transport and
 * the reflector read a long collection in `limit`-sized pages from one snapshot, watch from
 * the first page's resourceVersion, and fall back to one full list when the continue token
 * expires mid-list (compaction, or the fake's expireContinueTokens hook).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { clientNodeTransport } from "../../src/cluster/kube-transport.ts";
import { ResourceReflector, type RestartReason } from "../../src/cluster/kube-watch.ts";
import { realClock } from "../../src/health/clock.ts";
import { FakeApiServer } from "../support/fake-api-server.ts";
import { eventually, kubeSource } from "./kube-fixture.ts";

const PODS = 120;

function pod(name: string) {
  return {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name, namespace: "shop", labels: { app: "web" } },
    spec: { nodeName: "node-a", containers: [{ name: "web", image: "web:1" }] },
    status: { phase: "Running", podIP: "10.1.0.1" },
  };
}

async function podCluster(t: { after: (fn: () => unknown) => void }): Promise<FakeApiServer> {
  const api = new FakeApiServer();
  await api.start();
  t.after(() => api.close());
  for (let i = 0; i < PODS; i++) api.put(pod(`pod-${String(i).padStart(3, "0")}`));
  return api;
}

function reflector(api: FakeApiServer, pageSize: number) {
  const restarts: { reason: RestartReason; detail: string }[] = [];
  const watchedFrom: string[] = [];
  const r = new ResourceReflector({
    resource: "pods",
    path: "/api/v1/pods",
    kind: "Pod",
    apiVersion: "v1",
    transport: clientNodeTransport(api.kubeConfig("controller")),
    clock: realClock(),
    random: Math.random,
    backoff: { initialMs: 20, maxMs: 200 },
    pageSize,
    onChange: () => {},
    onRestart: (reason, detail) => restarts.push({ reason, detail }),
    onState: (state, detail) => {
      if (state === "watching") watchedFrom.push(detail.replace("from resourceVersion ", ""));
    },
  });
  return { r, restarts, watchedFrom };
}

const names = (items: readonly unknown[]) =>
  items.map((o) => (o as { metadata: { name: string } }).metadata.name).sort();

test("a list longer than the limit comes in pages from one snapshot, at the first page's version", {
  timeout: 10_000,
}, async (t) => {
  const api = await podCluster(t);
  const before = api.store.resourceVersion;
  const pages: number[] = [];
  api.onListPage = (p) => {
    pages.push(p.items);
    // the cluster moves on while the client pages: not in this list, but in the history
    if (p.page === 1) {
      api.put(pod("pod-new"));
      api.remove("v1", "Pod", "pod-000", "shop");
    }
  };
  const list = await clientNodeTransport(api.kubeConfig("controller")).list("/api/v1/pods", { limit: 50 });
  assert.deepEqual(pages, [50, 50, 20]);
  assert.equal(api.count("list", "pods"), 3);
  assert.equal(list.items.length, PODS);
  assert.ok(names(list.items).includes("pod-000"), "a deletion after the first page is not in the list");
  assert.ok(!names(list.items).includes("pod-new"), "nor an object created after it");
  assert.equal(list.resourceVersion, before);
  assert.notEqual(api.store.resourceVersion, before);
  assert.equal(list.fallback, undefined);
  assert.equal(api.openLists, 0, "the fake dropped the finished list's snapshot");

  api.resetCounts();
  const whole = await clientNodeTransport(api.kubeConfig("controller")).list("/api/v1/pods", { limit: 0 });
  assert.equal(api.count("list", "pods"), 1);
  assert.equal(whole.items.length, PODS);
});

test("the reflector pages, then its watch from the list's version sees what changed during the list", {
  timeout: 10_000,
}, async (t) => {
  const api = await podCluster(t);
  const listedAt = api.store.resourceVersion;
  api.onListPage = (p) => {
    if (p.page === 2) {
      api.put(pod("pod-late"));
      api.remove("v1", "Pod", "pod-001", "shop");
    }
  };
  const { r, restarts, watchedFrom } = reflector(api, 50);
  t.after(() => r.stop());
  r.start();
  await eventually(
    () => r.synced && r.objects.has("shop/pod-late") && !r.objects.has("shop/pod-001"),
    "the watch",
  );
  assert.equal(api.count("list", "pods"), 3, "three pages of at most 50");
  assert.deepEqual(watchedFrom, [listedAt], "the watch resumed from the first page's version");
  assert.equal(r.objects.size, PODS);
  assert.deepEqual(restarts, []);
});

test("a continue token expired by compaction mid-list: one full list instead, the store complete", {
  timeout: 10_000,
}, async (t) => {
  const api = await podCluster(t);
  api.onListPage = (p) => {
    if (p.page === 2 && p.more) {
      api.put(pod("pod-late"));
      api.compact();
    }
  };
  const { r, restarts, watchedFrom } = reflector(api, 50);
  t.after(() => r.stop());
  r.start();
  await eventually(() => r.synced && r.state === "watching", "synced");
  // pages 1 and 2, page 3 refused (410 Expired), then one unpaginated list
  assert.equal(api.count("list", "pods"), 4);
  assert.equal(r.objects.size, PODS + 1);
  assert.ok(r.objects.has("shop/pod-late"), "the full list is read after the change");
  assert.deepEqual(
    restarts.map((x) => x.reason),
    ["continue_expired"],
  );
  assert.match(restarts[0]?.detail ?? "", /continue token expired on page 3, after 100 items/);
  assert.deepEqual(watchedFrom, [api.store.resourceVersion], "watching from the full list's version");
  assert.equal(api.openLists, 0);
});

test("the source lists Pods in pages of its pageSize; an expired token is counted and the snapshot is whole", {
  timeout: 10_000,
}, async (t) => {
  const api = await podCluster(t);
  api.onListPage = (p) => {
    if (p.resource === "pods" && p.page === 1) api.expireContinueTokens();
  };
  const restarts: string[] = [];
  const source = kubeSource(
    api,
    {
      pods: true,
      pageSize: 40,
      onRestart: (resource, reason) => restarts.push(`${resource} ${reason}`),
    },
    "controller",
  );
  t.after(() => source.close());
  let pods = 0;
  await source.start({
    onChange: () => {},
    onRead: (read) => {
      if (read.ok) pods = read.snapshot.pods.length;
    },
  });
  assert.equal(pods, PODS);
  assert.equal(api.count("list", "pods"), 3, "page 1, page 2 refused, the full list");
  assert.deepEqual(restarts, ["pods continue_expired"]);
});

test("the fake refuses a continue token that is not its own (400) and one whose list is finished (410)", {
  timeout: 10_000,
}, async (t) => {
  const api = await podCluster(t);
  type ListBody = {
    items: unknown[];
    reason?: string;
    metadata: { resourceVersion?: string; continue?: string; remainingItemCount?: number };
  };
  const get = async (query: string) => {
    const res = await fetch(`${api.url}/api/v1/pods?${query}`, {
      headers: { authorization: "Bearer admin" },
    });
    return { status: res.status, body: (await res.json()) as ListBody };
  };
  const first = await get("limit=100");
  assert.equal(first.status, 200);
  assert.equal(first.body.items.length, 100);
  assert.equal(first.body.metadata.remainingItemCount, PODS - 100);
  const token = String(first.body.metadata.continue);
  const last = await get(`limit=100&continue=${encodeURIComponent(token)}`);
  assert.equal(last.body.items.length, PODS - 100);
  assert.equal(last.body.metadata.continue, undefined);
  assert.equal(last.body.metadata.resourceVersion, first.body.metadata.resourceVersion);
  const again = await get(`limit=100&continue=${encodeURIComponent(token)}`);
  assert.equal(again.status, 410);
  assert.equal(again.body.reason, "Expired");
  assert.equal((await get("limit=100&continue=bm90LWEtdG9rZW4")).status, 400);
  const other = await get("limit=10");
  const wrong = await fetch(
    `${api.url}/api/v1/nodes?limit=10&continue=${encodeURIComponent(String(other.body.metadata.continue))}`,
    { headers: { authorization: "Bearer admin" } },
  );
  assert.equal(wrong.status, 400, "a token of the pods list does not page nodes");
});
