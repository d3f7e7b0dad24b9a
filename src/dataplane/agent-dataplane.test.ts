/**
 * AgentDataplane against a fake nft: applies when the ruleset text changes, not when it
 * does not, keeps the previous table when nft refuses, and retries on the next snapshot.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { readManifests } from "../cluster/manifest-files.ts";
import { PasslbError } from "../errors.ts";
import { decodeDocuments } from "../k8s/decode.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { AgentDataplane } from "./agent-dataplane.ts";
import type { AgentNft } from "./agent-nft.ts";

async function quickstart(): Promise<Snapshot> {
  const read = await readManifests(["test/fixtures/lab/agent/quickstart.yaml"], async () => "");
  return decodeDocuments(read.documents).snapshot;
}

function fakeNft() {
  const applied: string[] = [];
  let refuse = false;
  const nft: AgentNft = {
    apply: async (script) => {
      if (refuse) throw new PasslbError("nft_failed", "nft -f - failed (exit 1): Error: simulated");
      applied.push(script);
    },
    check: async () => {},
    remove: async () => {
      applied.push("<removed>");
    },
  };
  return { nft, applied, refuse: (on: boolean) => (refuse = on) };
}

test("applies on change only; a refused apply is reported and retried", async () => {
  const snap = await quickstart();
  const fake = fakeNft();
  const logs: string[] = [];
  const dp = new AgentDataplane({ node: "node-a1", nft: fake.nft, log: (l) => logs.push(l) });
  assert.equal(await dp.update(snap), "applied");
  assert.equal(await dp.update({ ...snap }), "unchanged", "same rules, no transaction");
  assert.equal(fake.applied.length, 1);
  assert.match(fake.applied[0]!, /^table inet passlb-agent\ndelete table inet passlb-agent\n/);

  // a Service disappears: new text, but nft refuses it
  const fewer = { ...snap, services: snap.services.filter((s) => s.metadata.name !== "dns") };
  fake.refuse(true);
  assert.equal(await dp.update(fewer), "failed");
  assert.ok(
    logs.some((l) => l.startsWith("error nft_failed:")),
    logs.join("\n"),
  );
  fake.refuse(false);
  assert.equal(await dp.update(fewer), "applied", "the next snapshot tries again");
  assert.equal(fake.applied.length, 2);
  assert.doesNotMatch(fake.applied[1]!, /demo\/dns/);

  await dp.close();
  assert.equal(fake.applied.at(-1), "<removed>");
});
