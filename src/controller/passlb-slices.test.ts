import assert from "node:assert/strict";
import { test } from "node:test";
import { MANAGED_BY_LABEL } from "../endpoints/service-slices.ts";
import type { EndpointSlice, Node, Pod, Service } from "../k8s/objects.ts";
import { emptySnapshot, type Snapshot } from "../k8s/snapshot.ts";
import { PASSLB_SLICE_MANAGER, passlbSliceWrites } from "./passlb-slices.ts";

const service = (name: string, cls: string): Service => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace: "shop", uid: `uid-${name}` },
  spec: {
    type: "LoadBalancer",
    loadBalancerClass: cls,
    clusterIP: "10.96.0.20",
    ipFamilies: ["IPv4"],
    selector: { app: name },
    ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }],
  },
});

const pod = (app: string, ip: string): Pod => ({
  apiVersion: "v1",
  kind: "Pod",
  metadata: { name: `${app}-${ip}`, namespace: "shop", uid: `pod-${ip}`, labels: { app } },
  spec: { nodeName: "node-a", containers: [{ name: "c" }] },
  status: { phase: "Running", podIP: ip, podIPs: [{ ip }], conditions: [{ type: "Ready", status: "True" }] },
});

const node: Node = {
  apiVersion: "v1",
  kind: "Node",
  metadata: { name: "node-a" },
  spec: {},
  status: { addresses: [{ type: "InternalIP", address: "192.0.2.11" }] },
};

function snapshot(slices: EndpointSlice[]): Snapshot {
  return {
    ...emptySnapshot(),
    services: [service("web", "passlb.io/l4"), service("foreign", "example.com/lb")],
    pods: [pod("web", "198.51.100.5"), pod("foreign", "198.51.100.6")],
    nodes: [node],
    endpointSlices: slices,
  };
}

test("slices for passlb's Services only, with passlb's managed-by; once written, nothing more", () => {
  const first = passlbSliceWrites(snapshot([]), false);
  assert.deepEqual(
    first.map((w) => w.service),
    ["shop/web"],
  );
  const created = first[0]!.create;
  assert.equal(created.length, 1);
  assert.equal(created[0]?.metadata.labels?.[MANAGED_BY_LABEL], PASSLB_SLICE_MANAGER);
  assert.deepEqual(
    created[0]?.endpoints?.map((e) => e.addresses[0]),
    ["198.51.100.5"],
  );
  const stored = created.map((s, i) => ({
    ...s,
    metadata: { ...s.metadata, name: `web-${i}`, resourceVersion: "5" },
  }));
  assert.deepEqual(
    passlbSliceWrites(snapshot(stored), false),
    [],
    "written slices are recognised as passlb's",
  );
});

test("a slice managed by Kubernetes' controller is neither reused nor deleted", () => {
  const theirs: EndpointSlice = {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      name: "web-k8s",
      namespace: "shop",
      labels: { "kubernetes.io/service-name": "web", [MANAGED_BY_LABEL]: "endpointslice-controller.k8s.io" },
      ownerReferences: [{ apiVersion: "v1", kind: "Service", name: "web", uid: "uid-web" }],
    },
    addressType: "IPv4",
    endpoints: [],
    ports: [],
  };
  const w = passlbSliceWrites(snapshot([theirs]), false);
  assert.equal(w[0]?.create.length, 1, "passlb writes its own");
  assert.deepEqual(w[0]?.update, []);
  assert.deepEqual(w[0]?.delete, []);
});
