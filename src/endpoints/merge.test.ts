import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import type { EndpointSlice } from "../k8s/objects.ts";
import { categorizeEndpoints } from "./categorize.ts";
import {
  endpointsPerNode,
  localReadyEndpointCount,
  mergeServiceEndpoints,
  slicesByService,
} from "./merge.ts";

interface Ep {
  ip: number;
  node: number;
  ready: boolean;
  serving: boolean;
  terminating: boolean;
}

function slice(name: string, eps: readonly Ep[], port = 80, portName = ""): EndpointSlice {
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name, namespace: "ns", labels: { "kubernetes.io/service-name": "svc" } },
    addressType: "IPv4",
    ports: [{ name: portName, port, protocol: "TCP" }],
    endpoints: eps.map((e) => ({
      addresses: [`192.0.2.${e.ip}`],
      conditions: { ready: e.ready, serving: e.serving, terminating: e.terminating },
      nodeName: `node-${e.node}`,
    })),
  };
}

const epArb = fc.record({
  ip: fc.integer({ min: 1, max: 12 }),
  node: fc.integer({ min: 1, max: 4 }),
  ready: fc.boolean(),
  serving: fc.boolean(),
  terminating: fc.boolean(),
});
const slicesArb = fc.array(fc.array(epArb, { maxLength: 10 }), { minLength: 1, maxLength: 4 });

test("property: no endpoint is lost or duplicated in a merge", () => {
  fc.assert(
    fc.property(slicesArb, (groups) => {
      const slices = groups.map((eps, i) => slice(`s-${i}`, eps));
      const { ports } = mergeServiceEndpoints(slices);
      const keys = ports.flatMap((p) => p.endpoints.map((e) => e.key));
      assert.equal(new Set(keys).size, keys.length, "an endpoint appears twice");
      const expected = new Set(groups.flat().map((e) => `192.0.2.${e.ip}:80`));
      assert.deepEqual(new Set(keys), expected);
    }),
  );
});

test("property: a non-terminating copy of an endpoint always beats a terminating one", () => {
  fc.assert(
    fc.property(slicesArb, (groups) => {
      const slices = groups.map((eps, i) => slice(`s-${i}`, eps));
      const { ports } = mergeServiceEndpoints(slices);
      for (const e of ports[0]?.endpoints ?? []) {
        const ip = Number(e.address.split(".")[3]);
        const anyLive = groups.flat().some((x) => x.ip === ip && !x.terminating);
        assert.equal(e.terminating, !anyLive);
      }
    }),
  );
});

test("between two non-terminating copies the later slice wins; between terminating ones the first", () => {
  const a = slice("a", [{ ip: 1, node: 1, ready: true, serving: true, terminating: false }]);
  const b = slice("b", [{ ip: 1, node: 2, ready: true, serving: true, terminating: false }]);
  assert.equal(mergeServiceEndpoints([b, a]).ports[0]?.endpoints[0]?.nodeName, "node-2");
  const ta = slice("a", [{ ip: 1, node: 1, ready: false, serving: true, terminating: true }]);
  const tb = slice("b", [{ ip: 1, node: 2, ready: false, serving: true, terminating: true }]);
  assert.equal(mergeServiceEndpoints([ta, tb]).ports[0]?.endpoints[0]?.nodeName, "node-1");
});

test("nil conditions: ready and serving default to true, terminating to false (kube-proxy, not the API doc)", () => {
  const s = slice("a", []);
  const merged = mergeServiceEndpoints([{ ...s, endpoints: [{ addresses: ["192.0.2.9"], conditions: {} }] }]);
  const e = merged.ports[0]?.endpoints[0];
  assert.deepEqual([e?.ready, e?.serving, e?.terminating], [true, true, false]);
});

test("slices without a service-name label, and FQDN slices, are ignored", () => {
  const s = slice("a", [{ ip: 1, node: 1, ready: true, serving: true, terminating: false }]);
  const unlabelled = { ...s, metadata: { ...s.metadata, labels: {} } };
  const fqdn = { ...s, addressType: "FQDN" as const };
  assert.equal(slicesByService([unlabelled, fqdn]).size, 0);
  assert.equal(slicesByService([s]).get("ns/svc")?.length, 1);
});

test("health-check count: distinct ready local IPs over all ports, terminating excluded", () => {
  const eps: Ep[] = [
    { ip: 1, node: 1, ready: true, serving: true, terminating: false },
    { ip: 2, node: 1, ready: false, serving: true, terminating: true },
    { ip: 3, node: 2, ready: true, serving: true, terminating: false },
  ];
  const { ports } = mergeServiceEndpoints([slice("a", eps, 80, "http"), slice("b", eps, 81, "grpc")]);
  assert.equal(localReadyEndpointCount(ports, "node-1"), 1);
  assert.equal(localReadyEndpointCount(ports, "node-3"), 0);
  assert.deepEqual(endpointsPerNode(ports).get("node-1"), {
    ready: 1,
    nonTerminating: 1,
    servingTerminating: 1,
  });
});

test("categorize: local uses ready local endpoints, else serving terminating ones; cluster falls back likewise", () => {
  const eps: Ep[] = [
    { ip: 1, node: 1, ready: false, serving: true, terminating: true },
    { ip: 2, node: 2, ready: false, serving: false, terminating: true },
  ];
  const { ports } = mergeServiceEndpoints([slice("a", eps)]);
  const c = categorizeEndpoints({ endpoints: ports[0]!.endpoints, nodeName: "node-1", zone: undefined });
  assert.deepEqual(
    c.localEndpoints.map((e) => e.address),
    ["192.0.2.1"],
  );
  assert.deepEqual(
    c.clusterEndpoints.map((e) => e.address),
    ["192.0.2.1"],
  );
  assert.equal(c.hasAnyEndpoints, true);
  const other = categorizeEndpoints({ endpoints: ports[0]!.endpoints, nodeName: "node-2", zone: undefined });
  assert.equal(other.localEndpoints.length, 0);
});

test("categorize: zone hints narrow the cluster set only when every ready endpoint has one", () => {
  const base = slice("a", [
    { ip: 1, node: 1, ready: true, serving: true, terminating: false },
    { ip: 2, node: 2, ready: true, serving: true, terminating: false },
  ]);
  const hinted = {
    ...base,
    endpoints: (base.endpoints ?? []).map((e, i) => ({
      ...e,
      hints: { forZones: [{ name: i === 0 ? "z1" : "z2" }] },
    })),
  };
  const { ports } = mergeServiceEndpoints([hinted]);
  const c = categorizeEndpoints({ endpoints: ports[0]!.endpoints, nodeName: "node-9", zone: "z1" });
  assert.deepEqual(
    c.clusterEndpoints.map((e) => e.address),
    ["192.0.2.1"],
  );
  const partial = { ...hinted, endpoints: [hinted.endpoints[0]!, base.endpoints![1]!] };
  const p = categorizeEndpoints({
    endpoints: mergeServiceEndpoints([partial]).ports[0]!.endpoints,
    nodeName: "n",
    zone: "z1",
  });
  assert.equal(p.clusterEndpoints.length, 2);
});
