import assert from "node:assert/strict";
import { test } from "node:test";
import { contentHash, l4Names, legacyName, trimFieldsEvenly } from "./gke-names.ts";

// Expected values are ingress-gce's own namer test vectors (kube-system UID "kubesystem-uid1").
const long1 = "012345678901234567890123456789012345678901234567890123456789abc";
const long2 = "012345678901234567890123456789012345678901234567890123456789pqr";

test("ContentHash of the kube-system UID gives the 8-character cluster part", () => {
  assert.equal(contentHash("kubesystem-uid1", 8), "7kpbhpki");
});

test("short names are kept whole", () => {
  const n = l4Names("kubesystem-uid1", "namespace", "name");
  assert.equal(n.backend, "k8s2-7kpbhpki-namespace-name-956p2p7x");
  assert.equal(n.forwardingRule("tcp"), "k8s2-tcp-7kpbhpki-namespace-name-956p2p7x");
  assert.equal(n.localHealthCheckFirewall, "k8s2-7kpbhpki-namespace-name-956p2p7x-fw");
  assert.equal(n.sharedHealthCheck, "k8s2-7kpbhpki-l4-shared-hc");
  assert.equal(n.sharedHealthCheckFirewall, "k8s2-7kpbhpki-l4-shared-hc-fw");
});

test("long namespace and name are trimmed evenly and suffixes cut the hash, not the limit", () => {
  const n = l4Names("kubesystem-uid1", long1, long2);
  assert.equal(n.backend, "k8s2-7kpbhpki-01234567890123456789-0123456789012345678-hwm400mg");
  assert.equal(n.forwardingRule("udp"), "k8s2-udp-7kpbhpki-012345678901234567-01234567890123456-hwm400mg");
  assert.equal(n.localHealthCheckFirewall, "k8s2-7kpbhpki-01234567890123456789-0123456789012345678-hwm40-fw");
  assert.ok(n.forwardingRule("l3").length <= 63);
});

test("trimFieldsEvenly leaves fitting fields alone", () => {
  assert.deepEqual(trimFieldsEvenly(39, "a", "b"), ["a", "b"]);
});

test("legacy a<uid> drops dashes and keeps 32 characters", () => {
  assert.equal(
    legacyName("12345678-90ab-cdef-1234-567890abcdef"),
    "a1234567890abcdef1234567890abcdef".slice(0, 32),
  );
  assert.equal(legacyName("12345678-90ab-cdef-1234-567890abcdef").length, 32);
});
