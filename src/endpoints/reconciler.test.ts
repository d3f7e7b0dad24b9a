// One test per rule of the EndpointSlice controller (kubernetes/endpointslice reconciler.go).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { node, nodeMap, pod, sequentialNames, service } from "../../test/support/endpointslice-builders.ts";
import type { EndpointSlice, Pod, Service } from "../k8s/objects.ts";
import { type ReconcileOptions, reconcileService } from "./reconciler.ts";
import { applySliceWrites, writeCount } from "./slice-writes.ts";

const nodes = nodeMap(3);
const pods = (n: number, from = 0, mutate?: (p: Pod) => void) =>
  Array.from({ length: n }, (_, i) => pod(from + i, "web", mutate));
const sizes = (slices: readonly EndpointSlice[]) => slices.map((s) => s.endpoints?.length ?? 0);

/** Reconciles from nothing and applies the writes: the slices as the API server stores them. */
function settle(
  svc: Service,
  podList: readonly Pod[],
  opts: ReconcileOptions = {},
  existing: EndpointSlice[] = [],
) {
  const w = reconcileService({ service: svc, pods: podList, nodes, slices: existing }, opts);
  return applySliceWrites(existing, w, sequentialNames());
}

/** Existing slices holding the given Pods in groups of the given sizes (all still desired). */
function slicesOf(svc: Service, groups: number[], opts: ReconcileOptions = { maxEndpointsPerSlice: 100 }) {
  let out: EndpointSlice[] = [];
  let from = 0;
  for (const n of groups) {
    const w = reconcileService({ service: svc, pods: pods(n, from), nodes, slices: [] }, opts);
    out = applySliceWrites(out, { create: w.create, update: [], delete: [] }, sequentialNames());
    from += n;
  }
  return { slices: out, next: from };
}

describe("packing (§1.4)", () => {
  const svc = service("web");

  test("250 endpoints from nothing become 3 creates of 100, 100 and 50", () => {
    const w = reconcileService({ service: svc, pods: pods(250), nodes, slices: [] });
    assert.deepEqual(sizes(w.create), [100, 100, 50]);
    assert.equal(w.update.length + w.delete.length, 0);
  });

  test("slices of 62 and 61 plus 127 new: one create of 100 and one update 62 → 89", () => {
    const { slices, next } = slicesOf(svc, [62, 61]);
    const all = [...pods(next), ...pods(127, next)];
    const w = reconcileService({ service: svc, pods: all, nodes, slices });
    assert.deepEqual(sizes(w.create), [100]);
    assert.deepEqual(sizes(w.update), [89]);
    assert.equal(w.delete.length, 0);
  });

  test("slices of 74 and 74 plus 152 new: two creates (100, 52), no update", () => {
    const { slices, next } = slicesOf(svc, [74, 74]);
    const w = reconcileService({ service: svc, pods: [...pods(next), ...pods(152, next)], nodes, slices });
    assert.deepEqual(sizes(w.create), [100, 52]);
    assert.equal(w.update.length, 0);
  });

  test("10 new endpoints and two slices with 5 free each: one create rather than two updates", () => {
    const { slices, next } = slicesOf(svc, [95, 95]);
    const w = reconcileService({ service: svc, pods: [...pods(next), ...pods(10, next)], nodes, slices });
    assert.deepEqual(sizes(w.create), [10]);
    assert.equal(w.update.length, 0);
  });

  test("step 3 puts the leftovers into the unchanged slice left closest to full", () => {
    const { slices, next } = slicesOf(svc, [50, 80]);
    const w = reconcileService({ service: svc, pods: [...pods(next), ...pods(15, next)], nodes, slices });
    assert.equal(w.create.length, 0);
    assert.deepEqual(sizes(w.update), [95]);
    assert.equal(w.update[0]!.metadata.name, slices.find((s) => s.endpoints?.length === 80)!.metadata.name);
  });

  test("remaining == max never goes into an existing slice (strict <)", () => {
    const opts = { maxEndpointsPerSlice: 10 };
    const { slices, next } = slicesOf(svc, [0 + 1], opts);
    const nine = reconcileService(
      { service: svc, pods: [...pods(next), ...pods(9, next)], nodes, slices },
      opts,
    );
    assert.deepEqual([sizes(nine.create), sizes(nine.update)], [[], [10]]);
    const ten = reconcileService(
      { service: svc, pods: [...pods(next), ...pods(10, next)], nodes, slices },
      opts,
    );
    assert.deepEqual([sizes(ten.create), sizes(ten.update)], [[10], []]);
  });

  test("step 2 fills slices already being updated, fullest first", () => {
    const { slices, next } = slicesOf(svc, [60, 90]);
    // drop one Pod from each slice so both are updated anyway, then add 12 new ones
    const keep = pods(next).filter((p) => p.metadata.name !== "web-0" && p.metadata.name !== "web-60");
    const w = reconcileService({ service: svc, pods: [...keep, ...pods(12, next)], nodes, slices });
    assert.equal(w.create.length, 0);
    // 59 and 89 left; the fuller one is filled to 100 first, the other gets the last one
    assert.deepEqual(sizes(w.update), [60, 100]);
  });

  test("maxEndpointsPerSlice outside 1..1000 is refused", () => {
    assert.throws(() =>
      reconcileService({ service: svc, pods: [], nodes, slices: [] }, { maxEndpointsPerSlice: 1001 }),
    );
    assert.throws(() =>
      reconcileService({ service: svc, pods: [], nodes, slices: [] }, { maxEndpointsPerSlice: 0 }),
    );
  });

  test("an endpoint found in two slices stays in the first and leaves the second", () => {
    const [a] = settle(svc, pods(3));
    const dup = { ...a!, metadata: { ...a!.metadata, name: "web-zzzzz" } };
    const w = reconcileService({ service: svc, pods: pods(3), nodes, slices: [a!, dup] });
    assert.deepEqual(
      w.delete.map((s) => s.metadata.name),
      ["web-zzzzz"],
    );
    assert.equal(w.create.length + w.update.length, 0);
  });
});

describe("groups (§1.2, §1.3, §1.6 ports)", () => {
  test("a named targetPort resolves per Pod: different numbers land in different slices", () => {
    const svc = service("web", (s) => {
      s.spec.ports = [{ name: "http", protocol: "TCP", port: 80, targetPort: "http" }];
    });
    const other = (p: Pod) => {
      p.spec.containers = [{ name: "main", ports: [{ name: "http", containerPort: 9090, protocol: "TCP" }] }];
    };
    const w = reconcileService({ service: svc, pods: [...pods(2), ...pods(2, 2, other)], nodes, slices: [] });
    assert.deepEqual(w.create.map((s) => s.ports?.[0]?.port).sort(), [8080, 9090]);
    assert.deepEqual(sizes(w.create), [2, 2]);
  });

  test("a named targetPort matches name AND protocol, and restartable init containers too", () => {
    const svc = service("dns", (s) => {
      s.spec.ports = [{ name: "dns", protocol: "UDP", port: 53, targetPort: "dns" }];
    });
    const p = pod(0, "dns", (x) => {
      x.spec.containers = [{ name: "tcp", ports: [{ name: "dns", containerPort: 5353, protocol: "TCP" }] }];
      x.spec.initContainers = [
        {
          name: "side",
          restartPolicy: "Always",
          ports: [{ name: "dns", containerPort: 1053, protocol: "UDP" }],
        },
      ];
    });
    const w = reconcileService({ service: svc, pods: [p], nodes, slices: [] });
    assert.deepEqual(w.create[0]!.ports, [{ name: "dns", port: 1053, protocol: "UDP" }]);
  });

  test("a Pod whose named port does not resolve lands in a slice without that port", () => {
    const svc = service("web", (s) => {
      s.spec.ports = [{ name: "http", protocol: "TCP", port: 80, targetPort: "nope" }];
    });
    const w = reconcileService({ service: svc, pods: pods(1), nodes, slices: [] });
    assert.deepEqual(w.create[0]!.ports, []);
    assert.equal(w.create[0]!.endpoints?.length, 1);
  });

  test("dual-stack Service with IPv4-only Pods: an IPv4 slice and an IPv6 placeholder", () => {
    const svc = service("web", (s) => {
      s.spec.ipFamilies = ["IPv4", "IPv6"];
      s.spec.ipFamilyPolicy = "PreferDualStack";
    });
    const w = reconcileService({ service: svc, pods: pods(2), nodes, slices: [] });
    assert.deepEqual(
      w.create.map((s) => [s.addressType, s.endpoints?.length, s.ports?.length]),
      [
        ["IPv4", 2, 1],
        ["IPv6", 0, 0],
      ],
    );
  });

  test("a dual-stack Pod gives one endpoint per family, each with its own addresses", () => {
    const svc = service("web", (s) => {
      s.spec.ipFamilies = ["IPv6", "IPv4"];
    });
    const p = pod(0, "web", (x) => {
      x.status.podIPs = [{ ip: "10.0.0.1" }, { ip: "FD00:0:0:0::1" }];
    });
    const w = reconcileService({ service: svc, pods: [p], nodes, slices: [] });
    assert.deepEqual(
      w.create.map((s) => [s.addressType, s.endpoints?.[0]?.addresses]),
      [
        ["IPv6", ["fd00::1"]],
        ["IPv4", ["10.0.0.1"]],
      ],
    );
  });

  test("a headless Service without families is dual-stack and carries the headless label", () => {
    const svc = service("db", (s) => {
      s.spec.clusterIP = "None";
      delete s.spec.ipFamilies;
    });
    const w = reconcileService({ service: svc, pods: [], nodes, slices: [] });
    assert.deepEqual(
      w.create.map((s) => s.addressType),
      ["IPv4", "IPv6"],
    );
    assert.equal(w.create[0]!.metadata.labels?.["service.kubernetes.io/headless"], "");
  });

  test("slices of a family the Service no longer serves are deleted last, never recycled", () => {
    const svc = service("web");
    const old = settle(
      service("web", (s) => {
        s.spec.ipFamilies = ["IPv6"];
      }),
      [],
    );
    const w = reconcileService({ service: svc, pods: pods(1), nodes, slices: old });
    assert.equal(w.create.length, 1);
    assert.deepEqual(
      w.delete.map((s) => s.addressType),
      ["IPv6"],
    );
  });
});

describe("placeholder and recycling (§1.3 step 5, §1.7)", () => {
  const svc = service("web");

  test("a Service without Pods gets one placeholder slice, and keeps it without writes", () => {
    const w = reconcileService({ service: svc, pods: [], nodes, slices: [] });
    assert.equal(w.create.length, 1);
    assert.deepEqual([w.create[0]!.endpoints, w.create[0]!.ports], [[], []]);
    const stored = applySliceWrites([], w, sequentialNames());
    assert.equal(writeCount(reconcileService({ service: svc, pods: [], nodes, slices: stored })), 0);
  });

  test("when the last Pod goes, the slice is recycled into the placeholder (one update)", () => {
    const stored = settle(svc, pods(3));
    const w = reconcileService({ service: svc, pods: [], nodes, slices: stored });
    assert.deepEqual([w.create.length, w.update.length, w.delete.length], [0, 1, 0]);
    assert.equal(w.update[0]!.metadata.name, stored[0]!.metadata.name);
    assert.deepEqual(w.update[0]!.endpoints, []);
  });

  test("a port change on 10 slices of 30 becomes 3 updates and 7 deletes", () => {
    let stored: EndpointSlice[] = [];
    for (let i = 0; i < 10; i++) stored = [...stored, ...settle(svc, pods(30, i * 30), {}, [])];
    assert.equal(stored.length, 10);
    const moved = service("web", (s) => {
      s.spec.ports = [{ name: "http", protocol: "TCP", port: 80, targetPort: 9090 }];
    });
    const w = reconcileService({ service: moved, pods: pods(300), nodes, slices: stored });
    assert.deepEqual([w.create.length, w.update.length, w.delete.length], [0, 3, 7]);
    assert.ok(w.update.every((s) => s.ports?.[0]?.port === 9090));
  });

  test("slices not owned by the Service (another uid) are deleted and never recycled", () => {
    const stored = settle(
      service("web", (s) => {
        s.metadata.uid = "uid-old";
      }),
      pods(2),
    );
    const w = reconcileService({ service: svc, pods: pods(2), nodes, slices: stored });
    assert.deepEqual([w.create.length, w.update.length, w.delete.length], [1, 0, 1]);
    assert.equal(w.create[0]!.metadata.ownerReferences?.[0]?.uid, "uid-web");
  });

  test("a Service without a uid (a bare manifest) still owns the slices made for it", () => {
    const bare = service("web", (s) => {
      delete s.metadata.uid;
    });
    const stored = settle(bare, pods(2));
    assert.equal(writeCount(reconcileService({ service: bare, pods: pods(2), nodes, slices: stored })), 0);
  });

  test("a Service being deleted gets no creates; updates and deletes still happen", () => {
    const dying = service("web", (s) => {
      s.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
    });
    assert.equal(reconcileService({ service: dying, pods: pods(3), nodes, slices: [] }).create.length, 0);
  });

  test("ExternalName and selector-less Services get nothing from this controller", () => {
    const ext = service("x", (s) => {
      s.spec.type = "ExternalName";
    });
    const bare = service("y", (s) => {
      s.spec.selector = null;
    });
    for (const s of [ext, bare])
      assert.equal(writeCount(reconcileService({ service: s, pods: pods(1), nodes, slices: [] })), 0);
  });
});

describe("new slices (§1.6)", () => {
  test("generateName, labels (Service labels minus reserved), controller owner reference", () => {
    const svc = service("web", (s) => {
      s.metadata.labels = { team: "a", "kubernetes.io/service-name": "spoof" };
    });
    const [slice] = reconcileService({ service: svc, pods: pods(1), nodes, slices: [] }).create;
    assert.equal(slice!.metadata.generateName, "web-");
    assert.equal(slice!.metadata.name, undefined);
    assert.deepEqual(slice!.metadata.labels, {
      team: "a",
      "kubernetes.io/service-name": "web",
      "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
    });
    assert.deepEqual(slice!.metadata.ownerReferences, [
      {
        apiVersion: "v1",
        kind: "Service",
        name: "web",
        uid: "uid-web",
        controller: true,
        blockOwnerDeletion: true,
      },
    ]);
  });

  test("a Service label change updates labels only; reserved labels never trigger an update", () => {
    const stored = settle(service("web"), pods(2));
    const relabelled = service("web", (s) => {
      s.metadata.labels = { team: "b" };
    });
    const w = reconcileService({ service: relabelled, pods: pods(2), nodes, slices: stored });
    assert.deepEqual([w.update.length, w.update[0]?.metadata.labels?.team], [1, "b"]);
    const reserved = service("web", (s) => {
      s.metadata.labels = { "service.kubernetes.io/headless": "" };
    });
    assert.equal(
      writeCount(reconcileService({ service: reserved, pods: pods(2), nodes, slices: stored })),
      0,
    );
  });

  test("the trigger time is an input: set on written slices, absent removes it", () => {
    const svc = service("web");
    const t = "2026-01-01T00:00:00.5Z";
    const w = reconcileService({ service: svc, pods: pods(1), nodes, slices: [] }, { triggerTime: t });
    assert.equal(w.create[0]!.metadata.annotations?.["endpoints.kubernetes.io/last-change-trigger-time"], t);
    const stored = applySliceWrites([], w, sequentialNames());
    const again = reconcileService({ service: svc, pods: pods(2), nodes, slices: stored });
    assert.equal(again.update[0]!.metadata.annotations, undefined);
  });
});

describe("endpoints (§1.5)", () => {
  const svc = service("web");
  const only = (s: Service, p: Pod) =>
    reconcileService({ service: s, pods: [p], nodes, slices: [] }).create[0]!.endpoints![0]!;

  test("serving = Ready, terminating = deletionTimestamp, ready = serving and not terminating", () => {
    const notReady = only(
      svc,
      pod(0, "web", (p) => {
        p.status.conditions = [{ type: "Ready", status: "False" }];
      }),
    );
    assert.deepEqual(notReady.conditions, { ready: false, serving: false, terminating: false });
    const leaving = only(
      svc,
      pod(0, "web", (p) => {
        p.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
      }),
    );
    assert.deepEqual(leaving.conditions, { ready: false, serving: true, terminating: true });
  });

  test("publishNotReadyAddresses makes every endpoint ready", () => {
    const pub = service("web", (s) => {
      s.spec.publishNotReadyAddresses = true;
    });
    const ep = only(
      pub,
      pod(0, "web", (p) => {
        p.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
        p.status.conditions = [];
      }),
    );
    assert.deepEqual(ep.conditions, { ready: true, serving: false, terminating: true });
  });

  test("nodeName, zone from the Node, targetRef without resourceVersion", () => {
    const ep = only(
      svc,
      pod(0, "web", (p) => {
        p.metadata.resourceVersion = "7";
      }),
    );
    assert.deepEqual(
      [ep.nodeName, ep.zone, ep.targetRef],
      ["node-0", "zone-a", { kind: "Pod", namespace: "default", name: "web-0", uid: "uid-web-0" }],
    );
  });

  test("hostname only when subdomain names the Service", () => {
    const named = (sub: string) =>
      only(
        svc,
        pod(0, "web", (p) => {
          p.spec.hostname = "h0";
          p.spec.subdomain = sub;
        }),
      );
    assert.equal(named("web").hostname, "h0");
    assert.equal(named("other").hostname, undefined);
  });

  test("terminal Pods and Pods without an IP are left out; terminating Pods stay", () => {
    const list = [
      pod(0, "web", (p) => {
        p.status.phase = "Succeeded";
      }),
      pod(1, "web", (p) => {
        p.status.phase = "Failed";
      }),
      pod(2, "web", (p) => {
        delete p.status.podIP;
        p.status.podIPs = [];
      }),
      pod(3, "web", (p) => {
        p.metadata.deletionTimestamp = "2026-01-01T00:00:00Z";
      }),
    ];
    const w = reconcileService({ service: svc, pods: list, nodes, slices: [] });
    assert.deepEqual(
      w.create[0]!.endpoints!.map((e) => e.targetRef?.name),
      ["web-3"],
    );
  });

  test("a Pod on a missing Node is skipped with a finding, unless not-ready addresses are published", () => {
    const lost = pod(0, "web", (p) => {
      p.spec.nodeName = "gone";
    });
    const w = reconcileService({ service: svc, pods: [lost, pod(1, "web")], nodes, slices: [] });
    assert.equal(w.create[0]!.endpoints!.length, 1);
    assert.deepEqual(
      w.findings.map((f) => f.code),
      ["endpointslice_pod_node_missing"],
    );
    const pub = service("web", (s) => {
      s.spec.publishNotReadyAddresses = true;
    });
    const kept = reconcileService({ service: pub, pods: [lost], nodes, slices: [] }).create[0]!
      .endpoints![0]!;
    assert.deepEqual([kept.nodeName, kept.zone], ["gone", undefined]);
  });

  test("only nodeName, zone, conditions or the Pod reference count as a change", () => {
    const stored = settle(svc, pods(3));
    const relabelled = pods(3).map((p) => ({
      ...p,
      metadata: { ...p.metadata, labels: { app: "web", v: "2" } },
    }));
    assert.equal(writeCount(reconcileService({ service: svc, pods: relabelled, nodes, slices: stored })), 0);
    const zoned = new Map(nodes).set("node-1", node("node-1", "zone-z"));
    assert.equal(
      reconcileService({ service: svc, pods: pods(3), nodes: zoned, slices: stored }).update.length,
      1,
    );
    const reborn = pods(3).map((p, i) => (i === 2 ? { ...p, metadata: { ...p.metadata, uid: "new" } } : p));
    assert.equal(reconcileService({ service: svc, pods: reborn, nodes, slices: stored }).update.length, 1);
  });

  test("a Pod with a loopback IP is reported: the API server would reject the write", () => {
    const w = reconcileService({
      service: svc,
      pods: [
        pod(0, "web", (p) => {
          p.status.podIPs = [{ ip: "127.0.0.1" }];
        }),
      ],
      nodes,
      slices: [],
    });
    assert.deepEqual(
      w.findings.map((f) => [f.code, f.severity]),
      [["endpointslice_write_rejected", "error"]],
    );
  });
});

describe("hints (§1.8)", () => {
  test("PreferClose gives ready endpoints a zone hint; without it hints are removed", () => {
    const close = service("web", (s) => {
      s.spec.trafficDistribution = "PreferClose";
    });
    const list = [
      pod(0, "web"),
      pod(1, "web", (p) => {
        p.status.conditions = [];
      }),
    ];
    const [slice] = reconcileService({ service: close, pods: list, nodes, slices: [] }).create;
    assert.deepEqual(
      slice!.endpoints!.map((e) => e.hints),
      [{ forZones: [{ name: "zone-a" }] }, undefined],
    );
    const stored = applySliceWrites([], { create: [slice!], update: [], delete: [] }, sequentialNames());
    const plain = reconcileService({ service: service("web"), pods: list, nodes, slices: stored });
    assert.equal(plain.update.length, 1);
    assert.ok(plain.update[0]!.endpoints!.every((e) => e.hints === undefined));
  });

  test("PreferSameNode adds a node hint", () => {
    const same = service("web", (s) => {
      s.spec.trafficDistribution = "PreferSameNode";
    });
    const [slice] = reconcileService({ service: same, pods: pods(1), nodes, slices: [] }).create;
    assert.deepEqual(slice!.endpoints![0]!.hints, {
      forZones: [{ name: "zone-a" }],
      forNodes: [{ name: "node-0" }],
    });
  });
});
