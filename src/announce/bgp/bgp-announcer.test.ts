/**
 * The BGP announcer against its fakes (same interfaces as BIRD and the kernel table):
 * servability from the programmed data plane, routes follow it, announced only with an
 * established session of the family, and the graceful stop withdraws, waits, then stops.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ServiceForwarding } from "../../dataplane/forwarding-state.ts";
import { BgpAnnouncer, type BgpEvent } from "./bgp-announcer.ts";
import { announcementsOf, routeChanges } from "./bgp-decision.ts";
import { type PlannedVips, vipServability } from "./bgp-servable.ts";
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

/** A programmed Service: only the fields servability reads. */
function programmed(service: string, vips: string[], listeners: { nodes: string[]; failOpen?: boolean }[]) {
  return {
    service,
    plan: { vips: vips.map((address) => ({ address, family: address.includes(":") ? "IPv6" : "IPv4" })) },
    listeners: listeners.map((l) => ({
      failOpen: l.failOpen ?? false,
      backends: l.nodes.map((node) => ({ node })),
    })),
  } as unknown as ServiceForwarding;
}

const planned: PlannedVips[] = [
  {
    service: "a/web",
    vips: [
      { address: "203.0.113.10", family: "IPv4" },
      { address: "fd00:10::10", family: "IPv6" },
    ],
  },
  { service: "a/dns", vips: [{ address: "203.0.113.10", family: "IPv4" }] },
  { service: "a/new", vips: [{ address: "203.0.113.11", family: "IPv4" }] },
];

test("servable: programmed with the VIP and a listener with a healthy backend", () => {
  const s = vipServability({
    planned,
    programmed: [
      programmed("a/web", ["203.0.113.10", "fd00:10::10"], [{ nodes: ["n1", "n2"] }]),
      programmed("a/dns", ["203.0.113.10"], [{ nodes: ["n1"], failOpen: true }]),
    ],
    lastPassOk: true,
    kept: new Set(),
  });
  assert.deepEqual(
    s.map((x) => [x.vip, x.servable, x.reason]),
    [
      ["203.0.113.10", true, "a/web: 2 healthy node(s)"],
      ["203.0.113.11", false, "a/new is not programmed with this VIP yet"],
      ["fd00:10::10", true, "a/web: 2 healthy node(s)"],
    ],
  );
});

test("not servable: fail-open everywhere, a kept Service, a failed pass", () => {
  const base = {
    planned: planned.slice(0, 1),
    programmed: [programmed("a/web", ["203.0.113.10", "fd00:10::10"], [{ nodes: ["n1"], failOpen: true }])],
    lastPassOk: true,
    kept: new Set<string>(),
  };
  assert.equal(vipServability(base)[0]!.reason, "a/web: no healthy backend on any listener");
  const ok = { ...base, programmed: [programmed("a/web", ["203.0.113.10"], [{ nodes: ["n1"] }])] };
  assert.equal(vipServability({ ...ok, kept: new Set(["a/web"]) })[0]!.servable, false);
  assert.equal(vipServability({ ...ok, lastPassOk: false })[0]!.reason, "the last data-plane sync failed");
  assert.equal(vipServability(ok)[0]!.servable, true);
});

test("routes: add the servable, remove the rest (also VIPs nobody plans any more)", () => {
  const s = [
    { vip: "203.0.113.10", family: "IPv4", services: [], servable: true, reason: "" },
    { vip: "203.0.113.11", family: "IPv4", services: [], servable: false, reason: "" },
  ] as const;
  assert.deepEqual(routeChanges(s, ["203.0.113.11", "203.0.113.99"]), {
    add: ["203.0.113.10"],
    remove: ["203.0.113.11", "203.0.113.99"],
  });
  const a = announcementsOf(
    [...s, { vip: "fd00:10::10", family: "IPv6", services: [], servable: true, reason: "ok" }],
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

test("announcer: routes follow servability; graceful stop withdraws, waits, then stops BIRD", async () => {
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
  announcer.setServability([
    {
      vip: "203.0.113.10",
      family: "IPv4",
      services: ["a/web"],
      servable: true,
      reason: "a/web: 1 healthy node(s)",
    },
  ]);
  await announcer.start();
  assert.deepEqual(speaker.configs, ["router id 1.2.3.4;\n"]);
  assert.deepEqual([...routes.routes], ["203.0.113.10"]);
  assert.deepEqual(
    announcer.announcements.map((a) => [a.vip, a.state]),
    [["203.0.113.10", "announced"]],
  );
  assert.ok(events.some((e) => e.kind === "speaker" && e.health === "degraded"));
  announcer.setServability([
    { vip: "203.0.113.10", family: "IPv4", services: ["a/web"], servable: false, reason: "no healthy" },
  ]);
  await announcer.reconcile();
  assert.deepEqual([...routes.routes], []);
  assert.ok(events.some((e) => e.kind === "withdrawn" && e.vip === "203.0.113.10"));
  announcer.setServability([
    { vip: "203.0.113.10", family: "IPv4", services: ["a/web"], servable: true, reason: "ok" },
  ]);
  await announcer.reconcile();
  await announcer.stop();
  assert.deepEqual(order, ["sleep 700 with 0 routes, speaker stopped: false"]);
  assert.equal(speaker.stopped, true);
});
