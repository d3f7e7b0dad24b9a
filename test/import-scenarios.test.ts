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
      assert.deepEqual(validateAgainst(poolSchema, p), [], JSON.stringify(p));
      assert.ok(LoadBalancerIPPoolSchema.safeParse(p).success, JSON.stringify(p));
    }
  });
}
