import assert from "node:assert/strict";
import { test } from "node:test";
import { FakeClock } from "../health/clock.ts";
import type { HeartbeatMessage, HeartbeatTransport } from "./heartbeat.ts";
import { fakeVipAddresses } from "./vip-addresses.ts";
import { VipAnnouncer } from "./vip-announcer.ts";

/** An in-memory segment: every sent heartbeat reaches every other started member that is connected. */
function segment() {
  const members = new Map<string, { onHeard: (m: HeartbeatMessage) => void; connected: boolean }>();
  const transport = (self: string): HeartbeatTransport => ({
    async start(onHeard) {
      members.set(self, { onHeard, connected: true });
    },
    send(bye) {
      if (!members.get(self)?.connected) return;
      for (const [h, m] of members) if (h !== self && m.connected) m.onHeard({ host: self, bye });
    },
    async close() {
      members.delete(self);
    },
  });
  return { transport, cut: (h: string) => (members.get(h)!.connected = false) };
}

const VIPS = ["203.0.113.1", "203.0.113.2", "203.0.113.3", "203.0.113.4", "fd00:10::1", "fd00:10::2"];
const settle = () => new Promise((r) => setImmediate(r));
async function run(clock: FakeClock, ms: number) {
  for (let t = 0; t < ms; t += 50) {
    clock.advance(50);
    await settle();
    await settle();
  }
}

function pair() {
  const clock = new FakeClock(1_000_000);
  const seg = segment();
  const make = (self: string) => {
    const addresses = fakeVipAddresses();
    const a = new VipAnnouncer({
      self,
      hosts: ["lb-1", "lb-2"],
      heartbeat: seg.transport(self),
      addresses,
      clock,
      intervalMs: 200,
      deadAfterMs: 1000,
      handoverMs: 300,
    });
    a.setVips(VIPS);
    return { a, addresses };
  };
  return { clock, seg, one: make("lb-1"), two: make("lb-2") };
}

test("two hosts split the VIPs, each held exactly once and announced", async () => {
  const { clock, one, two } = pair();
  await one.a.start();
  await two.a.start();
  await run(clock, 1500);
  const all = [...one.addresses.on, ...two.addresses.on].sort();
  assert.deepEqual(all, [...VIPS].sort());
  assert.ok(one.addresses.on.size > 0 && two.addresses.on.size > 0, "spread over both");
  for (const v of one.addresses.on) assert.ok(one.addresses.calls.includes(`announce ${v}`));
});

test("a silent host's VIPs move after the dead time; a goodbye moves them at once", async () => {
  const { clock, seg, one, two } = pair();
  await one.a.start();
  await two.a.start();
  await run(clock, 1500);
  const ones = [...one.addresses.on];
  seg.cut("lb-1"); // lb-1 dies without a word (its addresses stay: the host is gone)
  await run(clock, 700);
  assert.equal(two.addresses.on.size, VIPS.length - ones.length, "not before the dead time");
  await run(clock, 700);
  assert.equal(two.addresses.on.size, VIPS.length, "after the dead time lb-2 holds all");

  const g = pair();
  await g.one.a.start();
  await g.two.a.start();
  await run(g.clock, 1500);
  const stopping = g.one.a.stop();
  await settle();
  await settle();
  assert.equal(g.two.addresses.on.size, VIPS.length, "taken over on the goodbye, before any tick");
  await run(g.clock, 400);
  await stopping;
  assert.equal(g.one.addresses.on.size, 0, "released after the hand-over time");
});

test("a host whose link is down releases everything", async () => {
  const { clock, one, two } = pair();
  await one.a.start();
  await two.a.start();
  await run(clock, 1500);
  one.addresses.link = false;
  await run(clock, 300);
  assert.equal(one.addresses.on.size, 0);
});

test("VIPs adopted from a previous run are announced again after the warm-up", async () => {
  const { clock, one } = pair();
  one.addresses.on.add("203.0.113.1"); // left on the interface by a killed process
  await one.a.start();
  assert.ok(!one.addresses.calls.includes("announce 203.0.113.1"), "not during the warm-up");
  await run(clock, 1200);
  assert.ok(one.addresses.calls.includes("announce 203.0.113.1"));
  assert.ok(!one.addresses.calls.includes("add 203.0.113.1"), "kept, not re-added");
});

test("held addresses are renewed about once a second (their lifetime runs out if the process dies)", async () => {
  const { clock, one, two } = pair();
  await one.a.start();
  await two.a.start();
  await run(clock, 1500);
  const renewals = () => one.addresses.calls.filter((c) => c.startsWith("renew "));
  const before = renewals().length;
  await run(clock, 3000);
  const during = renewals().slice(before);
  assert.ok(during.length >= 2 && during.length <= 4, `renewed ${during.length} times in 3 s`);
  assert.equal(
    during.at(-1),
    `renew ${[...one.addresses.on].sort().join(",")}`,
    "every held VIP, in one call",
  );
  one.addresses.link = false; // holds nothing: nothing to renew
  await run(clock, 300);
  const quiet = renewals().length;
  await run(clock, 2000);
  assert.equal(renewals().length, quiet);
});
