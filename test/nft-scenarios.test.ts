/**
 * Golden nftables rulesets: each folder under test/fixtures/nft holds an input.yaml (with
 * the shared _base cluster) and `unhealthy.txt` (nodes that fail their checks afterwards).
 * The full ruleset (`ruleset.nft`) and the incremental update to the unhealthy state
 * (`update.nft`) are pinned. As root, both are also fed to the real nft in a throwaway
 * namespace: the full ruleset is checked and applied, the update applied on top, and the
 * table read back must equal the desired state — so golden text cannot drift from what
 * the kernel accepts. Every ruleset has the `untrack` chain and its `dsr4`/`dsr6` sets (a
 * VIP's TCP SYN is not tracked, so flows are pinned where replies bypass the LB host).
 */
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { readManifests } from "../src/cluster/manifest-files.ts";
import { createNftDriver } from "../src/drivers/nft.ts";
import { nftScript } from "../src/drivers/nft-transaction.ts";
import { ALL_UNKNOWN, type HealthLookup, serviceForwarding } from "../src/forwarding/forwarding-state.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { desiredNftState } from "../src/lb-host/nftables/render/desired-state.ts";
import { emptyNftState, type NftState } from "../src/lb-host/nftables/render/nft-state.ts";
import { renderElementUpdates, renderRuleset } from "../src/lb-host/nftables/render/render-ruleset.ts";
import { planSnapshot } from "../src/plan/planner.ts";
import { assertGolden } from "./golden.ts";
import { kernelSkipReason, withNetns } from "./netns.ts";
import { assertSameTable } from "./nft-table-assert.ts";

const ROOT = "test/fixtures/nft";
const SEED = 0x2a;
const SIZE = 31; // small tables keep the goldens readable; the kernel path is the same

async function scenario(dir: string) {
  const read = await readManifests([join(ROOT, "_base"), join(dir, "input.yaml")], async () => "");
  const { snapshot, problems } = decodeDocuments(read.documents);
  assert.deepEqual(problems, []);
  const { plans } = planSnapshot(snapshot);
  const unhealthy = new Set(
    readFileSync(join(dir, "unhealthy.txt"), "utf8")
      .split("\n")
      .filter((l) => l.trim() !== "" && !l.startsWith("#")),
  );
  const health: HealthLookup = (_s, _c, node) => ({ state: unhealthy.has(node) ? "unhealthy" : "healthy" });
  const state = (lookup: HealthLookup, previous: NftState) =>
    desiredNftState({
      table: "passlb",
      seed: SEED,
      zones: snapshot.config.zones,
      previous,
      forwardings: plans.map((p) => serviceForwarding(p, lookup, { seed: SEED, sizeFor: () => SIZE })),
    });
  const before = state(ALL_UNKNOWN, emptyNftState("passlb"));
  const after = state(health, before);
  return { before, after };
}

const skip = kernelSkipReason();
for (const name of readdirSync(ROOT).sort()) {
  if (name.startsWith("_")) continue;
  const dir = join(ROOT, name);
  test(`nft scenario: ${name}`, async (t) => {
    const { before, after } = await scenario(dir);
    const full = renderRuleset(before);
    const update = renderElementUpdates(before, after);
    assertGolden(join(dir, "ruleset.nft"), nftScript(full));
    assertGolden(join(dir, "update.nft"), nftScript(update));
    assert.deepEqual(renderElementUpdates(after, after).ops, [], "an unchanged state renders nothing");
    if (skip) return t.skip(skip);
    await withNetns("gold", async (ns) => {
      const nft = createNftDriver({ netns: ns });
      await nft.check(full);
      await nft.run(full);
      assertSameTable(await nft.dump("passlb"), before);
      await nft.run(update);
      assertSameTable(await nft.dump("passlb"), after);
    });
  });
}
