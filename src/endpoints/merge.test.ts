import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import type { Endpoint, EndpointSlice } from "../k8s/objects.ts";
import { canonicalIp, joinHostPort } from "../net/ip.ts";
import { categorizeEndpoints } from "./categorize.ts";
import {
  endpointCountsByNode,
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
  const counts = endpointCountsByNode([slice("a", eps, 80, "http"), slice("b", eps, 81, "grpc")]);
  assert.deepEqual(counts.perNode.get("node-1"), {
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

/** endpointCountsByNode's rules the plain way: kube-proxy's merge keyed by `ip:port` per
 * (port name, protocol), then one entry per IP (the node first seen for it, flags OR-ed
 * where it is on that node), counted per node in first-seen order. */
function referenceCounts(slices: readonly EndpointSlice[]) {
  const ordered = [...slices].sort((a, b) =>
    (a.metadata.name ?? "") < (b.metadata.name ?? "")
      ? -1
      : (a.metadata.name ?? "") > (b.metadata.name ?? "")
        ? 1
        : 0,
  );
  const groups = new Map<
    string,
    { name: string; protocol: string; winners: Map<string, { address: string; ep: Endpoint }> }
  >();
  for (const s of ordered)
    for (const port of s.ports ?? []) {
      if (port.name === undefined || port.name === null || !port.port) continue;
      const protocol = port.protocol ?? "TCP";
      const g = groups.get(`${port.name}|${protocol}`) ?? { name: port.name, protocol, winners: new Map() };
      groups.set(`${port.name}|${protocol}`, g);
      for (const ep of s.endpoints ?? []) {
        const first = ep.addresses[0];
        if (first === undefined) continue;
        const address = canonicalIp(first) ?? first;
        const key = joinHostPort(address, port.port);
        if ((ep.conditions.terminating ?? false) && g.winners.has(key)) continue;
        g.winners.set(key, { address, ep });
      }
    }
  const sorted = [...groups.values()].sort((a, b) =>
    a.name < b.name
      ? -1
      : a.name > b.name
        ? 1
        : a.protocol < b.protocol
          ? -1
          : a.protocol > b.protocol
            ? 1
            : 0,
  );
  const byIp = new Map<string, { node: string; ready: boolean; live: boolean; draining: boolean }>();
  let anyReady = false;
  let anyServingTerminating = false;
  for (const g of sorted)
    for (const { address, ep } of g.winners.values()) {
      const ready = ep.conditions.ready ?? true;
      const terminating = ep.conditions.terminating ?? false;
      const draining = (ep.conditions.serving ?? true) && terminating;
      anyReady ||= ready;
      anyServingTerminating ||= draining;
      if (!ep.nodeName) continue;
      const e = byIp.get(address);
      if (!e)
        byIp.set(address, { node: ep.nodeName, ready: ready && !terminating, live: !terminating, draining });
      else if (e.node === ep.nodeName) {
        e.ready ||= ready && !terminating;
        e.live ||= !terminating;
        e.draining ||= draining;
      }
    }
  const perNode: [string, { ready: number; nonTerminating: number; servingTerminating: number }][] = [];
  for (const e of byIp.values()) {
    let c = perNode.find(([n]) => n === e.node)?.[1];
    if (!c) {
      c = { ready: 0, nonTerminating: 0, servingTerminating: 0 };
      perNode.push([e.node, c]);
    }
    c.ready += e.ready ? 1 : 0;
    c.nonTerminating += e.live ? 1 : 0;
    c.servingTerminating += e.draining ? 1 : 0;
  }
  return { perNode, anyReady, anyServingTerminating };
}

test("property: endpointCountsByNode agrees with the plain merge over ports, port numbers, duplicates and address spellings", () => {
  const optBool = fc.option(fc.boolean(), { nil: undefined });
  const endpointArb = fc.record({
    ip: fc.integer({ min: 0, max: 5 }),
    spelling: fc.integer({ min: 0, max: 2 }),
    node: fc.option(fc.integer({ min: 1, max: 3 }), { nil: undefined }),
    ready: optBool,
    serving: optBool,
    terminating: optBool,
  });
  const portArb = fc.record({
    name: fc.constantFrom("", "http", "grpc"),
    port: fc.constantFrom(80, 81, 0),
    protocol: fc.constantFrom("TCP" as const, "UDP" as const),
  });
  const sliceArb = fc.record({
    name: fc.constantFrom("a", "b", "c"),
    ports: fc.array(portArb, { minLength: 1, maxLength: 3 }),
    endpoints: fc.array(endpointArb, { maxLength: 8 }),
  });
  // one address written three ways (fd00::N, fd00:0::N, FD00::N), one that never parses
  const spell = (ip: number, how: number) =>
    ip === 5 ? "not-an-ip" : [`fd00::${ip}`, `fd00:0::${ip}`, `FD00::${ip}`][how]!;
  fc.assert(
    fc.property(fc.array(sliceArb, { minLength: 1, maxLength: 4 }), (specs) => {
      const slices: EndpointSlice[] = specs.map((sp) => ({
        apiVersion: "discovery.k8s.io/v1",
        kind: "EndpointSlice",
        metadata: { name: sp.name, namespace: "ns", labels: { "kubernetes.io/service-name": "svc" } },
        addressType: "IPv6",
        ports: sp.ports,
        endpoints: sp.endpoints.map((e) => ({
          addresses: [spell(e.ip, e.spelling)],
          conditions: {
            ...(e.ready !== undefined && { ready: e.ready }),
            ...(e.serving !== undefined && { serving: e.serving }),
            ...(e.terminating !== undefined && { terminating: e.terminating }),
          },
          ...(e.node !== undefined && { nodeName: `node-${e.node}` }),
        })),
      }));
      const got = endpointCountsByNode(slices);
      const want = referenceCounts(slices);
      assert.deepEqual([...got.perNode.entries()], want.perNode);
      assert.equal(got.anyReady, want.anyReady);
      assert.equal(got.anyServingTerminating, want.anyServingTerminating);
      const flagsOnly = endpointCountsByNode(slices, false);
      assert.equal(flagsOnly.perNode.size, 0);
      assert.equal(flagsOnly.anyReady, want.anyReady);
      assert.equal(flagsOnly.anyServingTerminating, want.anyServingTerminating);
    }),
    { numRuns: 500 },
  );
});
