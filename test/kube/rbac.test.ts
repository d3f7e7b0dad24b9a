/**
 * deploy/'s RBAC against what passlb does, on the strict test API server (which authorizes
 * every request with deploy/'s Roles, ClusterRoles and bindings for the ServiceAccount the
 * component runs as: test/support/fake-api-rbac.ts).
 *
 * One run of every Kubernetes code path passlb has: two controller replicas with
 * --manage-endpointslices (as deploy/components/manage-endpointslices configures it) take
 * the Lease, assign, write status, Events, finalizers and pool status, re-read after a 409,
 * create, update and delete their EndpointSlices, release on delete and fail over; and the
 * LB hosts' cluster source reads what `passlb lb --in-cluster` reads. Then:
 * - sufficient: no request was refused with 403;
 * - least privilege: every granted verb was used by some request (`unusedGrants`), so a
 *   grant no code path needs fails this test until it is removed from deploy/.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { CoreV1Api } from "@kubernetes/client-node";
import { serviceEventRecorder } from "../../src/cli/lb-events.ts";
import { BgpStatusWriter } from "../../src/cluster/bgp-status-writer.ts";
import { ControllerRuntime } from "../../src/controller/controller-runtime.ts";
import { realClock } from "../../src/health/clock.ts";
import type { FakeApiServer } from "../support/fake-api-server.ts";
import { eventually, fakeCluster, kubeSource } from "./kube-fixture.ts";

const ELECTION = { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 250 };
const CONTROLLER = "system:serviceaccount:passlb-system:passlb-controller";
const LB = "system:serviceaccount:passlb-system:passlb-lb";

// biome-ignore lint/suspicious/noExplicitAny: JSON from the fake API server, read only in assertions
type Obj = Record<string, any>;

function replica(api: FakeApiServer, identity: string): ControllerRuntime {
  return new ControllerRuntime({
    kubeConfig: api.kubeConfig("controller"),
    namespace: "passlb-system",
    identity,
    controller: { defaultClass: false, ipMode: "VIP" },
    election: ELECTION,
    manageEndpointSlices: true,
    clock: realClock(),
    random: Math.random,
    tuning: {
      debounce: { quietMs: 20, maxMs: 200 },
      sourceBackoff: { initialMs: 20, maxMs: 200 },
      loopBackoff: { initialMs: 20, maxMs: 200 },
    },
  });
}

const web = (api: FakeApiServer): Obj | undefined =>
  api.find("v1", "Service", "web", "shop") as Obj | undefined;
const leaseOf = (api: FakeApiServer): Obj | undefined =>
  api.find("coordination.k8s.io/v1", "Lease", "passlb-controller", "passlb-system") as Obj | undefined;
const ours = (api: FakeApiServer): Obj[] =>
  api
    .findAll("discovery.k8s.io/v1", "EndpointSlice", "shop")
    .map((o) => o as Obj)
    .filter(
      (s) =>
        s.metadata.labels?.["endpointslice.kubernetes.io/managed-by"] ===
        "endpointslice-controller.passlb.io",
    );

test("deploy/ RBAC: every controller and LB code path runs with no 403, and every grant is used", {
  timeout: 60_000,
}, async (t) => {
  const api = await fakeCluster("../controller/slices.yaml");
  t.after(() => api.close());
  // a 409 on the first status writes: the controller re-reads the Service and the pool (get)
  api.failNext({ verb: "update", resource: "services", subresource: "status", status: 409 });
  api.failNext({
    verb: "update",
    resource: "passlb.io/loadbalancerippools",
    subresource: "status",
    status: 409,
  });
  const a = replica(api, "a");
  const b = replica(api, "b");
  t.after(async () => {
    await a.stop();
    await b.stop();
  });
  await a.start();
  await b.start();
  // as `passlb lb --in-cluster --announce bgp` (no --bgp-peer) watches: LoadBalancerBGPPeers
  // too, and reads the one password Secret deploy/rbac-lb.yaml names
  api.put({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerBGPPeer",
    metadata: { name: "tor-md5" },
    spec: {
      myASN: 64512,
      peerASN: 64500,
      peerAddress: "192.0.2.1",
      passwordSecret: { name: "passlb-bgp-password" },
    },
  });
  api.put({
    apiVersion: "v1",
    kind: "Secret",
    metadata: { name: "passlb-bgp-password", namespace: "passlb-system" },
    type: "kubernetes.io/basic-auth",
    data: { password: Buffer.from("tor key").toString("base64") },
  });
  const lb = kubeSource(api, { bgpPeers: true }, "lb");
  t.after(() => lb.close());
  let lbReads = 0;
  await lb.start({ onChange: () => {}, onRead: (r) => void (r.ok && lbReads++) });

  await eventually(() => (web(api)?.status?.loadBalancer?.ingress ?? []).length === 1, "a VIP", 10_000);
  await eventually(
    () =>
      JSON.stringify(lb.bgpSecrets.get("passlb-system/passlb-bgp-password")) ===
      JSON.stringify({ type: "kubernetes.io/basic-auth", password: "tor key" }),
    "the password Secret read by name",
    10_000,
  );
  // and writes its conditions on the peers and advertisements (status.hosts.<host>)
  const writer = new BgpStatusWriter({ kubeConfig: api.kubeConfig("lb"), host: "lb-1", now: Date.now });
  assert.deepEqual(
    await writer.write([
      {
        kind: "LoadBalancerBGPPeer",
        name: "tor-md5",
        conditions: [{ type: "Accepted", status: "True", reason: "Selected", message: "" }],
      },
    ]),
    [],
  );
  api.put({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerBGPAdvertisement",
    metadata: { name: "all" },
    spec: {},
  });
  assert.deepEqual(
    await writer.write([
      {
        kind: "LoadBalancerBGPAdvertisement",
        name: "all",
        conditions: [{ type: "Accepted", status: "True", reason: "Applied", message: "" }],
      },
    ]),
    [],
  );
  assert.deepEqual(web(api)?.metadata.finalizers, ["service.kubernetes.io/load-balancer-cleanup"]);
  await eventually(() => ours(api)[0]?.endpoints?.length === 2, "passlb's slice", 10_000);
  await eventually(
    () =>
      (api.find("passlb.io/v1alpha1", "LoadBalancerIPPool", "main") as Obj | undefined)?.status?.ipv4
        ?.used === 1,
    "pool status",
  );
  assert.match(String(leaseOf(api)?.spec.renewTime), /\.\d{6}Z$/, "renewTime as MicroTime");

  // an LB host's wire check sees two MACs answer for the VIP: an Event on the Service
  const errors: string[] = [];
  serviceEventRecorder(api.kubeConfig("lb"), "lb-1", (e) => errors.push(e))(
    ["shop/web"],
    "Warning",
    "duplicate_answer",
    "203.0.113.1: 2 answers: 5e:b5:dc:86:86:80 (lb-1), 86:df:f1:ec:47:3e (unknown device)",
  );
  await eventually(
    () =>
      api
        .findAll("v1", "Event", "shop")
        .some((e) => (e as Obj).reason === "DuplicateAnswer" && (e as Obj).source?.component === "passlb-lb"),
    "the LB host's Event on the Service",
  );
  assert.deepEqual(errors, []);

  // a Pod goes unready: the slice is updated
  const pod = api.find("v1", "Pod", "web-2", "shop") as Obj;
  api.put({ ...pod, status: { ...pod.status, conditions: [{ type: "Ready", status: "False" }] } });
  await eventually(
    () => ours(api)[0]?.endpoints?.some((e: Obj) => e.conditions?.ready === false) === true,
    "slice updated",
    10_000,
  );

  // a stale slice of passlb's for the Service (an endpoint no Pod has): the reconciler deletes it
  const first = ours(api)[0] as Obj;
  api.put({
    ...first,
    metadata: { ...first.metadata, name: "web-stale", uid: undefined, resourceVersion: undefined },
    endpoints: [{ addresses: ["198.51.100.99"], conditions: { ready: true }, nodeName: "node-a" }],
  });
  await eventually(
    () => !ours(api).some((x) => x.metadata.name === "web-stale"),
    "the stale slice deleted",
    10_000,
  );

  // the leader stops: the other replica takes the Lease over (get + update)
  const leader = leaseOf(api)?.spec.holderIdentity;
  await (leader === "a" ? a : b).stop();
  const follower = leader === "a" ? "b" : "a";
  await eventually(() => leaseOf(api)?.spec.holderIdentity === follower, "failover", 10_000);

  // the Service is deleted: the finalizer comes off (its slices go by the garbage collector,
  // through their ownerReferences, which is kube-controller-manager's and not emulated)
  await api
    .kubeConfig("admin")
    .makeApiClient(CoreV1Api)
    .deleteNamespacedService({ name: "web", namespace: "shop" });
  await eventually(() => web(api) === undefined, "the Service gone (finalizer removed)", 10_000);
  assert.ok(lbReads > 0, "the LB source read the cluster");

  assert.deepEqual(api.forbidden(), [], "no request was refused by deploy/'s RBAC");
  const events = api
    .requests()
    .filter((r) => r.user === CONTROLLER && r.verb === "create" && r.resource === "events");
  assert.ok(events.length > 0 && events.every((e) => e.status === 201), "Events were recorded");
  assert.deepEqual(api.rbac.unusedGrants(CONTROLLER), [], "every controller grant is used");
  assert.deepEqual(api.rbac.unusedGrants(LB), [], "every LB grant is used");
});
