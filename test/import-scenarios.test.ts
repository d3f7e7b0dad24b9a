/**
 * Golden scenarios for `passlb import`: each folder under test/fixtures/import holds an
 * `args` file (the command line after `import`; $DIR is the folder) — most point at the
 * tool's manifests in examples/migrate/ — and expected.txt: exit code, stdout (the
 * LoadBalancerIPPools and LoadBalancerBGPPeers) and stderr (the report), reviewed once by a
 * person. Every object printed must also pass its CRD's structural schema
 * (deploy/crd-loadbalancerippools.yaml, crd-loadbalancerbgppeers.yaml) and passlb's own
 * decoding, so the output can be applied as it is.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { parse, parseAllDocuments } from "yaml";
import { decodeBgpAdvertisement } from "../src/k8s/load-balancer-bgp-advertisement.ts";
import { decodeBgpPeer } from "../src/k8s/load-balancer-bgp-peer.ts";
import { LoadBalancerIPPoolSchema } from "../src/k8s/load-balancer-ip-pool.ts";
import { assertGolden } from "./golden.ts";
import { runCli } from "./run-cli.ts";
import { validateAgainst } from "./support/openapi-check.ts";

const ROOT = "test/fixtures/import";
const schemaOf = (file: string) =>
  (
    parse(readFileSync(file, "utf8")) as {
      spec: { versions: { schema: { openAPIV3Schema: unknown } }[] };
    }
  ).spec.versions[0]?.schema.openAPIV3Schema;
const poolSchema = schemaOf("deploy/crd-loadbalancerippools.yaml");
const peerSchema = schemaOf("deploy/crd-loadbalancerbgppeers.yaml");
const advertisementSchema = schemaOf("deploy/crd-loadbalancerbgpadvertisements.yaml");

for (const name of readdirSync(ROOT).sort()) {
  const dir = join(ROOT, name);
  test(`import scenario: ${name}`, async () => {
    const line = readFileSync(join(dir, "args"), "utf8").trim();
    const args = line.split(/\s+/).map((a) => a.replaceAll("$DIR", dir));
    const run = await runCli(["import", ...args]);
    assertGolden(
      join(dir, "expected.txt"),
      `exit: ${run.exitCode}\n--- stdout\n${run.stdout}--- stderr\n${run.stderr}`,
    );
    if (run.exitCode !== 0) {
      assert.equal(run.stdout, "", "nothing is written on error");
      return;
    }
    const pools = args.includes("json")
      ? (JSON.parse(run.stdout) as { items: unknown[] }).items
      : parseAllDocuments(run.stdout).map((d) => d.toJS() as unknown);
    for (const p of pools) {
      if ((p as { kind?: string }).kind === "LoadBalancerBGPPeer") {
        assert.deepEqual(validateAgainst(peerSchema, p), [], JSON.stringify(p));
        assert.deepEqual(decodeBgpPeer(p).problems, [], JSON.stringify(p));
        continue;
      }
      if ((p as { kind?: string }).kind === "LoadBalancerBGPAdvertisement") {
        assert.deepEqual(validateAgainst(advertisementSchema, p), [], JSON.stringify(p));
        assert.deepEqual(decodeBgpAdvertisement(p).problems, [], JSON.stringify(p));
        continue;
      }
      assert.deepEqual(validateAgainst(poolSchema, p), [], JSON.stringify(p));
      assert.ok(LoadBalancerIPPoolSchema.safeParse(p).success, JSON.stringify(p));
    }
  });
}

test("TCP MD5 keys are never printed: not in passlb import's report, not in passlb plan", async () => {
  const imported = await runCli(["import", "-f", join(ROOT, "metallb-bgp-every-field", "metallb.yaml")]);
  assert.equal(imported.exitCode, 0);
  assert.match(imported.stdout, /password: rr key/, "the object to apply carries it");
  assert.doesNotMatch(imported.stderr, /rr key/, "the report does not");
  for (const output of ["yaml", "json", "text"]) {
    const dir = "test/fixtures/plan/announce-bgp";
    const plan = await runCli([
      "plan",
      "-f",
      "test/fixtures/plan/_base",
      "-f",
      join(dir, "input.yaml"),
      "--announce",
      "bgp",
      "--peer-label",
      "passlb.io/lb-host",
      ...(output === "text" ? [] : ["-o", output]),
    ]);
    assert.equal(plan.exitCode, 0, plan.stderr);
    assert.doesNotMatch(plan.stdout + plan.stderr, /plan-must-not-print-this-key/, output);
    assert.match(plan.stdout, /tor-r1/, "the peer is shown, by name");
  }
});
