// Invariants of the EndpointSlice controller and the mirroring controller (kubernetes/endpointslice
// reconciler.go, kubernetes pkg/controller/endpointslicemirroring/reconciler.go), checked on generated
// Services, Pods and Endpoints with fast-check.
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { nodeMap, pod, sequentialNames, service } from "../../test/support/endpointslice-builders.ts";
import type { EndpointSlice, Endpoints, Pod } from "../k8s/objects.ts";
import { canonicalIp } from "../net/ip.ts";
import { endpointKey } from "./endpoint-set.ts";
import { mirrorEndpoints } from "./mirroring.ts";
import { controllerSlicesOf, reconcileService } from "./reconciler.ts";
import { applySliceWrites, writeCount } from "./slice-writes.ts";

const nodes = nodeMap(3);
const svc = service("web", (s) => {
  s.spec.ports = [{ name: "http", protocol: "TCP", port: 80, targetPort: "http" }];
});
const RUNS = { numRuns: 60 };

/** Pod i; `alt` Pods serve the named port on another number (another slice group). */
const makePod = (i: number, ready: boolean, alt: boolean): Pod =>
  pod(i, "web", (p) => {
    if (!ready) p.status.conditions = [{ type: "Ready", status: "False" }];
    if (alt)
      p.spec.containers = [{ name: "m", ports: [{ name: "http", containerPort: 9090, protocol: "TCP" }] }];
  });

const podSet = fc.array(fc.record({ i: fc.nat(400), ready: fc.boolean(), alt: fc.boolean() }), {
  maxLength: 250,
});
const build = (list: { i: number; ready: boolean; alt: boolean }[]) => {
  const seen = new Map<number, Pod>();
  for (const x of list) seen.set(x.i, makePod(x.i, x.ready, x.alt));
  return [...seen.values()];
};

function sync(pods: readonly Pod[], slices: EndpointSlice[], max: number) {
  const w = reconcileService({ service: svc, pods, nodes, slices }, { maxEndpointsPerSlice: max });
  return { w, after: applySliceWrites(slices, w, sequentialNames()) };
}

test("every desired endpoint appears exactly once, no slice exceeds the maximum, a second sync writes nothing", () => {
  fc.assert(
    fc.property(podSet, podSet, fc.integer({ min: 1, max: 40 }), (before, now, max) => {
      const first = sync(build(before), [], max).after;
      const pods = build(now);
      const { after } = sync(pods, first, max);
      const placed = controllerSlicesOf(svc, after).flatMap((s) => (s.endpoints ?? []).map(endpointKey));
      const wanted = pods.map((p) => `${p.status.podIP}||default/${p.metadata.name}`);
      assert.deepEqual([...placed].sort(), [...wanted].sort());
      assert.ok(after.every((s) => (s.endpoints?.length ?? 0) <= max));
      assert.equal(writeCount(sync(pods, after, max).w), 0);
    }),
    RUNS,
  );
});

test("one Pod changing (added, removed, readiness flipped) touches at most one slice", () => {
  fc.assert(
    fc.property(
      podSet,
      fc.nat(400),
      fc.constantFrom("add", "remove", "flip"),
      fc.integer({ min: 1, max: 40 }),
      (list, i, change, max) => {
        const pods = build(list);
        const stored = sync(pods, [], max).after;
        const existing = pods.find((p) => p.metadata.name === `web-${i}`);
        let next: Pod[];
        if (change === "add") next = existing ? pods : [...pods, makePod(i, true, i % 2 === 0)];
        else if (change === "remove") next = pods.filter((p) => p !== existing);
        else
          next = pods.map((p) =>
            p === existing
              ? makePod(i, !(p.status.conditions?.[0]?.status === "True"), p.spec.containers[0]?.name === "m")
              : p,
          );
        assert.ok(writeCount(sync(next, stored, max).w) <= 1);
      },
    ),
    RUNS,
  );
});

const ipv4 = fc.tuple(fc.integer({ min: 1, max: 3 }), fc.nat(255)).map(([a, b]) => `10.${a}.0.${b}`);
const ipv6 = fc.nat(500).map((n) => `fd00::${n.toString(16)}`);
const address = fc.record({ ip: fc.oneof(ipv4, ipv6) });
const portList = fc.uniqueArray(
  fc.record({ name: fc.constantFrom("a", "b", "c"), port: fc.integer({ min: 1, max: 3 }) }),
  {
    selector: (p) => p.name,
    maxLength: 3,
  },
);
const subsets = fc.array(
  fc.record({
    addresses: fc.array(address, { maxLength: 30 }),
    notReadyAddresses: fc.array(address, { maxLength: 10 }),
    ports: portList.map((ps) => ps.map((p) => ({ ...p, protocol: "TCP" as const }))),
  }),
  { maxLength: 4 },
);

test("mirroring never drops an address under the cap, and a second sync writes nothing", () => {
  const selectorless = service("ext", (s) => {
    s.spec.selector = null;
  });
  fc.assert(
    fc.property(subsets, (subs) => {
      const endpoints: Endpoints = {
        apiVersion: "v1",
        kind: "Endpoints",
        metadata: { name: "ext", namespace: "default", uid: "uid-ep" },
        subsets: subs,
      };
      const input = { endpoints, service: selectorless, namespace: "default", name: "ext" };
      const w = mirrorEndpoints({ ...input, slices: [] });
      const slices = applySliceWrites([], w, sequentialNames());
      for (const sub of subs)
        for (const a of [...sub.addresses, ...sub.notReadyAddresses])
          for (const port of sub.ports.length > 0 ? sub.ports : [undefined]) {
            const family = a.ip.includes(":") ? "IPv6" : "IPv4";
            // a port-less subset's addresses may be regrouped with a ported one (RepackSubsets)
            const hasPort = (sl: EndpointSlice) =>
              port === undefined ||
              (sl.ports ?? []).some((p) => p.name === port.name && p.port === port.port);
            const found = slices.some(
              (sl) =>
                sl.addressType === family &&
                hasPort(sl) &&
                (sl.endpoints ?? []).some((e) => e.addresses[0] === canonicalIp(a.ip)),
            );
            assert.ok(found, `${a.ip} ${JSON.stringify(port)} not mirrored`);
          }
      assert.equal(writeCount(mirrorEndpoints({ ...input, slices })), 0);
    }),
    RUNS,
  );
});

test("the memos never change a result: a warm sync equals a cold one", () => {
  fc.assert(
    fc.property(
      podSet,
      fc.array(fc.record({ at: fc.nat(300), i: fc.nat(400), ready: fc.boolean(), alt: fc.boolean() }), {
        maxLength: 20,
      }),
      fc.integer({ min: 1, max: 40 }),
      (list, edits, max) => {
        const pods = build(list);
        const stored = sync(pods, [], max).after;
        // replace a few positions (same length: the patching path), possibly with new Pods
        const next = [...pods];
        for (const e of edits) if (next.length > 0) next[e.at % next.length] = makePod(e.i, e.ready, e.alt);
        // a snapshot never holds two Pods of one name (decoding rejects duplicates)
        fc.pre(new Set(next.map((p) => p.metadata.name)).size === next.length);
        const warm = reconcileService(
          { service: svc, pods: next, nodes, slices: stored },
          { maxEndpointsPerSlice: max },
        );
        const coldSvc = structuredClone(svc);
        const coldPods = structuredClone(next);
        const cold = reconcileService(
          { service: coldSvc, pods: coldPods, nodes: new Map(nodes), slices: stored },
          { maxEndpointsPerSlice: max },
        );
        assert.deepEqual(JSON.parse(JSON.stringify(warm)), JSON.parse(JSON.stringify(cold)));
      },
    ),
    RUNS,
  );
});
