import assert from "node:assert/strict";
import { test } from "node:test";
import { Command } from "commander";
import { decodeDocuments } from "../k8s/decode.ts";
import { parseDocuments } from "../k8s/documents.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { addGkeOptions, type GkeCliOptions, runGke } from "./provider-gke.ts";

const MANIFEST = `
apiVersion: v1
kind: Namespace
metadata: {name: kube-system, uid: kubesystem-uid1}
---
apiVersion: v1
kind: Node
metadata: {name: n1, labels: {topology.kubernetes.io/zone: zone-a}}
spec: {providerID: gce://p/zone-a/n1, podCIDR: 10.0.0.0/24}
status: {conditions: [{type: Ready, status: "True"}]}
---
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default, uid: 12345678-0000-0000-0000-000000000000}
spec: {type: LoadBalancer, ports: [{name: web, port: 80}, {name: dns, port: 53, protocol: UDP}]}
`;

function snapshot(): Snapshot {
  const { documents } = parseDocuments("m.yaml", MANIFEST);
  const decoded = decodeDocuments(documents);
  assert.deepEqual(decoded.problems, []);
  return decoded.snapshot;
}

function run(argv: string[], output: "text" | "json" | "yaml" = "json") {
  const cmd = addGkeOptions(new Command().exitOverride());
  cmd.parse(argv, { from: "user" });
  let out = "";
  let err = "";
  const io = {
    stdout: (t: string) => {
      out += t;
    },
    stderr: (t: string) => {
      err += t;
    },
    readStdin: async () => "",
  };
  const code = runGke(snapshot(), cmd.opts<GkeCliOptions>(), { output, explain: false }, io);
  return { code, out, err };
}

test("flags reach the plan: before 1.37 a mixed-protocol target pool is rejected and exits 1", () => {
  const r = run(["--gke-version", "1.36.5-gke.100"]);
  assert.equal(r.code, 1);
  const plans = JSON.parse(r.out) as { path: string; provisioned: boolean }[];
  assert.equal(plans[0]?.path, "target-pool");
  assert.equal(plans[0]?.provisioned, false);
});

test("--gke-flag turns RBS on by default before 1.37 and the plan is clean", () => {
  const r = run(["--gke-version", "1.36.5-gke.100", "--gke-flag", "enable-l4-netlb-rbs-by-default=true"]);
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /"path": "rbs-neg"/);
});

test("--no-gke-subsetting and the default version are honoured", () => {
  const r = run(["--no-gke-subsetting"], "text");
  assert.equal(r.code, 0, r.err);
  assert.match(r.out, /backend service \+ GCE_VM_IP NEGs/);
});

test("bad version, unknown flag and bad subnet kind exit 2 with a message", () => {
  assert.equal(run(["--gke-version", "latest"]).code, 2);
  const f = run(["--gke-flag", "enable-everything=true"]);
  assert.equal(f.code, 2);
  assert.match(f.err, /known NAME/);
  assert.equal(run(["--gke-subnet-ipv6", "some"]).code, 2);
});
