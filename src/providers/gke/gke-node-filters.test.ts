import assert from "node:assert/strict";
import { test } from "node:test";
import { type Node, NodeSchema } from "../../k8s/objects.ts";
import {
  candidateNodeReason,
  ccmStableNodeReason,
  negNodeReason,
  parseProviderId,
} from "./gke-node-filters.ts";

function node(labels: Record<string, string> = {}, ready = true, spec: Record<string, unknown> = {}): Node {
  return NodeSchema.parse({
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "n", labels },
    spec: { providerID: "gce://p/z/n", podCIDR: "10.0.0.0/24", ...spec },
    status: { conditions: [{ type: "Ready", status: ready ? "True" : "False" }] },
  });
}
const EXCLUDE = "node.kubernetes.io/exclude-from-external-load-balancers";

test("exclude label: presence before Kubernetes 1.34, parsed bool from 1.34 (CCM); presence always (ingress-gce)", () => {
  assert.ok(ccmStableNodeReason(node({ [EXCLUDE]: "false" }), 33));
  assert.equal(ccmStableNodeReason(node({ [EXCLUDE]: "false" }), 34), undefined);
  assert.ok(ccmStableNodeReason(node({ [EXCLUDE]: "yes" }), 34));
  assert.ok(candidateNodeReason(node({ [EXCLUDE]: "false" }), true));
});

test("unready: kept by the CCM and by NEG membership, dropped by CandidateNodesFilter", () => {
  assert.equal(ccmStableNodeReason(node({}, false), 34), undefined);
  assert.equal(candidateNodeReason(node({}, false), true), undefined);
  assert.ok(candidateNodeReason(node({}, false), false));
});

test("drain label only matters for NEG membership", () => {
  const drain = node({ "operation.gke.io/type": "drain" });
  assert.ok(candidateNodeReason(drain, true));
  assert.equal(candidateNodeReason(drain, false), undefined);
});

test("NEG needs a gce:// providerID with a zone and a podCIDR", () => {
  assert.deepEqual(parseProviderId("gce://proj/us-east1-b/vm-1"), {
    project: "proj",
    zone: "us-east1-b",
    instance: "vm-1",
  });
  assert.equal(parseProviderId("aws:///us-east-1a/i-123"), undefined);
  assert.ok(negNodeReason(node({}, true, { providerID: "gce://proj//vm" })));
  assert.ok(negNodeReason(node({}, true, { podCIDR: undefined })));
  assert.equal(negNodeReason(node()), undefined);
});
