/**
 * Azure scenarios: each folder under test/fixtures/azure/ holds `service.yaml` (the `-f`
 * manifests), `scenario.json` (`covers`: the spec rule it pins; `options`: AzureOptions
 * overrides) and `expected.golden.json` (what `planAzure` returns, reviewed against
 * cloud-provider-azure `pkg/provider/azure_loadbalancer_healthprobe.go` and
 * `azure_loadbalancer.go`, as docs/providers-azure.md describes). `UPDATE_GOLDEN=1` rewrites the goldens.
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { parseDocuments } from "../src/k8s/documents.ts";
import { AZURE_DEFAULTS, type AzureOptions } from "../src/providers/azure/azure-model.ts";
import { planAzure } from "../src/providers/azure/azure-plan.ts";
import { assertGolden } from "./golden.ts";

const root = join(import.meta.dirname, "fixtures", "azure");

for (const name of readdirSync(root).sort()) {
  const dir = join(root, name);
  const scenario = JSON.parse(readFileSync(join(dir, "scenario.json"), "utf8")) as {
    covers: string;
    options?: Partial<AzureOptions>;
  };
  test(`azure ${name}: ${scenario.covers}`, () => {
    const parsed = parseDocuments("service.yaml", readFileSync(join(dir, "service.yaml"), "utf8"));
    const decoded = decodeDocuments(parsed.documents);
    assert.deepEqual([...parsed.problems, ...decoded.problems], [], "the scenario manifest must be valid");
    const options: AzureOptions = { ...AZURE_DEFAULTS, ...scenario.options };
    assertGolden(join(dir, "expected.golden.json"), planAzure(decoded.snapshot, options));
  });
}
