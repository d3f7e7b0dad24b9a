/**
 * The typed agent transaction (agentRuleset → NftDriver.run) leaves the kernel with the
 * same table as the block-form text it replaced: each committed block-form golden
 * (test/fixtures/lab/agent/*.golden.nft, before they were re-baselined) applied with
 * `nft -f` in one throwaway namespace, the transaction in another, then
 * `nft -j list table inet passlb-agent` compared without handles. Named sets' elements are
 * compared as sets: the kernel's hash sets list them in hash order. Root with nft only.
 */
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { readManifests } from "../../src/cluster/manifest-files.ts";
import { createNftDriver } from "../../src/drivers/nft.ts";
import { decodeDocuments } from "../../src/k8s/decode.ts";
import { agentRulesFromSnapshot } from "../../src/node-agent/agent-rules-snapshot.ts";
import { type AgentRulesetOptions, agentRuleset } from "../../src/node-agent/agent-ruleset.ts";
import { kernelSkipReason } from "../netns.ts";

const FIXTURES = "test/fixtures/lab/agent";
const CASES: readonly { golden: string; node: string; options?: AgentRulesetOptions }[] = [
  { golden: "node-a1.golden.nft", node: "node-a1" },
  { golden: "node-b2.golden.nft", node: "node-b2" },
  { golden: "node-c1.golden.nft", node: "node-c1" },
  { golden: "node-a1.mss.golden.nft", node: "node-a1", options: { mss: { 4: 1424, 6: 1384 } } },
];

function listing(ns: string): unknown {
  const out = execFileSync(
    "ip",
    ["netns", "exec", ns, "nft", "-j", "list", "table", "inet", "passlb-agent"],
    {
      encoding: "utf8",
    },
  );
  const items = (JSON.parse(out) as { nftables: Record<string, unknown>[] }).nftables;
  return items.filter((i) => !("metainfo" in i)).map((i) => withoutHandles(i, false));
}

function withoutHandles(v: unknown, sortElems: boolean): unknown {
  if (Array.isArray(v)) {
    const a = v.map((x) => withoutHandles(x, false));
    return sortElems ? a.map((x) => JSON.stringify(x)).sort() : a;
  }
  if (v === null || typeof v !== "object") return v;
  const o: Record<string, unknown> = {};
  for (const [k, x] of Object.entries(v as Record<string, unknown>))
    if (k !== "handle") o[k] = withoutHandles(x, k === "elem");
  return o;
}

test("the agent's transaction leaves the same kernel table as the block-form goldens (root with nft only)", async (t) => {
  const why = kernelSkipReason();
  if (why) return t.skip(why);
  const read = await readManifests([`${FIXTURES}/quickstart.yaml`, `${FIXTURES}/extra.yaml`], async () => "");
  const snap = decodeDocuments(read.documents).snapshot;
  const [a, b] = [`plbagentops${process.pid}-a`, `plbagentops${process.pid}-b`];
  try {
    for (const ns of [a, b]) execFileSync("ip", ["netns", "add", ns]);
    const nft = createNftDriver({ netns: b });
    // one after another in the same two namespaces: each also replaces the previous table
    for (const c of CASES) {
      const text = readFileSync(`${FIXTURES}/${c.golden}`, "utf8");
      assert.match(
        text,
        /^table inet passlb-agent\ndelete table inet passlb-agent\ntable inet passlb-agent \{\n/,
      );
      execFileSync("ip", ["netns", "exec", a, "nft", "-f", "-"], { input: text });
      await nft.run(agentRuleset(agentRulesFromSnapshot(snap, c.node), c.options));
      assert.deepEqual(listing(b), listing(a), c.golden);
    }
  } finally {
    for (const ns of [a, b]) spawnSync("ip", ["netns", "del", ns]);
  }
});
