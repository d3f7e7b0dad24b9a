import assert from "node:assert/strict";
import { test } from "node:test";
import { ServiceSchema } from "../../k8s/objects.ts";
import { gkeContext } from "./gke-context.ts";
import { chooseController } from "./gke-controller-choice.ts";
import { sourceRanges } from "./gke-firewalls.ts";
import { gkeFlags } from "./gke-flags.ts";
import { collapsePorts } from "./gke-ports.ts";
import type { GkeFinding } from "./gke-types.ts";
import { parseGkeVersion } from "./gke-version.ts";

function ranges(spec: Record<string, unknown>, annotations: Record<string, string> = {}) {
  const v = parseGkeVersion("1.37.1-gke.1")!;
  const options = { version: v, flags: gkeFlags(v), subnetIpv6: "both" as const };
  const service = ServiceSchema.parse({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "s", namespace: "ns", uid: "u", annotations },
    spec: { type: "LoadBalancer", ports: [{ port: 80 }], ...spec },
  });
  const { context } = gkeContext(service, chooseController(service, options), options, "uid");
  const findings: GkeFinding[] = [];
  return { ...sourceRanges(context, findings), findings };
}

test("spec ranges win over the annotation, are trimmed, and split by family", () => {
  const r = ranges(
    { loadBalancerSourceRanges: [" 192.0.2.0/24", "2001:db8::/32"] },
    { "service.beta.kubernetes.io/load-balancer-source-ranges": "198.51.100.0/24" },
  );
  assert.deepEqual([r.IPv4, r.IPv6, r.from], [["192.0.2.0/24"], ["2001:db8::/32"], "spec"]);
});

test("an empty family is open to the world", () => {
  const r = ranges({}, { "service.beta.kubernetes.io/load-balancer-source-ranges": "2001:db8::/32" });
  assert.deepEqual(r.IPv4, ["0.0.0.0/0"]);
  assert.equal(r.from, "annotation");
});

test("an invalid annotation entry is a user error naming the annotation", () => {
  const r = ranges({}, { "service.beta.kubernetes.io/load-balancer-source-ranges": "10.0.0.0/8,nope" });
  assert.equal(r.findings[0]?.code, "gke_invalid_source_range");
  assert.match(r.findings[0]?.message ?? "", /Service annotation/);
});

test("consecutive ports collapse into GCE ranges", () => {
  assert.deepEqual(collapsePorts([443, 80, 81, 82]), ["80-82", "443"]);
  assert.deepEqual(collapsePorts([53]), ["53"]);
});
