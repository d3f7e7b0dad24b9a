import assert from "node:assert/strict";
import { test } from "node:test";
import { readManifests } from "../cluster/manifest-files.ts";
import type { HealthLookup, HealthState } from "../forwarding/forwarding-state.ts";
import { decodeDocuments } from "../k8s/decode.ts";
import { LbForwardings } from "./lb-forwardings.ts";

async function snapshot() {
  const read = await readManifests(
    ["test/fixtures/nft/_base", "test/fixtures/nft/cluster-ranges/input.yaml"],
    async () => "",
  );
  return decodeDocuments(read.documents).snapshot;
}

test("Services on the same nodes behind the same check share one selection; unchanged ones are reused", async () => {
  const snap = await snapshot();
  const states = new Map<string, HealthState>();
  let lookups = 0;
  const health: HealthLookup = (_s, _c, node) => {
    lookups++;
    return { state: states.get(node) ?? "healthy" };
  };
  const f = new LbForwardings({ seed: 5, sizeFor: () => 31 });
  const first = f.update(snap, false, health, 1);
  assert.ok(first.length >= 2, "the fixture has several Services");
  const tables = new Set(first.flatMap((fw) => fw.listeners.map((l) => l.table)));
  const listeners = first.flatMap((fw) => fw.listeners).length;
  assert.ok(tables.size < listeners, `${listeners} listeners share ${tables.size} tables`);

  // same version: no lookups, the same objects
  lookups = 0;
  const again = f.update(snap, false, health, 1);
  assert.equal(lookups, 0);
  assert.deepEqual(
    again.map((fw, i) => fw === first[i]),
    first.map(() => true),
  );

  // a new version with the same answers: lookups, but still the same objects
  const same = f.update(snap, false, health, 2);
  assert.ok(lookups > 0);
  assert.deepEqual(
    same.map((fw, i) => fw === first[i]),
    first.map(() => true),
  );

  // a node goes down: every Service that has it as a member changes, the others do not
  states.set("node-a1", "unhealthy");
  const moved = f.update(snap, false, health, 3);
  for (const [i, fw] of moved.entries()) {
    const hasNode = fw.plan.members.some((m) => m.node === "node-a1");
    assert.equal(fw !== first[i], hasNode, fw.service);
    if (hasNode) assert.ok(fw.listeners.every((l) => l.backends.every((b) => b.node !== "node-a1")));
  }
});

test("Services of other address families do not share a selection: health is probed per family", async () => {
  const snap = await snapshot();
  const dual = {
    ...snap,
    services: snap.services.map((s) =>
      s.metadata.name === "dns"
        ? {
            ...s,
            spec: {
              ...s.spec,
              ipFamilyPolicy: "RequireDualStack" as const,
              ipFamilies: ["IPv4" as const, "IPv6" as const],
            },
          }
        : s,
    ),
  };
  // as ProberHealth answers: the dual-stack Service also reads the node's IPv6 target,
  // which fails on node-a1
  const health: HealthLookup = (service, _c, node) => ({
    state: service === "edge/dns" && node === "node-a1" ? "unhealthy" : "healthy",
  });
  const f = new LbForwardings({ seed: 5, sizeFor: () => 31 });
  const out = f.update(dual, false, health, 1);
  const nodes = (service: string) =>
    out.find((fw) => fw.service === service)!.listeners[0]!.backends.map((b) => b.node);
  assert.ok(!nodes("edge/dns").includes("node-a1"), "dns: node-a1 out");
  assert.ok(nodes("edge/web").includes("node-a1"), "web (IPv4 only): node-a1 still serves");
});
