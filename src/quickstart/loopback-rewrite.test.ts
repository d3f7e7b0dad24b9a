import assert from "node:assert/strict";
import { test } from "node:test";
import { decodeDocuments } from "../k8s/decode.ts";
import { parseDocuments } from "../k8s/documents.ts";
import { loopbackAddress, loopbackCidr, loopbackPort, loopbackSnapshot } from "./loopback-rewrite.ts";

test("addresses map by role and last octet; CIDRs keep their prefix from /24 up", () => {
  assert.equal(loopbackAddress("203.0.113.1", "vip"), "127.0.1.1");
  assert.equal(loopbackAddress("198.51.100.11", "node"), "127.0.2.11");
  assert.equal(loopbackAddress("203.0.113.65", "pod"), "127.0.3.65");
  assert.equal(loopbackAddress("fd00::1", "pod"), undefined);
  assert.equal(loopbackCidr("192.0.2.64/26", "client"), "127.0.4.64/26");
  assert.equal(loopbackCidr("10.0.0.0/8", "client"), "127.0.4.0/24");
  assert.equal(loopbackPort(53), 8053);
  assert.equal(loopbackPort(30080), 30080);
});

const MANIFESTS = `
apiVersion: passlb.io/v1alpha1
kind: PasslbConfig
metadata: { name: default }
spec:
  defaultClass: true
  pools: [{ name: p, addresses: ["203.0.113.1-203.0.113.14", "fd00:10::1-fd00:10::ff"] }]
---
apiVersion: v1
kind: Node
metadata: { name: a }
status:
  addresses: [{ type: InternalIP, address: 198.51.100.11 }, { type: InternalIP, address: fd00::11 }]
---
apiVersion: v1
kind: Node
metadata: { name: b }
status:
  addresses: [{ type: InternalIP, address: 198.51.101.11 }]
---
apiVersion: v1
kind: Service
metadata: { name: s, namespace: d }
spec:
  type: LoadBalancer
  ipFamilyPolicy: PreferDualStack
  ipFamilies: [IPv4, IPv6]
  loadBalancerSourceRanges: ["192.0.2.0/24"]
  ports: [{ port: 53, targetPort: 53, nodePort: 30053, protocol: UDP }]
`;

test("a snapshot: pools, nodes, services rewritten; IPv6 dropped; collisions reported", () => {
  const decoded = decodeDocuments(parseDocuments("t.yaml", MANIFESTS).documents);
  assert.deepEqual(decoded.problems, []);
  const { snapshot, notes } = loopbackSnapshot(decoded.snapshot);
  assert.deepEqual(snapshot.config.pools[0]!.addresses, ["127.0.1.1-127.0.1.14"]);
  assert.deepEqual(snapshot.nodes[0]!.status!.addresses, [{ type: "InternalIP", address: "127.0.2.11" }]);
  const svc = snapshot.services[0]!;
  assert.equal(svc.spec.ports[0]!.port, 8053);
  assert.equal(svc.spec.ports[0]!.targetPort, 8053);
  assert.deepEqual(svc.spec.ipFamilies, ["IPv4"]);
  assert.equal(svc.spec.ipFamilyPolicy, "SingleStack");
  assert.deepEqual(svc.spec.loadBalancerSourceRanges, ["127.0.4.0/24"]);
  assert.deepEqual(notes.map((n) => n.code).sort(), [
    "loopback_address_collision",
    "loopback_ipv6_dropped",
    "loopback_port_shifted",
  ]);
  // the rewrite is deterministic: twice gives the same
  assert.deepEqual(loopbackSnapshot(decoded.snapshot).snapshot, snapshot);
});
