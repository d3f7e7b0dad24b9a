import assert from "node:assert/strict";
import { test } from "node:test";
import { ServiceSchema } from "../../k8s/objects.ts";
import { chooseController, FINALIZER } from "./gke-controller-choice.ts";
import { gkeFlags } from "./gke-flags.ts";
import { parseGkeVersion } from "./gke-version.ts";

function choose(
  version: string,
  meta: Record<string, unknown> = {},
  spec: Record<string, unknown> = {},
  subsetting?: boolean,
) {
  const v = parseGkeVersion(version)!;
  const service = ServiceSchema.parse({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "s", namespace: "ns", uid: "u", ...meta },
    spec: { type: "LoadBalancer", ports: [{ port: 80 }], ...spec },
  });
  return chooseController(service, { version: v, subsetting, flags: gkeFlags(v), subnetIpv6: "both" });
}

test("version edge of the RBS default: 1.36.x target pool, 1.37 RBS+NEG (spec §1.2 table)", () => {
  assert.equal(choose("1.36.99-gke.9999999").path, "target-pool");
  assert.equal(choose("1.37.0-gke.1").path, "rbs-neg");
});

test("l4-rbs: NEG from 1.32.2-gke.1652000, instance groups below, ignored below 1.25.5", () => {
  const rbs = { annotations: { "cloud.google.com/l4-rbs": "enabled" } };
  assert.equal(choose("1.32.2-gke.1652000", rbs).path, "rbs-neg");
  assert.equal(choose("1.32.2-gke.1651999", rbs).path, "rbs-instance-groups");
  assert.equal(choose("1.25.4-gke.1", rbs).path, "target-pool");
  assert.equal(choose("1.25.5-gke.1", rbs).path, "rbs-instance-groups");
});

test("classes need 1.33.1-gke.1779000; the internal class also needs subsetting", () => {
  const ext = { loadBalancerClass: "networking.gke.io/l4-regional-external" };
  const int = { loadBalancerClass: "networking.gke.io/l4-regional-internal" };
  assert.equal(choose("1.33.1-gke.1778999", {}, ext).path, "none");
  assert.equal(choose("1.33.1-gke.1779000", {}, ext).path, "rbs-neg");
  assert.equal(choose("1.33.1-gke.1779000", {}, int).path, "none");
  assert.equal(choose("1.33.1-gke.1779000", {}, int, true).path, "subsetting-ilb");
});

test("a class makes annotations irrelevant; an unknown class is nobody's", () => {
  const r = choose(
    "1.37.1-gke.1",
    { annotations: { "networking.gke.io/load-balancer-type": "Internal" } },
    {
      loadBalancerClass: "example.com/x",
    },
  );
  assert.equal(r.path, "none");
  assert.equal(r.scheme, null);
});

test("subsetting: new ILBs go to ingress-gce, ILB v1 finalizer stays with the CCM, legacy class forces the CCM", () => {
  const internal = { annotations: { "networking.gke.io/load-balancer-type": "Internal" } };
  assert.equal(choose("1.36.0-gke.1", internal).path, "subsetting-ilb");
  assert.equal(choose("1.35.9-gke.1", internal).path, "ccm-ilb");
  assert.equal(choose("1.35.9-gke.1", internal, {}, true).path, "subsetting-ilb");
  assert.equal(choose("1.36.0-gke.1", { ...internal, finalizers: [FINALIZER.ilbV1] }).path, "ccm-ilb");
  assert.equal(
    choose("1.37.0-gke.1", {}, { loadBalancerClass: "networking.gke.io/l4-regional-internal-legacy" }).path,
    "ccm-ilb",
  );
});

test("finalizers freeze the NetLB backend type whatever the version says", () => {
  assert.equal(choose("1.37.1-gke.1", { finalizers: [FINALIZER.netlbV2] }).path, "rbs-instance-groups");
  assert.equal(choose("1.30.1-gke.1", { finalizers: [FINALIZER.netlbV3] }).path, "rbs-neg");
  assert.equal(choose("1.37.1-gke.1", { finalizers: [FINALIZER.netlbV1] }).path, "target-pool");
  assert.equal(choose("1.37.1-gke.1", { finalizers: [FINALIZER.netlbV1] }).existing, true);
  assert.equal(choose("1.37.1-gke.1").existing, false);
});
