// Standalone mode (issue 3 §3): slicesForSnapshot adds the controllers' slices where the
// input has none, and leaves Services whose slices are given alone.
import assert from "node:assert/strict";
import { test } from "node:test";
import { node, pod, service } from "../../test/support/endpointslice-builders.ts";
import { dns1123Subdomain } from "../k8s/names.ts";
import type { EndpointSlice, Endpoints } from "../k8s/objects.ts";
import { emptySnapshot, type Snapshot } from "../k8s/snapshot.ts";
import { seededRandom } from "../net/seeded-random.ts";
import {
  podSelector,
  reconcileSnapshot,
  selectPods,
  slicesByService,
  slicesForSnapshot,
} from "./snapshot-slices.ts";

const ext: Endpoints = {
  apiVersion: "v1",
  kind: "Endpoints",
  metadata: { name: "ext", namespace: "default", uid: "uid-ep" },
  subsets: [{ addresses: [{ ip: "192.0.2.10" }], ports: [{ name: "http", port: 80, protocol: "TCP" }] }],
};

const snapshot = (slices: EndpointSlice[] = []): Snapshot => ({
  ...emptySnapshot(),
  services: [
    service("web"),
    service("ext", (s) => {
      s.spec.selector = null;
    }),
  ],
  pods: [pod(0, "web", undefined, 1), pod(1, "web", undefined, 1), pod(2, "other", undefined, 1)],
  nodes: [node("node-0", "zone-a")],
  endpoints: [ext],
  endpointSlices: slices,
});

test("Services without slices get the controller's and the mirroring controller's, with stable valid names", () => {
  const a = slicesForSnapshot(snapshot());
  const names = a.endpointSlices.map((s) => s.metadata.name ?? "");
  assert.equal(a.endpointSlices.length, 2);
  assert.deepEqual(
    a.endpointSlices.map((s) => [s.metadata.labels?.["kubernetes.io/service-name"], s.endpoints?.length]),
    [
      ["ext", 1],
      ["web", 2],
    ],
  );
  for (const n of names) assert.equal(dns1123Subdomain(n), undefined, n);
  assert.match(names[1]!, /^web-[bcdfghjklmnpqrstvwxz2456789]{5}$/);
  assert.deepEqual(
    slicesForSnapshot(snapshot()).endpointSlices.map((s) => s.metadata.name),
    names,
  );
  assert.deepEqual(a.findings, []);
});

test("a Service whose slices are in the input keeps exactly those", () => {
  const given = slicesForSnapshot(snapshot()).endpointSlices.filter(
    (s) => s.metadata.labels?.["kubernetes.io/service-name"] === "web",
  );
  const b = slicesForSnapshot(snapshot(given));
  assert.equal(
    b.endpointSlices.filter((s) => s.metadata.labels?.["kubernetes.io/service-name"] === "web").length,
    1,
  );
  assert.equal(b.endpointSlices[0], given[0]);
  // and the controller agrees nothing needs writing
  const writes = reconcileSnapshot(snapshot(b.endpointSlices));
  assert.deepEqual(
    writes.map((w) => [w.service, w.create.length + w.update.length + w.delete.length]),
    [["default/web", 0]],
  );
});

test("selectors match labels in the Service's namespace; an empty selector matches every Pod there", () => {
  const pods = [
    pod(0, "web"),
    pod(1, "other"),
    pod(2, "web", (p) => {
      p.metadata.namespace = "elsewhere";
    }),
  ];
  assert.deepEqual(
    selectPods(service("web"), pods).map((p) => p.metadata.name),
    ["web-0"],
  );
  const all = service("web", (s) => {
    s.spec.selector = {};
  });
  assert.deepEqual(
    selectPods(all, pods).map((p) => p.metadata.name),
    ["web-0", "other-1"],
  );
});

test("podSelector selects the same Pods in the same order as selectPods, for any selector", () => {
  const rand = seededRandom(3);
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  const pods = Array.from({ length: 400 }, (_, i) =>
    pod(i, "x", (p) => {
      p.metadata.namespace = pick(["a", "b", "c"]);
      const labels: Record<string, string> = {};
      for (const k of ["app", "tier", "constructor"]) if (rand() < 0.7) labels[k] = pick(["1", "2", "3"]);
      p.metadata.labels = rand() < 0.1 ? undefined : labels;
    }),
  );
  const select = podSelector(pods);
  for (let i = 0; i < 300; i++) {
    const selector: Record<string, string> = {};
    for (const k of ["tier", "app", "constructor", "missing"])
      if (rand() < 0.4) selector[k] = pick(["1", "2", "3"]);
    const svc = service(`s${i}`, (s) => {
      s.metadata.namespace = pick(["a", "b", "c", "d"]);
      s.spec.selector = selector;
    });
    assert.deepEqual(select(svc), selectPods(svc, pods), JSON.stringify(svc.spec.selector));
  }
});

test("slicesByService hands a Service only the slices labelled with its name in its namespace", () => {
  const slice = (namespace: string, name: string, svc?: string): EndpointSlice => ({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name,
      namespace,
      ...(svc !== undefined && { labels: { "kubernetes.io/service-name": svc } }),
    },
    addressType: "IPv4",
    endpoints: [],
  });
  const all = [
    slice("default", "w1", "web"),
    slice("other", "w2", "web"),
    slice("default", "x", "db"),
    slice("default", "n"),
  ];
  const of = slicesByService(all);
  assert.deepEqual(
    of(service("web")).map((s) => s.metadata.name),
    ["w1"],
  );
  assert.deepEqual(of(service("none")), []);
});
