import assert from "node:assert/strict";
import { test } from "node:test";
import { readManifests } from "../../cluster/manifest-files.ts";
import type { ConntrackDriver, ConntrackFilter } from "../../drivers/conntrack-tool.ts";
import { FakePolicyRoutes } from "../../drivers/fake-ip-routes.ts";
import { FakeNft } from "../../drivers/fake-nft.ts";
import { PasslbError } from "../../errors.ts";
import type { HealthLookup, HealthState } from "../../forwarding/forwarding-state.ts";
import { realClock } from "../../health/clock.ts";
import { decodeDocuments } from "../../k8s/decode.ts";
import type { Snapshot } from "../../k8s/snapshot.ts";
import type { RouteApplier } from "../routing/policy-routes.ts";
import { type HealthSource, LbController, type LbEvent } from "./lb-controller.ts";
import type { GenerationWatch } from "./nft-generation.ts";
import { nodeTrafficOf, serviceTrafficOf } from "./node-traffic.ts";
import { nodeCounterName } from "./render/nft-state.ts";
import { serviceCounterName } from "./render/service-part.ts";

const FIX = "test/fixtures/nft";

async function snapshotOf(...files: string[]): Promise<Snapshot> {
  const read = await readManifests(
    files.map((f) => `${FIX}/${f}`),
    async () => "",
  );
  const { snapshot, problems } = decodeDocuments(read.documents);
  assert.deepEqual(problems, []);
  return snapshot;
}

class FakeHealth implements HealthSource {
  readonly states = new Map<string, HealthState>();
  #listeners: (() => void)[] = [];
  readonly lookup: HealthLookup = (_s, _c, node) => ({ state: this.states.get(node) ?? "unknown" });
  subscribe(listener: () => void) {
    this.#listeners.push(listener);
    return () => {
      this.#listeners = this.#listeners.filter((l) => l !== listener);
    };
  }
  set(node: string, state: HealthState) {
    this.states.set(node, state);
    for (const l of this.#listeners) l();
  }
}

function controller(
  nft: FakeNft,
  extra: {
    health?: HealthSource;
    routes?: RouteApplier;
    conntrack?: ConntrackDriver;
    generations?: GenerationWatch;
  } = {},
) {
  const events: LbEvent[] = [];
  const c = new LbController({
    table: "passlb",
    seed: 7,
    nft,
    clock: realClock(),
    sizeFor: () => 31,
    driftCheckMs: 0,
    onEvent: (e) => events.push(e),
    ...extra,
  });
  return { c, events };
}

const lines = (script: string | undefined) => (script ?? "").split("\n").filter((l) => l !== "");

test("first pass without a table is one atomic full sync; the same input again sends nothing", async () => {
  const nft = new FakeNft();
  const { c } = controller(nft);
  await c.start();
  c.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"));
  assert.deepEqual(await c.syncOnce(), { kind: "ok", mode: "full", bytes: nft.scripts[0]!.length });
  assert.match(nft.scripts[0]!, /^add table inet passlb\ndelete table inet passlb\n/);
  assert.deepEqual(await c.syncOnce(), { kind: "ok", mode: "noop", bytes: 0 });
  assert.equal(nft.scripts.length, 1);
  const dumped = await nft.dump("passlb");
  assert.equal(
    dumped?.sets.get("dispatch4")?.elements.get("203.0.113.11 . tcp . 80"),
    "goto svc_edge.web_tcp80_4",
  );
});

test("a health change sends only the slot elements that move, through the debounced loop", async () => {
  const nft = new FakeNft();
  const health = new FakeHealth();
  const routes = new FakePolicyRoutes();
  const { c } = controller(nft, { health, routes });
  await c.start();
  c.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"));
  await c.settled();
  const before = nft.scripts.length;
  const settled = c.settled();
  health.set("node-a2", "unhealthy");
  await settled;
  assert.equal(nft.scripts.length, before + 1);
  const update = lines(nft.scripts.at(-1));
  assert.ok(
    update.length > 0 && update.every((l) => /^(add|delete) element inet passlb m1 /.test(l)),
    update.join("\n"),
  );
  // node-a2 is still a member: its mark stays live and routed (established flows keep it)
  assert.equal(routes.calls.length, 2);
  assert.deepEqual(
    routes.calls[1]!.map((r) => r.via),
    ["198.51.100.11", "198.51.100.12", "198.51.100.21", "fd00:198:51:100::11", "fd00:198:51:100::12"],
  );
  await c.stop();
});

test("drift (someone flushed the table) is detected and converged by a full sync", async () => {
  const nft = new FakeNft();
  const { c, events } = controller(nft);
  await c.start();
  c.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"));
  await c.syncOnce();
  assert.equal(await c.checkDrift(), undefined);
  nft.flushTable("passlb");
  const settled = c.settled();
  assert.match((await c.checkDrift()) ?? "", /rules changed/);
  await settled;
  assert.match(nft.scripts.at(-1)!, /^add table inet passlb\ndelete table inet passlb\n/);
  assert.equal(await c.checkDrift(), undefined);
  assert.ok(events.some((e) => e.kind === "drift"));
  nft.deleteTable("passlb");
  assert.equal(await c.checkDrift(), "table missing");
  await c.stop();
});

/** counts the listings a drift check makes (the cost the generation token saves) */
class CountingNft extends FakeNft {
  dumps = 0;
  override async dump(table: string, options?: { terse?: boolean }) {
    this.dumps++;
    return super.dump(table, options);
  }
}

test("drift: a flushed map (every new connection fails) is found by the next check, not the 12th", async () => {
  const nft = new CountingNft();
  let token: string | undefined = "1:10";
  const generations = { token: () => token, close() {} };
  const { c, events } = controller(nft, {});
  const gated = controller(nft, { generations }).c;
  await c.start();
  c.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"));
  await c.syncOnce();
  await gated.start();
  gated.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"));
  assert.equal((await gated.syncOnce()).kind, "ok");
  // without a generation token every check lists the table with its elements
  nft.dumps = 0;
  assert.equal(await c.checkDrift(), undefined);
  assert.equal(await c.checkDrift(), undefined);
  assert.equal(nft.dumps, 2);
  // with one, a clean comparison is not repeated while no transaction was committed
  assert.equal(await gated.checkDrift(), undefined);
  assert.equal(await gated.checkDrift(), undefined);
  assert.equal(nft.dumps, 3, "the second gated check listed nothing");
  nft.flushSet("passlb", "dispatch4");
  token = "1:11"; // the flush was a commit
  const settled = c.settled();
  assert.match((await c.checkDrift()) ?? "", /^set dispatch4 has 0 elements, not \d+$/);
  await settled;
  assert.ok(events.some((e) => e.kind === "drift" && e.scope === "table"));
  assert.match(nft.scripts.at(-1)!, /^add table inet passlb\ndelete table inet passlb\n/);
  assert.equal(await c.checkDrift(), undefined);
  // a monitor that is down (token unknown) makes every check compare everything
  token = undefined;
  nft.flushSet("passlb", "live");
  assert.match((await gated.checkDrift()) ?? "", /set live has 0 elements/);
  await c.stop();
  await gated.stop();
});

test("drift: passlb's policy rules or one of its route tables deleted by hand are installed again", async () => {
  const nft = new FakeNft();
  const routes = new FakePolicyRoutes();
  const { c, events } = controller(nft, { routes });
  await c.start();
  c.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"));
  await c.syncOnce();
  const want = routes.calls.at(-1)!;
  const clean = await routes.read(want.map((r) => ({ family: r.family, table: r.mark })));
  assert.equal(await c.checkDrift(), undefined);
  routes.deleteRules(4);
  let settled = c.settled();
  assert.match((await c.checkDrift()) ?? "", /^policy rule missing \(ipv4 rule pref 31\d\d .+\)$/);
  await settled;
  assert.deepEqual(await routes.read(clean.tables), clean, "rules and routes as before");
  assert.equal(await c.checkDrift(), undefined);
  const v6 = want.find((r) => r.family === 6)!;
  routes.flushTable(6, v6.mark);
  settled = c.settled();
  assert.match((await c.checkDrift()) ?? "", /^route missing \(ipv6 table \d+ default via fd00:/);
  await settled;
  assert.deepEqual(await routes.read(clean.tables), clean);
  assert.equal(await c.checkDrift(), undefined);
  assert.equal(events.filter((e) => e.kind === "drift" && e.scope === "routes").length, 2);
  await c.stop();
});

test("a new process adopts the table without a flush and sends nothing when nothing changed", async () => {
  const nft = new FakeNft();
  const snapshot = await snapshotOf("_base", "local-zonal-affinity/input.yaml");
  const first = controller(nft).c;
  await first.start();
  first.setSnapshot(snapshot);
  await first.syncOnce();
  await first.stop();
  const { c, events } = controller(nft);
  await c.start();
  assert.ok(events.some((e) => e.kind === "adopted"));
  c.setSnapshot(snapshot);
  assert.deepEqual(await c.syncOnce(), { kind: "ok", mode: "noop", bytes: 0 });
  // a change after adoption is incremental too: the zone-b table goes, its map is deleted
  const health = new FakeHealth();
  health.states.set("node-b1", "unhealthy");
  const next = controller(nft, { health }).c;
  await next.start();
  next.setSnapshot(snapshot);
  const out = await next.syncOnce();
  assert.equal(out.kind === "ok" && out.mode, "incremental");
  assert.doesNotMatch(nft.scripts.at(-1)!, /table/);
});

test("a failed transaction is retried as a full sync; invalid input keeps vanished Services", async () => {
  const nft = new FakeNft();
  const { c } = controller(nft);
  await c.start();
  const both = await snapshotOf("_base", "cluster-ranges/input.yaml");
  c.setSnapshot(both);
  await c.syncOnce();
  nft.failNext = new PasslbError("nft_failed", "boom");
  const oneLess = { ...both, services: both.services.filter((s) => s.metadata.name !== "web") };
  c.setSnapshot(oneLess);
  const failed = await c.syncOnce();
  assert.equal(failed.kind, "retry");
  const retried = await c.syncOnce();
  assert.equal(retried.kind === "ok" && retried.mode, "full");
  assert.ok(!(await nft.dump("passlb"))?.chains.has("svc_edge.web_tcp80_4"));
  // degraded input (problems elsewhere): a Service that vanished stays programmed
  c.setSnapshot(both);
  await c.syncOnce();
  c.setSnapshot(oneLess, true);
  assert.deepEqual(await c.syncOnce(), { kind: "ok", mode: "noop", bytes: 0 });
  assert.ok((await nft.dump("passlb"))?.chains.has("svc_edge.web_tcp80_4"));
  c.setSnapshot(oneLess, false);
  const removed = await c.syncOnce();
  assert.equal(removed.kind === "ok" && removed.mode, "incremental");
  assert.match(nft.scripts.at(-1)!, /delete chain inet passlb svc_edge.web_tcp80_4/);
});

test("degraded input that would move a remaining Service's VIP keeps its last good forwarding", async () => {
  const nft = new FakeNft();
  const { c } = controller(nft);
  await c.start();
  const both = await snapshotOf("_base", "cluster-ranges/input.yaml");
  c.setSnapshot(both);
  await c.syncOnce();
  const before = await nft.dump("passlb");
  // edge/dns is handed its VIP first; without it, edge/web would get dns's address
  const noDns = { ...both, services: both.services.filter((s) => s.metadata.name !== "dns") };
  c.setSnapshot(noDns, true);
  assert.deepEqual(await c.syncOnce(), { kind: "ok", mode: "noop", bytes: 0 });
  assert.deepEqual(await nft.dump("passlb"), before, "both Services as they were");
  c.setSnapshot(noDns, false);
  const moved = await c.syncOnce();
  assert.equal(moved.kind === "ok" && moved.mode !== "noop", true, "valid input: the VIP moves");
});

test("health back to unknown after unhealthy is a change (the node serves again)", async () => {
  const nft = new FakeNft();
  const health = new FakeHealth();
  const { c } = controller(nft, { health });
  await c.start();
  c.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"), false, false);
  await c.syncOnce();
  const initial = new Map((await nft.dump("passlb"))!.sets.get("m1")!.elements);
  health.states.set("node-a2", "unhealthy");
  assert.equal((await c.syncOnce()).kind === "ok" && nft.scripts.length, 2);
  health.states.delete("node-a2");
  const back = await c.syncOnce();
  assert.equal(back.kind === "ok" && back.mode, "incremental");
  assert.deepEqual(new Map((await nft.dump("passlb"))!.sets.get("m1")!.elements), initial);
});

test("a health source with a version is read only when the version moves", async () => {
  const nft = new FakeNft();
  const health = new FakeHealth();
  let version = 0;
  const versioned: HealthSource = {
    lookup: health.lookup,
    subscribe: (l) => health.subscribe(l),
    version: () => version,
  };
  const { c } = controller(nft, { health: versioned });
  await c.start();
  c.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"), false, false);
  await c.syncOnce();
  health.states.set("node-a2", "unhealthy");
  assert.deepEqual(await c.syncOnce(), { kind: "ok", mode: "noop", bytes: 0 }, "same version: not looked at");
  version++;
  const moved = await c.syncOnce();
  assert.equal(moved.kind === "ok" && moved.mode, "incremental");
  assert.ok(
    c.forwarding.every((f) => f.listeners.every((l) => l.backends.every((b) => b.node !== "node-a2"))),
  );
});

test("per-node traffic: the kernel's node counters, named by node", async () => {
  const nft = new FakeNft();
  const { c } = controller(nft);
  await c.start();
  c.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"), false, false);
  await c.syncOnce();
  const hops = c.current!.sets.get("nexthops4")!.elements;
  const [markA1, markB1] = ["198.51.100.11", "198.51.100.21"].map(
    (addr) => [...hops].find(([, a]) => a === addr)![0],
  );
  nft.count("passlb", nodeCounterName(Number(markA1)), 3, 300);
  nft.count("passlb", nodeCounterName(Number(markB1)), 5, 700);
  const traffic = nodeTrafficOf(c.current!, c.forwarding, await nft.counters("passlb"));
  assert.deepEqual(
    traffic.filter((t) => t.packets > 0),
    [
      { node: "node-a1", packets: 3, bytes: 300 },
      { node: "node-b1", packets: 5, bytes: 700 },
    ],
  );
  assert.ok(traffic.some((t) => t.node === "node-a2" && t.packets === 0));
  // per Service: one counter each, named after the Service
  nft.count("passlb", serviceCounterName("edge/web"), 2, 120);
  const services = serviceTrafficOf(c.forwarding, await nft.counters("passlb"));
  assert.deepEqual(services.map((s) => s.service).sort(), c.forwarding.map((f) => f.service).sort());
  assert.deepEqual(
    services.find((s) => s.service === "edge/web"),
    { service: "edge/web", packets: 2, bytes: 120 },
  );
});

test("UDP flows pinned to a node that left a Service's tables are released; TCP and SCTP ones stay", async () => {
  const nft = new FakeNft();
  const health = new FakeHealth();
  const asked: ConntrackFilter[] = [];
  const conntrack: ConntrackDriver = {
    deleteFlows: async (f) => {
      asked.push(f);
      return 2;
    },
    listReplySources: async () => assert.fail("the LB host never lists"),
  };
  const { c, events } = controller(nft, { health, conntrack });
  await c.start();
  c.setSnapshot(await snapshotOf("_base", "cluster-ranges/input.yaml"));
  await c.settled();
  assert.equal(asked.length, 0, "the first pass moves nothing");
  const settled = c.settled();
  health.set("node-a2", "unhealthy");
  await settled;
  const live = c.current!.sets.get("live")!.elements;
  const a2 = [...c.current!.sets.get("nexthops4")!.elements].find(([, addr]) => addr === "198.51.100.12")![0];
  assert.ok(live.has(a2), "node-a2 is still live (a member; established TCP keeps it)");
  assert.deepEqual(
    asked
      .map((f) => `${f.family} ${f.protocol} ${f.origPortDst} ${f.mark === Number(a2) ? "node-a2" : f.mark}`)
      .sort(),
    ["IPv4 udp 53 node-a2"],
  );
  assert.ok(asked.every((f) => f.replySrc === undefined && f.origDst.startsWith("203.0.113.")));
  assert.deepEqual(
    events.filter((e) => e.kind === "flows_released").map((e) => e.kind === "flows_released" && e.service),
    ["edge/dns UDP/53"],
  );
  // nothing changes: nothing more is released
  await c.syncOnce();
  assert.equal(asked.length, 1);
  await c.stop();
});
