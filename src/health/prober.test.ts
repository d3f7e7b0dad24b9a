// The prober's scheduling, concurrency and state feeding, under a fake clock with a fake
// probe function (the sockets are probe-once.test.ts's business).
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { FakeClock } from "./clock.ts";
import { detectionBoundMs, fastIntervalMs } from "./fast-interval.ts";
import { type ProbeFn, type ProbeRecord, Prober, type ProberEvent } from "./prober.ts";
import type { ProbeOutcome } from "./state-machine.ts";
import type { ProbeTarget } from "./state-probe-targets.ts";

function target(n: number, over: Partial<ProbeTarget> = {}): ProbeTarget {
  return {
    key: `HTTP 127.0.0.${n}:10256/healthz`,
    protocol: "HTTP",
    family: "IPv4",
    address: `127.0.0.${n}`,
    port: 10256,
    path: "/healthz",
    intervalMs: 1000,
    timeoutMs: 500,
    healthyThreshold: 1,
    unhealthyThreshold: 3,
    readsWeight: true,
    users: [{ service: "shop/web", check: "local", node: `node-${n}` }],
    ...over,
  };
}

/** a fake probe: each target's behaviour decides the outcome and how long it takes */
function fakeProbe(
  clock: FakeClock,
  behave: (t: ProbeTarget) => { outcome: ProbeOutcome; ms: number },
): ProbeFn {
  return (t) =>
    new Promise((resolve) => {
      const { outcome, ms } = behave(t);
      if (ms === 0) resolve(outcome);
      else clock.setTimer(() => resolve(outcome), ms);
    });
}

async function tick(clock: FakeClock, ms: number, step = 10): Promise<void> {
  for (let t = 0; t < ms; t += step) {
    clock.advance(step);
    await new Promise((r) => setImmediate(r));
  }
}

/** close, letting the fake probes still in flight finish under the fake clock */
async function shutdown(clock: FakeClock, prober: Prober): Promise<void> {
  const closing = prober.close();
  await tick(clock, 2000, 50);
  await closing;
}

function setup(behave: Parameters<typeof fakeProbe>[1], maxConcurrent = 100, seed = 7) {
  const clock = new FakeClock(0);
  const events: ProberEvent[] = [];
  const records: ProbeRecord[] = [];
  const prober = new Prober({
    clock,
    probe: fakeProbe(clock, behave),
    seed,
    maxConcurrent,
    tickMs: 5, // the scheduler's own tests use a fine tick; production's default is coarser
    onEvent: (e) => events.push(e),
    onProbe: (r) => records.push(r),
  });
  return { clock, prober, events, records };
}

const OK = { outcome: { ok: true, reason: "HTTP 200", weight: 2 }, ms: 5 };

describe("Prober", () => {
  it("targets of the first plan admit traffic before a verdict; later ones wait for one", async () => {
    const { clock, prober } = setup(() => OK);
    prober.setTargets([target(1)]);
    prober.setTargets([target(1), target(2)]);
    assert.equal(prober.healthOf(target(1).key)?.admitsBeforeVerdict, true);
    assert.equal(prober.healthOf(target(2).key)?.admitsBeforeVerdict, false);
    assert.equal(prober.healthOf(target(2).key)?.state, "unknown");
    await tick(clock, 1100);
    assert.equal(prober.healthOf(target(2).key)?.state, "healthy", "the first 200 admits it");
    await shutdown(clock, prober);
  });

  it("spreads first probes over the interval, the same way for the same seed", async () => {
    const firsts = async (seed: number) => {
      const { clock, prober, records } = setup(() => OK, 100, seed);
      prober.setTargets(Array.from({ length: 50 }, (_, i) => target(i + 1)));
      await tick(clock, 1000, 1);
      await shutdown(clock, prober);
      return records.map((r) => r.scheduledAt);
    };
    const a = await firsts(7);
    assert.equal(a.length, 50);
    assert.ok(a.every((t) => t >= 0 && t < 1000));
    assert.ok(new Set(a.map((t) => Math.floor(t / 100))).size >= 8, "phases cover most of the interval");
    assert.deepEqual(await firsts(7), a);
    assert.notDeepEqual(await firsts(8), a);
  });

  it("probes each target once per interval on a fixed grid", async () => {
    const { clock, prober, records } = setup(() => OK);
    prober.setTargets([target(1), target(2)]);
    await tick(clock, 10_000);
    await shutdown(clock, prober);
    for (const key of [target(1).key, target(2).key]) {
      const mine = records.filter((r) => r.key === key).map((r) => r.scheduledAt);
      assert.ok(mine.length === 10 || mine.length === 9, `${mine.length} probes`);
      for (let i = 1; i < mine.length; i++) assert.equal((mine[i] ?? 0) - (mine[i - 1] ?? 0), 1000);
    }
    assert.ok(
      records.every((r) => r.startedAt - r.scheduledAt <= 5),
      "probes start within one scheduler tick (5 ms) of their turn",
    );
  });

  it("reports transitions and weights, and detects a failing target within interval × threshold", async () => {
    let failingSince = Number.POSITIVE_INFINITY;
    const { clock, prober, events } = setup((t) =>
      t.address === "127.0.0.1" && clock.now() >= failingSince
        ? { outcome: { ok: false, reason: "timeout after 500 ms" }, ms: 500 }
        : OK,
    );
    prober.setTargets([target(1), target(2)]);
    await tick(clock, 3000);
    assert.deepEqual(
      events
        .filter((e) => e.kind === "transition")
        .map((e) => e.kind === "transition" && `${e.from}->${e.to}`),
      ["unknown->healthy", "unknown->healthy"],
    );
    assert.deepEqual(
      events.filter((e) => e.kind === "weight").map((e) => e.kind === "weight" && e.to),
      [2, 2],
    );
    failingSince = clock.now();
    await tick(clock, 5000);
    const down = events.find((e) => e.kind === "transition" && e.to === "unhealthy");
    assert.ok(down && down.kind === "transition");
    assert.equal(down.target.users[0]?.node, "node-1");
    assert.match(down.reason, /3 consecutive failures .* timeout after 500 ms/);
    const detection = down.at - failingSince;
    // fastinter 1000 − 500 − 500/2 = 250 ms: the next turn (≤ 1000 ms) times out (500 ms),
    // then two re-probes of 250 + 500 ms: ≤ interval × threshold, plus the scheduler's ticks
    assert.ok(detection <= 1000 * 3 + 2 * 40, `detected after ${detection} ms`);
    assert.ok(detection >= 500 + 2 * (250 + 500), `not before three failures: ${detection} ms`);
    assert.equal(prober.states().get(target(2).key)?.state, "healthy");
    assert.deepEqual(prober.healthOf(target(2).key), prober.states().get(target(2).key));
    assert.equal(prober.healthOf("no-such-target"), undefined);
    await shutdown(clock, prober);
  });

  it("re-probes a falling target after fastinter and keeps the interval once it is unhealthy or recovers", async () => {
    let failing = false;
    const { clock, prober, records } = setup((t) =>
      t.address === "127.0.0.1" && failing
        ? { outcome: { ok: false, reason: "timeout after 500 ms" }, ms: 500 }
        : { outcome: { ok: true, reason: "HTTP 200" }, ms: 20 },
    );
    prober.setTargets([target(1)]);
    await tick(clock, 2500);
    failing = true;
    const from = clock.now();
    await tick(clock, 6000);
    const mine = records.filter((r) => r.key === target(1).key && r.startedAt >= from);
    const starts = mine.map((r) => r.startedAt);
    // failures 1 → 2 → 3 (unhealthy): each re-probe starts 250 ms (fastinter) after the
    // failed one ended, at most one scheduler tick late
    const f = mine.findIndex((r) => !r.outcome.ok);
    assert.ok(f >= 0 && mine.length >= f + 5, JSON.stringify(starts));
    for (const i of [f + 1, f + 2]) {
      const gap = mine[i]!.startedAt - mine[i - 1]!.finishedAt;
      assert.ok(gap >= 250 && gap <= 250 + 40, `re-probe ${i - f} came ${gap} ms after the failure`);
    }
    assert.equal(prober.healthOf(target(1).key)?.state, "unhealthy");
    // unhealthy: back on the 1000 ms grid, restarted at the last re-probe
    for (const i of [f + 3, f + 4]) {
      const spacing = mine[i]!.startedAt - mine[i - 1]!.startedAt;
      assert.ok(spacing >= 1000 - 40 && spacing <= 1000 + 40, `unhealthy target probed ${spacing} ms apart`);
    }
    // recovering keeps the interval too (fastinter is for falling targets only)
    failing = false;
    const back = clock.now();
    await tick(clock, 3500);
    const ups = records.filter((r) => r.key === target(1).key && r.startedAt >= back);
    for (let i = 1; i < ups.length; i++) {
      const spacing = ups[i]!.startedAt - ups[i - 1]!.startedAt;
      assert.ok(spacing >= 1000 - 40, `recovering target probed ${spacing} ms apart`);
    }
    await shutdown(clock, prober);
  });

  it("fastinter: interval × threshold whenever the timeout allows it, else re-probe at once", () => {
    const at = (intervalMs: number, timeoutMs: number, unhealthyThreshold: number) => ({
      intervalMs,
      timeoutMs,
      unhealthyThreshold,
      healthyThreshold: 2,
    });
    // the lab's eTP Local check (3 s × 2, 1 s timeout) and kube-proxy's (8 s × 3, 1 s)
    assert.equal(fastIntervalMs(at(3000, 1000, 2)), 1000);
    assert.equal(detectionBoundMs(at(3000, 1000, 2)), 6000);
    assert.equal(fastIntervalMs(at(8000, 1000, 3)), 6500);
    assert.equal(detectionBoundMs(at(8000, 1000, 3)), 24_000);
    // GCE's default 5 s interval with a 5 s timeout: no room, re-probe at once
    assert.equal(fastIntervalMs(at(5000, 5000, 2)), 0);
    assert.equal(detectionBoundMs(at(5000, 5000, 2)), 15_000);
    // a threshold of 1: the first failure decides, nothing to re-probe
    assert.equal(fastIntervalMs(at(2000, 500, 1)), 2000);
    for (const [i, t, n] of [
      [1000, 100, 2],
      [3000, 1000, 2],
      [10_000, 2000, 5],
      [2000, 300, 10],
    ] as const)
      assert.ok(detectionBoundMs(at(i, t, n)) <= i * n, `${i} × ${n}, timeout ${t}`);
  });

  it("keeps at most maxConcurrent probes in flight and queues the rest", async () => {
    let peak = 0;
    let current = 0;
    const clock = new FakeClock(0);
    const records: ProbeRecord[] = [];
    const prober = new Prober({
      clock,
      seed: 1,
      maxConcurrent: 3,
      tickMs: 5,
      onEvent: () => {},
      onProbe: (r) => records.push(r),
      probe: () => {
        current++;
        peak = Math.max(peak, current);
        return new Promise((resolve) =>
          clock.setTimer(() => {
            current--;
            resolve({ ok: true, reason: "HTTP 200" });
          }, 100),
        );
      },
    });
    prober.setTargets(Array.from({ length: 20 }, (_, i) => target(i + 1)));
    await tick(clock, 3000);
    await shutdown(clock, prober);
    assert.equal(peak, 3);
    assert.ok(records.length >= 40, `${records.length} probes done`);
    assert.ok(
      records.some((r) => r.startedAt > r.scheduledAt),
      "some waited in the queue",
    );
  });

  it("starts a turn that came during a probe when that probe ends, and never overlaps one target", async () => {
    const { clock, prober, records } = setup(() => ({ outcome: { ok: true, reason: "HTTP 200" }, ms: 1500 }));
    prober.setTargets([target(1)]);
    await tick(clock, 7000);
    await shutdown(clock, prober);
    assert.ok(records.length >= 4, `${records.length} probes`);
    for (let i = 1; i < records.length; i++) {
      assert.ok((records[i]?.startedAt ?? 0) >= (records[i - 1]?.finishedAt ?? 0), "no overlap");
      assert.ok((records[i]?.startedAt ?? 0) - (records[i - 1]?.finishedAt ?? 0) <= 10, "back to back");
    }
    assert.ok(prober.skipped >= 1, "a second waiting turn is skipped");
  });

  it("a hanging target with timeout = interval is detected within interval × threshold + timeout", async () => {
    let hangSince = Number.POSITIVE_INFINITY;
    const { clock, prober, events } = setup((t) =>
      clock.now() >= hangSince
        ? { outcome: { ok: false, reason: `timeout after ${t.timeoutMs} ms` }, ms: t.timeoutMs }
        : OK,
    );
    prober.setTargets([target(1, { timeoutMs: 1000, unhealthyThreshold: 2 })]);
    await tick(clock, 2500);
    hangSince = clock.now();
    await tick(clock, 6000);
    const down = events.find((e) => e.kind === "transition" && e.to === "unhealthy");
    assert.ok(down);
    assert.ok(down.at - hangSince <= 1000 * 2 + 1000, `detected after ${down.at - hangSince} ms`);
    await shutdown(clock, prober);
  });

  it("forgets removed targets: no late events, no timers left after close", async () => {
    const { clock, prober, events } = setup(() => ({
      outcome: { ok: false, reason: "connection refused" },
      ms: 200,
    }));
    prober.setTargets([target(1), target(2)]);
    await tick(clock, 1500);
    prober.setTargets([target(2)]);
    const before = events.length;
    await tick(clock, 5000);
    assert.ok(events.slice(before).every((e) => e.target.key === target(2).key));
    assert.deepEqual([...prober.states().keys()], [target(2).key]);
    await shutdown(clock, prober);
    assert.equal(clock.pending, 0, "every timer cleared");
  });

  it("keeps state across setTargets and re-phases a changed interval", async () => {
    const { clock, prober, records } = setup(() => OK);
    prober.setTargets([target(1)]);
    await tick(clock, 2000);
    assert.equal(prober.states().get(target(1).key)?.state, "healthy");
    prober.setTargets([target(1, { intervalMs: 250 })]);
    assert.equal(prober.states().get(target(1).key)?.state, "healthy");
    const n = records.length;
    await tick(clock, 2000);
    assert.ok(records.length - n >= 7, `${records.length - n} probes at 250 ms`);
    await shutdown(clock, prober);
  });

  it("a probe function that throws is a failed probe, not a crash", async () => {
    const clock = new FakeClock(0);
    const events: ProberEvent[] = [];
    const prober = new Prober({
      clock,
      seed: 1,
      maxConcurrent: 1,
      onEvent: (e) => events.push(e),
      probe: () => {
        throw new Error("boom");
      },
    });
    prober.setTargets([target(1)]);
    await tick(clock, 4000);
    await shutdown(clock, prober);
    const down = events.find((e) => e.kind === "transition");
    assert.ok(down && down.kind === "transition" && down.to === "unhealthy" && /boom/.test(down.reason));
  });
});
