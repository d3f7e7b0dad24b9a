/**
 * The BGP announcer against its fakes (same interfaces as BIRD and the kernel table):
 * routes follow readiness (../announcer.ts, tested in announcer.test.ts), announced only with an
 * established session of the family, and the graceful stop withdraws, waits, then stops.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { vipReady } from "../fake-announcer.ts";
import { BgpAnnouncer, type BgpEvent } from "./bgp-announcer.ts";
import { announcementsOf, routeChanges } from "./bgp-decision.ts";
import type { SpeakerState } from "./bgp-types.ts";
import { fakeSpeaker } from "./bird-speaker.ts";
import { fakeVipRoutes } from "./kernel-vip-routes.ts";

const healthy: SpeakerState = {
  running: true,
  sessions: [
    { name: "peer1", peer: "198.51.100.1", state: "Established", established: true, exported: 0 },
    { name: "peer2", peer: "fd00:198:51:100::1", state: "Active", established: false, exported: 0 },
  ],
  bfd: [],
  health: "degraded",
  findings: ["BGP peer2 (fd00:198:51:100::1) is Active"],
};

test("routes: add the ready, remove the rest (also VIPs nobody plans any more)", () => {
  const s = [vipReady("203.0.113.10"), vipReady("203.0.113.11", "no_healthy_backend")];
  assert.deepEqual(routeChanges(s, ["203.0.113.11", "203.0.113.99"]), {
    add: ["203.0.113.10"],
    remove: ["203.0.113.11", "203.0.113.99"],
  });
  const a = announcementsOf(
    [...s, vipReady("fd00:10::10")],
    new Set(["203.0.113.10", "fd00:10::10"]),
    healthy,
  );
  assert.deepEqual(
    a.map((x) => [x.vip, x.state]),
    [
      ["203.0.113.10", "announced"],
      ["203.0.113.11", "withdrawn"],
      ["fd00:10::10", "withdrawn"],
    ],
  );
  assert.equal(a[2]!.reason, "no IPv6 BGP session is established");
});

test("announcer: routes follow readiness; graceful stop withdraws, waits, then stops BIRD", async () => {
  const speaker = fakeSpeaker(healthy);
  const routes = fakeVipRoutes();
  routes.routes.add("203.0.113.99"); // a previous process's
  const events: BgpEvent[] = [];
  const order: string[] = [];
  const announcer = new BgpAnnouncer({
    speaker,
    routes,
    config: "router id 1.2.3.4;\n",
    pollMs: 60_000,
    convergeMs: 700,
    sleep: async (ms) => {
      order.push(`sleep ${ms} with ${routes.routes.size} routes, speaker stopped: ${speaker.stopped}`);
    },
    onEvent: (e) => events.push(e),
  });
  announcer.setReadiness([vipReady("203.0.113.10", "ok", ["a/web"])]);
  await announcer.start();
  assert.deepEqual(speaker.configs, ["router id 1.2.3.4;\n"]);
  assert.deepEqual([...routes.routes], ["203.0.113.10"]);
  assert.deepEqual(
    announcer.announcements.map((a) => [a.vip, a.state]),
    [["203.0.113.10", "announced"]],
  );
  assert.ok(events.some((e) => e.kind === "speaker" && e.health === "degraded"));
  announcer.setReadiness([vipReady("203.0.113.10", "no_healthy_backend", ["a/web"])]);
  await announcer.reconcile();
  assert.deepEqual([...routes.routes], []);
  assert.ok(events.some((e) => e.kind === "withdrawn" && e.vip === "203.0.113.10"));
  announcer.setReadiness([vipReady("203.0.113.10", "ok", ["a/web"])]);
  await announcer.reconcile();
  await announcer.stop();
  assert.deepEqual(order, ["sleep 700 with 0 routes, speaker stopped: false"]);
  assert.equal(speaker.stopped, true);
});
