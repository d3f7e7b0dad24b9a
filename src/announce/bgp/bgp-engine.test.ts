/**
 * The BGP engine behind the engine-neutral `Announcer` (bgp-engine.ts), against the fakes
 * of BIRD and the kernel table (same interfaces): the same calls as keepalived's engine,
 * the same status shape (announced → held, the rest withdrawn; sessions and BFD under
 * `speaker`), events in the shared kinds, and both kinds of stop.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { AnnouncerEvent } from "../announcer.ts";
import { vipReady } from "../fake-announcer.ts";
import { BgpEngine } from "./bgp-engine.ts";
import type { SpeakerState } from "./bgp-types.ts";
import { fakeSpeaker } from "./bird-speaker.ts";
import { fakeVipRoutes } from "./kernel-vip-routes.ts";

const speakerState = (bfd: string): SpeakerState => ({
  running: true,
  sessions: [
    { name: "peer1", peer: "198.51.100.1", state: "Established", established: true, exported: 1 },
    { name: "peer2", peer: "fd00:198:51:100::1", state: "Active", established: false, exported: 0 },
  ],
  bfd: [{ peer: "198.51.100.1", interface: "eth0", state: bfd }],
  health: "degraded",
  findings: ["BGP peer2 (fd00:198:51:100::1) is Active"],
});

function engine() {
  const speaker = fakeSpeaker(speakerState("Up"));
  const routes = fakeVipRoutes();
  const events: AnnouncerEvent[] = [];
  const sleeps: number[] = [];
  const e = new BgpEngine({
    host: "lb-1",
    speaker,
    routes,
    config: "router id 192.0.2.2;\n",
    pollMs: 60_000,
    convergeMs: 500,
    sleep: async (ms) => {
      sleeps.push(ms);
    },
    onEvent: (ev) => events.push(ev),
  });
  return { e, speaker, routes, events, sleeps };
}

test("the same calls and status shape as keepalived: held while announced, withdrawn otherwise", async () => {
  const { e, routes, events } = engine();
  assert.equal(e.status().state, "stopped");
  await e.start({
    vips: [
      vipReady("203.0.113.10", "ok", ["a/web"]),
      vipReady("203.0.113.11", "no_healthy_backend", ["a/new"]),
      vipReady("fd00:10::10", "ok", ["a/web"]),
    ],
    generation: 4,
    // the LB hosts of a segment mean nothing to a routed tier: ignored
    peers: new Map([["lb-2", { IPv4: "192.0.2.3" }]]),
  });
  assert.deepEqual([...routes.routes].sort(), ["203.0.113.10", "fd00:10::10"]);
  const s = e.status();
  assert.equal(s.engine, "bird");
  assert.equal(s.host, "lb-1");
  assert.equal(s.state, "running");
  assert.equal(s.generation, 4);
  assert.deepEqual(s.groups, []);
  assert.deepEqual(
    s.vips.map((v) => [v.vip, v.state]),
    [
      ["203.0.113.10", "held"],
      ["203.0.113.11", "withdrawn"],
      // the route is in the table but no IPv6 session is up: the routers were not told
      ["fd00:10::10", "withdrawn"],
    ],
  );
  assert.match(s.vips[0]!.reason, /to 198\.51\.100\.1$/);
  assert.match(s.vips[1]!.reason, /^not ready: no_healthy_backend/);
  assert.deepEqual(s.speaker, {
    health: "degraded",
    findings: ["BGP peer2 (fd00:198:51:100::1) is Active"],
    sessions: [
      {
        peer: "198.51.100.1",
        state: "Established",
        established: true,
        bfd: "Up",
        name: "peer1",
        exported: 1,
      },
      { peer: "fd00:198:51:100::1", state: "Active", established: false, name: "peer2", exported: 0 },
    ],
  });
  assert.deepEqual(
    events.filter((x) => x.kind === "engine").map((x) => [x.state, x.healthy]),
    [
      ["starting", undefined],
      ["starting", false], // the speaker's health, read during the start
      ["running", undefined],
    ],
  );
  assert.ok(events.some((x) => x.kind === "state" && x.state === "held" && x.vips[0] === "203.0.113.10"));
  // readiness changes through update(): the route goes, the VIP is withdrawn
  await e.update({ vips: [vipReady("203.0.113.10", "sync_failed")], generation: 5 });
  await e.reconcile();
  assert.deepEqual([...routes.routes], []);
  assert.deepEqual(
    e.status().vips.map((v) => [v.vip, v.state]),
    [["203.0.113.10", "withdrawn"]],
  );
  assert.equal(e.status().generation, 5);
});

test("BIRD not answering is a failed engine with the findings as detail", async () => {
  const { e, speaker } = engine();
  await e.start({ vips: [vipReady("203.0.113.10")], generation: 1 });
  speaker.set({ running: false, sessions: [], bfd: [], health: "down", findings: ["birdc: no answer"] });
  await e.reconcile();
  const s = e.status();
  assert.equal(s.state, "failed");
  assert.equal(s.detail, "birdc: no answer");
  assert.deepEqual(
    s.vips.map((v) => v.state),
    ["withdrawn"],
  );
});

test("graceful stop withdraws, waits and stops BIRD; otherwise both stay for the next process", async () => {
  const graceful = engine();
  await graceful.e.start({ vips: [vipReady("203.0.113.10")], generation: 1 });
  await graceful.e.stop({ graceful: true });
  assert.deepEqual([...graceful.routes.routes], []);
  assert.deepEqual(graceful.sleeps, [500]);
  assert.equal(graceful.speaker.stopped, true);
  assert.equal(graceful.e.status().state, "stopped");

  const kept = engine();
  await kept.e.start({ vips: [vipReady("203.0.113.10")], generation: 1 });
  await kept.e.stop({ graceful: false });
  assert.deepEqual([...kept.routes.routes], ["203.0.113.10"]);
  assert.deepEqual(kept.sleeps, []);
  assert.equal(kept.speaker.stopped, false);
});

test("a speaker that will not start: start rejects, the status says failed with the message", async () => {
  const { e, speaker } = engine();
  speaker.start = async () => {
    throw new Error("bird: syntax error, line 3");
  };
  await assert.rejects(e.start({ vips: [], generation: 1 }), /syntax error/);
  assert.equal(e.status().state, "failed");
  assert.equal(e.status().detail, "bird: syntax error, line 3");
});
