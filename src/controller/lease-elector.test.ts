// The Lease elector when a host's clock jumps ±1 h (issue 16 §1, "clocks"): two replicas
// share one in-memory Lease (409 on a stale resourceVersion, as the API server answers);
// both run on one fake monotonic clock, and the leader's `now()` additionally jumps by an
// offset while its timers keep monotonic time — what a Clock reading the wall clock
// (CLOCK_REALTIME) would see, next to Node's timers (monotonic). Production's realClock
// reads performance.timeOrigin + performance.now() (monotonic), so no jump reaches it at
// all; this shows the bound holds even for a clock that did follow the wall clock.
// Bound: no lease loss beyond one renew (the leader stops leading for at most one retry
// period), and the follower never takes over.
import assert from "node:assert/strict";
import { test } from "node:test";
import { PasslbError } from "../errors.ts";
import { type Clock, FakeClock } from "../health/clock.ts";
import type { LeaseApi, LeaseRecord } from "./kube-controller-api.ts";
import { DEFAULT_ELECTION_TIMING, type LeaseSpec } from "./leader-election.ts";
import { LeaseElector } from "./lease-elector.ts";

class MemoryLease implements LeaseApi {
  #record: LeaseRecord | undefined;
  #version = 0;
  async read() {
    return this.#record;
  }
  async create(spec: LeaseSpec) {
    if (this.#record) throw new PasslbError("api_conflict", "exists");
    this.#record = { spec, resourceVersion: String(++this.#version) };
    return this.#record;
  }
  async replace(spec: LeaseSpec, resourceVersion: string) {
    if (this.#record?.resourceVersion !== resourceVersion) throw new PasslbError("api_conflict", "stale");
    this.#record = { spec, resourceVersion: String(++this.#version) };
    return this.#record;
  }
}

/** `now()` = the monotonic clock plus a settable jump; timers stay monotonic */
function jumpingClock(mono: FakeClock): Clock & { offset: number } {
  const c = {
    offset: 0,
    now: () => mono.now() + c.offset,
    setTimer: (fn: () => void, ms: number) => mono.setTimer(fn, ms),
    clearTimer: (h: Parameters<Clock["clearTimer"]>[0]) => mono.clearTimer(h),
  };
  return c;
}

test("the leader's clock jumps +1 h, back, and -1 h: it loses the lease for at most one renew, the follower never takes over", async () => {
  const mono = new FakeClock();
  const lease = new MemoryLease();
  const clockA = jumpingClock(mono);
  const a = new LeaseElector(lease, { identity: "a", ...DEFAULT_ELECTION_TIMING }, clockA);
  const b = new LeaseElector(lease, { identity: "b", ...DEFAULT_ELECTION_TIMING }, mono);
  const flush = () => new Promise((r) => setImmediate(r));
  /** runs `ms` in 100 ms steps; the longest stretch in which `a` did not lead, and whether `b` ever led */
  const run = async (ms: number) => {
    let gap = 0;
    let longest = 0;
    let bLed = false;
    for (let t = 0; t < ms; t += 100) {
      mono.advance(100);
      for (let i = 0; i < 5; i++) await flush();
      gap = a.isLeader() ? 0 : gap + 100;
      longest = Math.max(longest, gap);
      bLed ||= b.isLeader();
    }
    return { longest, bLed };
  };
  a.start();
  await run(500);
  assert.ok(a.isLeader(), "a leads");
  b.start();
  assert.deepEqual(await run(20_000), { longest: 0, bLed: false }, "steady: a leads, b follows");
  for (const jump of [3_600_000, -3_600_000, -3_600_000]) {
    clockA.offset += jump;
    const r = await run(40_000);
    assert.equal(r.bLed, false, `after a ${jump / 3_600_000} h jump the follower never leads`);
    assert.ok(
      r.longest <= DEFAULT_ELECTION_TIMING.retryPeriodMs,
      `after a ${jump / 3_600_000} h jump a stopped leading for ${r.longest} ms, more than one renew (${DEFAULT_ELECTION_TIMING.retryPeriodMs} ms)`,
    );
    assert.ok(a.isLeader());
  }
  await a.stop({ release: false });
  await b.stop({ release: false });
});
