import assert from "node:assert/strict";
import { test } from "node:test";
import { Command } from "commander";
import { parse } from "yaml";
import { decodeDocuments } from "../k8s/decode.ts";
import { parseDocuments } from "../k8s/documents.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { CliIo } from "./load-input.ts";
import { type AzureFlags, addAzureOptions, azureOptionsFrom, runAzure } from "./provider-azure.ts";

const MANIFEST = `
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: default
  uid: 8c2f5a10-4b3e-4d8a-9f61-2e7c0b9d1a35
  annotations:
    service.beta.kubernetes.io/port_443_health-probe_interval: "abc"
spec:
  type: LoadBalancer
  ports:
    - { name: https, port: 443, nodePort: 30443, appProtocol: https }
---
apiVersion: v1
kind: Service
metadata: { name: api, namespace: default, uid: 0a1b2c3d-0000-4000-8000-00000000abcd }
spec:
  type: LoadBalancer
  ports:
    - { name: https, port: 443, nodePort: 31443, appProtocol: https }
`;

function snapshot(text: string): Snapshot {
  const parsed = parseDocuments("test.yaml", text);
  const decoded = decodeDocuments(parsed.documents);
  assert.deepEqual(decoded.problems, []);
  return decoded.snapshot;
}

function capture(): { io: CliIo; out: () => string; err: () => string } {
  let out = "";
  let err = "";
  return {
    io: { stdout: (t) => (out += t), stderr: (t) => (err += t), readStdin: async () => "" },
    out: () => out,
    err: () => err,
  };
}

function parseFlags(args: string[]): AzureFlags {
  const cmd = addAzureOptions(new Command("plan").exitOverride().configureOutput({ writeErr: () => {} }));
  cmd.parse(args, { from: "user" });
  return cmd.opts<AzureFlags>();
}

test("flags: SKU and mode are case-insensitive, defaults fill the rest", () => {
  const options = azureOptionsFrom(
    parseFlags([
      "--azure-sku",
      "basic",
      "--azure-probe-mode",
      "Shared",
      "--azure-shared-probe-port",
      "10257",
    ]),
  );
  assert.ok(typeof options !== "string");
  assert.equal(options.sku, "Basic");
  assert.equal(options.probeMode, "shared");
  assert.equal(options.sharedProbePort, 10257);
  assert.equal(options.sharedProbePath, "/healthz");
});

test("flags: invalid values are usage errors", () => {
  assert.throws(() => parseFlags(["--azure-sku", "Premium"]), /Standard or Basic/);
  assert.throws(() => parseFlags(["--azure-probe-mode", "nodeport"]), /servicenodeport or shared/);
  assert.throws(() => parseFlags(["--azure-shared-probe-port", "0"]), /1 to 65535/);
  assert.equal(typeof azureOptionsFrom({ azureSku: "Premium" }), "string");
});

test("json: one object per Service, exit 1 when any Service is refused", () => {
  const c = capture();
  const code = runAzure(snapshot(MANIFEST), {}, { output: "json", explain: false }, c.io);
  assert.equal(code, 1);
  const plans = JSON.parse(c.out());
  assert.deepEqual(
    plans.map((p: { service: string }) => p.service),
    ["default/api", "default/web"],
  );
  assert.equal(plans[1].error.code, "invalid_probe_interval");
  assert.equal(plans[0].probes[0].properties.protocol, "Https");
});

test("shared mode: nothing is refused, exit 0; yaml carries the same data as json", () => {
  const flags = { azureProbeMode: "shared" };
  const j = capture();
  assert.equal(runAzure(snapshot(MANIFEST), flags, { output: "json", explain: false }, j.io), 0);
  const y = capture();
  assert.equal(runAzure(snapshot(MANIFEST), flags, { output: "yaml", explain: false }, y.io), 0);
  assert.deepEqual(parse(y.out()), JSON.parse(j.out()));
});

test("text: the decision path only with --explain; Basic downgrades Https", () => {
  const plain = capture();
  runAzure(snapshot(MANIFEST), { azureSku: "Basic" }, { output: "text", explain: false }, plain.io);
  assert.match(plain.out(), /Service default\/api {2}\(Azure Basic SKU, load balancer kubernetes\)/);
  assert.match(
    plain.out(),
    /error \(invalid_probe_interval\): service\.beta\.kubernetes\.io\/port_443_health-probe_interval: "abc"/,
  );
  assert.match(plain.out(), /becomes Tcp on the Basic SKU/);
  assert.doesNotMatch(plain.out(), /why:/);
  const explained = capture();
  runAzure(snapshot(MANIFEST), {}, { output: "text", explain: true }, explained.io);
  assert.match(explained.out(), /why:\n {4}- default\/api: externalTrafficPolicy Cluster, Standard SKU/);
});

test("bad flags given directly exit 2 with a message", () => {
  const c = capture();
  assert.equal(
    runAzure(snapshot(MANIFEST), { azureProbeMode: "x" }, { output: "json", explain: false }, c.io),
    2,
  );
  assert.match(c.err(), /--azure-probe-mode: must be servicenodeport or shared/);
  assert.equal(c.out(), "");
});
