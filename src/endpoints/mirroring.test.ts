// One test per rule of the EndpointSliceMirroring controller (kubernetes
// pkg/controller/endpointslicemirroring/reconciler.go).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { sequentialNames, service } from "../../test/support/endpointslice-builders.ts";
import type { EndpointSlice, Endpoints } from "../k8s/objects.ts";
import { mirrorEndpoints } from "./mirroring.ts";
import { repackSubsets } from "./repack-subsets.ts";
import { applySliceWrites, writeCount } from "./slice-writes.ts";

const selectorless = service("ext", (s) => {
  s.spec.selector = null;
});

function endpoints(subsets: Endpoints["subsets"], mutate: (e: Endpoints) => void = () => {}): Endpoints {
  const e: Endpoints = {
    apiVersion: "v1",
    kind: "Endpoints",
    metadata: { name: "ext", namespace: "default", uid: "uid-ep" },
    subsets,
  };
  mutate(e);
  return e;
}

const http = [{ name: "http", port: 8080, protocol: "TCP" as const }];
const mirror = (ep: Endpoints | undefined, slices: EndpointSlice[] = [], svc = selectorless, max?: number) =>
  mirrorEndpoints(
    { endpoints: ep, service: svc, slices, namespace: "default", name: "ext" },
    max === undefined ? {} : { maxEndpointsPerSubset: max },
  );
const stored = (ep: Endpoints) => applySliceWrites([], mirror(ep), sequentialNames());

describe("what is mirrored (§2.1)", () => {
  const ep = endpoints([{ addresses: [{ ip: "10.1.0.1" }], ports: http }]);

  test("a selector-less Service's Endpoints is mirrored with the mirroring managed-by label", () => {
    const [slice] = mirror(ep).create;
    assert.equal(
      slice!.metadata.labels?.["endpointslice.kubernetes.io/managed-by"],
      "endpointslicemirroring-controller.k8s.io",
    );
    assert.equal(slice!.metadata.labels?.["kubernetes.io/service-name"], "ext");
    assert.equal(slice!.metadata.generateName, "ext-");
    assert.deepEqual(slice!.metadata.ownerReferences?.[0], {
      apiVersion: "v1",
      kind: "Endpoints",
      name: "ext",
      uid: "uid-ep",
      controller: true,
      blockOwnerDeletion: true,
    });
  });

  test("skip-mirror label, leader annotation, no Service, or a Service with a selector: nothing, and old slices go", () => {
    const old = stored(ep);
    const cases: [Endpoints, typeof selectorless | undefined][] = [
      [
        endpoints(ep.subsets, (e) => {
          e.metadata.labels = { "endpointslice.kubernetes.io/skip-mirror": "true" };
        }),
        selectorless,
      ],
      [
        endpoints(ep.subsets, (e) => {
          e.metadata.annotations = { "control-plane.alpha.kubernetes.io/leader": "{}" };
        }),
        selectorless,
      ],
      [ep, undefined],
      [ep, service("ext")],
    ];
    for (const [e, svc] of cases) {
      const w = mirrorEndpoints({
        endpoints: e,
        service: svc,
        slices: old,
        namespace: "default",
        name: "ext",
      });
      assert.deepEqual([w.create.length, w.update.length, w.delete.length], [0, 0, 1]);
    }
    assert.equal(mirror(undefined, old).delete.length, 1);
  });

  test("labels and annotations are copied, minus the trigger time and last-applied annotations", () => {
    const e = endpoints(ep.subsets, (x) => {
      x.metadata.labels = { team: "a" };
      x.metadata.annotations = {
        note: "n",
        "endpoints.kubernetes.io/last-change-trigger-time": "2026-01-01T00:00:00Z",
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
      };
    });
    const [slice] = mirror(e).create;
    assert.equal(slice!.metadata.labels?.team, "a");
    assert.deepEqual(slice!.metadata.annotations, { note: "n" });
  });
});

describe("desired state (§2.2)", () => {
  test("not-ready wins over ready for the same address and port", () => {
    const [s] = repackSubsets([
      { addresses: [{ ip: "10.1.0.1" }], ports: http },
      { notReadyAddresses: [{ ip: "10.1.0.1" }], ports: http },
    ]);
    assert.deepEqual([s!.addresses, s!.notReadyAddresses.map((a) => a.ip)], [[], ["10.1.0.1"]]);
    const [slice] = mirror(
      endpoints([{ addresses: [{ ip: "10.1.0.1" }], notReadyAddresses: [{ ip: "10.1.0.1" }], ports: http }]),
    ).create;
    assert.deepEqual(slice!.endpoints, [{ addresses: ["10.1.0.1"], conditions: { ready: false } }]);
  });

  test("one slice per address family and port set; ports with the same addresses regroup", () => {
    const w = mirror(
      endpoints([
        { addresses: [{ ip: "10.1.0.1" }, { ip: "fd00::1" }], ports: http },
        {
          addresses: [{ ip: "10.1.0.1" }, { ip: "fd00::1" }],
          ports: [{ name: "https", port: 8443, protocol: "TCP" }],
        },
        { addresses: [{ ip: "10.1.0.2" }], ports: [{ name: "metrics", port: 9000, protocol: "TCP" }] },
      ]),
    );
    assert.deepEqual(
      w.create.map((s) => [s.addressType, (s.ports ?? []).map((p) => p.name).join(","), s.endpoints?.length]),
      [
        ["IPv4", "http,https", 1],
        ["IPv6", "http,https", 1],
        ["IPv4", "metrics", 1],
      ],
    );
  });

  test("ready addresses first, then not-ready, at most the cap per subset, with findings", () => {
    const many = Array.from({ length: 5 }, (_, i) => ({ ip: `10.1.0.${i + 1}` }));
    const w = mirror(
      endpoints([{ addresses: many, notReadyAddresses: [{ ip: "10.1.1.1" }, { ip: "bogus" }], ports: http }]),
      [],
      selectorless,
      5,
    );
    assert.deepEqual(
      w.create[0]!.endpoints!.map((e) => e.addresses[0]),
      many.map((a) => a.ip),
    );
    assert.deepEqual(
      w.findings.map((f) => f.code),
      ["endpoints_too_many_addresses"],
    );
    const bad = mirror(endpoints([{ addresses: [{ ip: "bogus" }, { ip: "10.1.0.1" }], ports: http }]));
    assert.deepEqual(
      bad.findings.map((f) => f.code),
      ["endpoints_invalid_ip_skipped"],
    );
  });

  test("each endpoint carries ready, targetRef, nodeName and hostname; serving and terminating stay unset", () => {
    const [slice] = mirror(
      endpoints([
        {
          addresses: [
            {
              ip: "10.1.0.1",
              hostname: "h1",
              nodeName: "n1",
              targetRef: { kind: "Pod", namespace: "default", name: "p1", uid: "u1" },
            },
          ],
          ports: http,
        },
      ]),
    ).create;
    assert.deepEqual(slice!.endpoints, [
      {
        addresses: ["10.1.0.1"],
        conditions: { ready: true },
        targetRef: { kind: "Pod", namespace: "default", name: "p1", uid: "u1" },
        nodeName: "n1",
        hostname: "h1",
      },
    ]);
  });
});

describe("reconcile per key (§2.3)", () => {
  const ep = endpoints([{ addresses: [{ ip: "10.1.0.1" }], ports: http }]);

  test("an unchanged Endpoints writes nothing; an address change updates the slice in place", () => {
    const old = stored(ep);
    assert.equal(writeCount(mirror(ep, old)), 0);
    const w = mirror(endpoints([{ addresses: [{ ip: "10.1.0.2" }], ports: http }]), old);
    assert.deepEqual([w.create.length, w.update.length, w.delete.length], [0, 1, 0]);
    assert.equal(w.update[0]!.metadata.name, old[0]!.metadata.name);
  });

  test("an Endpoints without a uid (a bare manifest) is stable too", () => {
    const bare = endpoints(ep.subsets, (e) => {
      delete e.metadata.uid;
    });
    assert.equal(writeCount(mirror(bare, stored(bare))), 0);
  });

  test("only the first slice of a key is kept; extra ones are deleted", () => {
    const old = stored(ep);
    const extra = { ...old[0]!, metadata: { ...old[0]!.metadata, name: "ext-zzzzz" } };
    const w = mirror(ep, [...old, extra]);
    assert.deepEqual(
      w.delete.map((s) => s.metadata.name),
      ["ext-zzzzz"],
    );
    assert.equal(w.update.length + w.create.length, 0);
  });

  test("a slice owned by an older Endpoints (other uid) is rewritten", () => {
    const old = stored(
      endpoints(ep.subsets, (e) => {
        e.metadata.uid = "uid-old";
      }),
    );
    const w = mirror(ep, old);
    assert.deepEqual([w.update.length, w.update[0]?.metadata.ownerReferences?.[0]?.uid], [1, "uid-ep"]);
  });

  test("a port change recycles the old slice's name (one update, no create, no delete)", () => {
    const old = stored(ep);
    const w = mirror(
      endpoints([
        { addresses: [{ ip: "10.1.0.1" }], ports: [{ name: "http", port: 9090, protocol: "TCP" }] },
      ]),
      old,
    );
    assert.deepEqual([w.create.length, w.update.length, w.delete.length], [0, 1, 0]);
    assert.equal(w.update[0]!.metadata.name, old[0]!.metadata.name);
  });

  test("no addresses for a key: its slices are deleted and no placeholder is made", () => {
    const w = mirror(endpoints([]), stored(ep));
    assert.deepEqual([w.create.length, w.update.length, w.delete.length], [0, 0, 1]);
  });

  test("an Endpoints being deleted gets no creates", () => {
    assert.equal(
      mirror(
        endpoints(ep.subsets, (e) => {
          e.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
        }),
      ).create.length,
      0,
    );
  });
});
