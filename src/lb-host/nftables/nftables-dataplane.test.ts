import assert from "node:assert/strict";
import { test } from "node:test";
import { readManifests } from "../../cluster/manifest-files.ts";
import { FakePolicyRoutes } from "../../drivers/fake-ip-routes.ts";
import { FakeNft } from "../../drivers/fake-nft.ts";
import { PasslbError } from "../../errors.ts";
import { ALL_UNKNOWN, type HealthLookup } from "../../forwarding/forwarding-state.ts";
import { decodeDocuments } from "../../k8s/decode.ts";
import type { LbDesiredState } from "../lb-dataplane.ts";
import { LbForwardings } from "../lb-forwardings.ts";
import { NftablesDataplane, type NftablesEvent } from "./nftables-dataplane.ts";
import { nodeCounterName } from "./render/nft-state.ts";
import { serviceCounterName } from "./render/service-part.ts";

const FIX = "test/fixtures/nft";
const FULL = /^add table inet passlb\ndelete table inet passlb\n/;

/** the forwarding state of a fixture scenario, as LbController hands it over */
async function wanted(health: HealthLookup = ALL_UNKNOWN): Promise<LbDesiredState> {
  const read = await readManifests([`${FIX}/_base`, `${FIX}/cluster-ranges/input.yaml`], async () => "");
  const { snapshot, problems } = decodeDocuments(read.documents);
  assert.deepEqual(problems, []);
  const forwardings = new LbForwardings({ seed: 7, sizeFor: () => 31 });
  return { forwarding: forwardings.update(snapshot, false, health, 0), zones: snapshot.config.zones };
}

function dataplane(nft: FakeNft, extra: { routes?: FakePolicyRoutes; schedule?: (ms: number) => void } = {}) {
  const events: NftablesEvent[] = [];
  const d = new NftablesDataplane({
    table: "passlb",
    seed: 7,
    nft,
    onEvent: (e) => events.push(e),
    ...extra,
  });
  return { d, events };
}

test("nftables dataplane: a first apply is a full sync; a new one adopts the table and sends only changes", async () => {
  const nft = new FakeNft();
  const first = dataplane(nft).d;
  assert.deepEqual(await first.start(), { adopted: false, replaced: false });
  const state = await wanted();
  const r = await first.apply(state);
  assert.equal(r.mode, "full");
  assert.equal(r.bytes, nft.scripts[0]!.length);
  assert.match(nft.scripts[0]!, FULL);
  await first.stop();
  const { d, events } = dataplane(nft);
  assert.deepEqual(await d.start(), { adopted: true, replaced: false });
  assert.ok(events.some((e) => e.kind === "adopted"));
  const same = await d.apply(state);
  assert.deepEqual([same.ops, same.mode, same.bytes], [0, "noop", 0]);
  const moved = await d.apply(
    await wanted((_s, _c, node) => ({ state: node === "node-a2" ? "unhealthy" : "unknown" })),
  );
  assert.equal(moved.mode, "incremental");
  assert.ok(
    nft.scripts
      .at(-1)!
      .split("\n")
      .every((l) => l === "" || /^(add|delete) element inet passlb m1 /.test(l)),
  );
});

test("nftables dataplane: a failed transaction throws, and the next apply is a full sync", async () => {
  const nft = new FakeNft();
  const { d } = dataplane(nft);
  await d.start();
  await d.apply(await wanted());
  nft.failNext = new PasslbError("nft_failed", "boom");
  const unhealthy = await wanted((_s, _c, node) => ({ state: node === "node-a2" ? "unhealthy" : "unknown" }));
  await assert.rejects(d.apply(unhealthy), /boom/);
  const retried = await d.apply(unhealthy);
  assert.equal(retried.mode, "full");
  assert.match(nft.scripts.at(-1)!, FULL);
});

test("nftables dataplane: check() finds a flushed table and deleted routes and restores them itself", async () => {
  const nft = new FakeNft();
  const routes = new FakePolicyRoutes();
  const { d, events } = dataplane(nft, { routes });
  await d.start();
  await d.apply(await wanted());
  const clean = await nft.dump("passlb");
  assert.deepEqual(await d.check(), []);
  nft.flushTable("passlb");
  routes.deleteRules(4);
  const drifted = await d.check();
  assert.equal(drifted.length, 2);
  assert.match(drifted[0]!, /rules changed/);
  assert.match(drifted[1]!, /^policy rule missing/);
  assert.deepEqual(
    events.filter((e) => e.kind === "drift").map((e) => e.kind === "drift" && e.scope),
    ["routes", "table"],
  );
  assert.match(nft.scripts.at(-1)!, FULL, "restored by a full sync");
  assert.deepEqual(await nft.dump("passlb"), clean);
  assert.deepEqual(await d.check(), [], "and nothing differs any more");
});

test("nftables dataplane: with schedule, check() asks for the repair apply instead", async () => {
  const nft = new FakeNft();
  const asked: number[] = [];
  const { d } = dataplane(nft, { schedule: (ms) => asked.push(ms) });
  await d.start();
  const state = await wanted();
  await d.apply(state);
  const sent = nft.scripts.length;
  nft.deleteTable("passlb");
  assert.deepEqual(await d.check(), ["table missing"]);
  assert.deepEqual(asked, [0]);
  assert.equal(nft.scripts.length, sent, "nothing sent by the check");
  assert.equal((await d.apply(state)).mode, "full");
});

test("nftables dataplane: counters per Service and per node from the table's named counters", async () => {
  const nft = new FakeNft();
  const { d } = dataplane(nft);
  await d.start();
  assert.equal((await d.counters()).services.size, 0, "nothing applied: nothing counted");
  await d.apply(await wanted());
  const hops = d.current!.sets.get("nexthops4")!.elements;
  const markA1 = [...hops].find(([, a]) => a === "198.51.100.11")![0];
  nft.count("passlb", nodeCounterName(Number(markA1)), 3, 300);
  nft.count("passlb", serviceCounterName("edge/web"), 2, 120);
  const c = await d.counters();
  assert.deepEqual(c.nodes.get("node-a1"), { packets: 3, bytes: 300 });
  assert.deepEqual(c.services.get("edge/web"), { packets: 2, bytes: 120 });
  assert.equal(c.reasons.size, 0);
  assert.equal(c.flows, undefined);
});
