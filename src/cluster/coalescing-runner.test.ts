/**
 * The coalescing runner under a fake clock: no overlap, coalescing, the request wait (first
 * wins, or trailing with a ceiling), minimum and maximum interval, backoff and its reset,
 * holding a backoff, stop during a run, an exception thrown by the function.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { FakeClock } from "../health/clock.ts";
import {
  CoalescingRunner,
  type CoalescingRunnerOptions,
  type RunOutcome,
  type RunReason,
} from "./coalescing-runner.ts";

const settle = () => new Promise((r) => setImmediate(r));

/** A function whose runs the test finishes by hand; records when each run started. */
function gated(clock: FakeClock, outcomes: (RunOutcome | Error)[] = []) {
  const starts: { at: number; reason: RunReason }[] = [];
  const open: (() => void)[] = [];
  let inFlight = 0;
  let most = 0;
  const t0 = clock.now();
  const fn = async (reason: RunReason): Promise<RunOutcome> => {
    starts.push({ at: clock.now() - t0, reason });
    inFlight++;
    most = Math.max(most, inFlight);
    await new Promise<void>((resolve) => open.push(resolve));
    inFlight--;
    const o = outcomes.shift();
    if (o instanceof Error) throw o;
    return o;
  };
  /** finishes the oldest run in progress */
  const finish = async () => {
    open.shift()?.();
    await settle();
  };
  return { fn, starts, finish, most: () => most, at: () => starts.map((s) => s.at) };
}

function runner(clock: FakeClock, g: ReturnType<typeof gated>, o: Partial<CoalescingRunnerOptions> = {}) {
  return new CoalescingRunner(g.fn, { clock, ...o });
}

test("a request runs at once; requests during the run coalesce into exactly one more run", async () => {
  const clock = new FakeClock(0);
  const g = gated(clock);
  const r = runner(clock, g);
  r.run();
  assert.equal(g.starts.length, 1, "started inside run()");
  assert.ok(r.running);
  for (let i = 0; i < 5; i++) r.run();
  clock.advance(10);
  assert.equal(g.starts.length, 1, "never two at once");
  await g.finish();
  assert.equal(g.starts.length, 2, "one more run after, for all five requests");
  await g.finish();
  assert.equal(g.starts.length, 2, "nothing was asked during the second run");
  assert.equal(g.most(), 1);
  assert.equal(r.running, false);
  assert.equal(clock.pending, 0);
});

test("a request wait: later requests join the first one's run", async () => {
  const clock = new FakeClock(0);
  const g = gated(clock);
  const r = runner(clock, g, { delayMs: 50 });
  r.run();
  clock.advance(30);
  r.run();
  clock.advance(19);
  assert.deepEqual(g.at(), []);
  clock.advance(1);
  assert.deepEqual(g.at(), [50]);
  // a request during the run: its own wait after the run ends
  r.run();
  clock.advance(100);
  await g.finish();
  assert.deepEqual(g.at(), [50]);
  clock.advance(49);
  assert.deepEqual(g.at(), [50]);
  clock.advance(1);
  assert.deepEqual(g.at(), [50, 200]);
  await g.finish();
  // run(ms): no later than ms from now, whatever the configured wait
  r.run();
  r.run(0);
  assert.deepEqual(g.at(), [50, 200, 200]);
  await g.finish();
  await r.stop();
});

test("a trailing wait restarts with each request, but runs at the latest maxDelayMs after the first", async () => {
  const clock = new FakeClock(0);
  const g = gated(clock);
  const r = runner(clock, g, { delayMs: 100, maxDelayMs: 1000 });
  r.run();
  clock.advance(50);
  r.run();
  clock.advance(99);
  assert.deepEqual(g.at(), []);
  clock.advance(1);
  assert.deepEqual(g.at(), [150], "100 ms after the last request");
  await g.finish();
  // a request every 10 ms for 3 s: one run per second, not one per request
  for (let i = 0; i < 300; i++) {
    r.run();
    clock.advance(10);
    if (r.running) await g.finish();
  }
  clock.advance(200);
  await g.finish();
  const later = g.at().slice(1);
  assert.ok(later.length >= 3 && later.length <= 4, `${later.length} runs`);
  for (let i = 1; i < later.length - 1; i++)
    assert.ok(
      later[i]! - later[i - 1]! <= 1010,
      `runs ${later[i - 1]} and ${later[i]} are at most 1 s apart`,
    );
  await r.stop();
});

test("minimum interval: a run starts no sooner than minIntervalMs after the previous one ended", async () => {
  const clock = new FakeClock(0);
  const g = gated(clock);
  const r = runner(clock, g, { minIntervalMs: 1000 });
  r.run();
  clock.advance(200);
  await g.finish(); // ended at 200
  r.run();
  r.run();
  assert.deepEqual(g.at(), [0]);
  clock.advance(999);
  assert.deepEqual(g.at(), [0]);
  clock.advance(1);
  assert.deepEqual(g.at(), [0, 1200], "both requests in one run at 200 + 1000");
  await g.finish();
  clock.advance(5000);
  r.run();
  assert.deepEqual(g.at(), [0, 1200, 6200], "long after: at once");
  await g.finish();
  await r.stop();
});

test("maximum interval: a periodic run nobody asked for, measured from the end of the last run", async () => {
  const clock = new FakeClock(0);
  const g = gated(clock);
  const r = runner(clock, g, { maxIntervalMs: 1000 });
  clock.advance(999);
  assert.deepEqual(g.at(), []);
  clock.advance(1);
  assert.deepEqual(g.starts, [{ at: 1000, reason: "periodic" }]);
  clock.advance(300);
  await g.finish(); // ended at 1300
  clock.advance(500);
  r.run(); // at 1800
  assert.equal(g.starts.at(-1)?.reason, "request");
  await g.finish();
  clock.advance(999);
  assert.equal(g.starts.length, 2);
  clock.advance(1);
  assert.deepEqual(g.starts.at(-1), { at: 2800, reason: "periodic" }, "1000 ms after the requested run");
  await g.finish();
  await r.stop();
  clock.advance(10_000);
  assert.equal(g.starts.length, 3, "stopped: no more periodic runs");
  assert.equal(clock.pending, 0);
});

test("backoff doubles per failure up to its cap, a success resets it, `failed` waits the cap", async () => {
  const clock = new FakeClock(0);
  const outcomes: RunOutcome[] = [
    { kind: "retry" },
    { kind: "retry" },
    { kind: "retry" },
    { kind: "retry" },
    undefined,
    { kind: "retry" },
    { kind: "failed" },
    { kind: "retry", afterMs: 5000 },
  ];
  const g = gated(clock, outcomes);
  const r = runner(clock, g, { backoff: { initialMs: 100, maxMs: 500 } });
  const waits: number[] = [];
  r.run();
  for (let i = 0; i < 8; i++) {
    const before = g.starts.length;
    assert.equal(r.nextRetryMs(), Math.min(500, 100 * 2 ** r.failures));
    await g.finish();
    if (i === 4) {
      assert.equal(r.failures, 0, "a success resets the count");
      r.run();
    } else {
      const ended = clock.now();
      while (g.starts.length === before) clock.advance(1);
      waits.push(clock.now() - ended);
      assert.equal(g.starts.at(-1)?.reason, "retry");
    }
  }
  assert.deepEqual(waits, [100, 200, 400, 500, 100, 500, 5000]);
  await g.finish();
  await r.stop();
});

test("a request during a backoff runs at once, unless the backoff holds", async () => {
  for (const holdBackoff of [false, true]) {
    const clock = new FakeClock(0);
    const g = gated(clock, [{ kind: "retry" }, undefined]);
    const r = runner(clock, g, { backoff: { initialMs: 1000, maxMs: 1000 }, holdBackoff });
    r.run();
    await g.finish(); // failed at 0: retry at 1000
    clock.advance(100);
    r.run(0);
    assert.deepEqual(g.at(), holdBackoff ? [0] : [0, 100]);
    clock.advance(900);
    assert.deepEqual(g.at(), holdBackoff ? [0, 1000] : [0, 100]);
    await g.finish();
    clock.advance(5000);
    assert.equal(g.starts.length, 2, "the success cancelled the retry");
    await r.stop();
  }
});

test("an exception thrown by the function is reported and retried with backoff; the runner goes on", async () => {
  const clock = new FakeClock(0);
  const errors: unknown[] = [];
  const g = gated(clock, [new Error("boom"), undefined]);
  const r = runner(clock, g, {
    backoff: { initialMs: 250, maxMs: 1000 },
    onError: (e) => {
      errors.push(e);
      throw new Error("a broken report");
    },
  });
  r.run();
  await g.finish();
  assert.equal((errors[0] as Error).message, "boom");
  assert.equal(r.failures, 1);
  clock.advance(250);
  assert.deepEqual(g.at(), [0, 250]);
  await g.finish();
  assert.equal(r.failures, 0);
  // a synchronous throw counts the same
  const sync = new CoalescingRunner(
    () => {
      throw new Error("sync");
    },
    { clock, onError: (e) => errors.push(e) },
  );
  sync.run();
  await sync.idle();
  assert.equal((errors[1] as Error).message, "sync");
  assert.equal(sync.failures, 1);
  await sync.stop();
  await r.stop();
});

test("stop during a run waits for it, and nothing runs after — not the coalesced request, not a retry", async () => {
  const clock = new FakeClock(0);
  const g = gated(clock, [{ kind: "retry" }]);
  const r = runner(clock, g, { maxIntervalMs: 1000 });
  r.run();
  r.run();
  let stopped = false;
  const stopping = r.stop().then(() => {
    stopped = true;
  });
  await settle();
  assert.equal(stopped, false, "the run is still in progress");
  await g.finish();
  await stopping;
  assert.equal(stopped, true);
  clock.advance(60_000);
  r.run();
  assert.equal(g.starts.length, 1);
  assert.equal(clock.pending, 0);
});

test("flush starts a waiting request now and resolves when everything asked for has run", async () => {
  const clock = new FakeClock(0);
  let runs = 0;
  const r = new CoalescingRunner(
    async () => {
      runs++;
      await settle();
    },
    { clock, delayMs: 10_000 },
  );
  r.run();
  assert.equal(runs, 0);
  await r.flush();
  assert.equal(runs, 1);
  assert.equal(clock.pending, 0, "the waiting timer is gone");
  await r.flush();
  assert.equal(runs, 1, "nothing was asked");
  await r.stop();
});

test("ok with againInMs runs again by then without counting as a failure", async () => {
  const clock = new FakeClock(0);
  const g = gated(clock, [{ kind: "ok", againInMs: 300 }]);
  const r = runner(clock, g);
  r.run();
  await g.finish();
  assert.equal(r.failures, 0);
  clock.advance(300);
  assert.deepEqual(g.starts.at(-1), { at: 300, reason: "retry" });
  await g.finish();
  await r.stop();
});

test("startFromTimer: a run due now starts from a 0 ms timer, after the caller's own step", async () => {
  const clock = new FakeClock(0);
  const g = gated(clock);
  const r = runner(clock, g, { startFromTimer: true });
  r.run();
  assert.equal(g.starts.length, 0, "not inside run()");
  assert.equal(clock.pending, 1);
  clock.advance(0);
  assert.deepEqual(g.at(), [0]);
  r.run();
  await g.finish();
  assert.equal(g.starts.length, 1, "the coalesced run waits for its timer too");
  clock.advance(0);
  assert.equal(g.starts.length, 2);
  await g.finish();
  await r.stop();
});

test("run(ms) keeps its own deadline inside a trailing wait", async () => {
  const clock = new FakeClock(0);
  const g = gated(clock);
  const r = runner(clock, g, { delayMs: 100, maxDelayMs: 1000 });
  r.run(300);
  clock.advance(250);
  r.run(); // would wait until 350
  clock.advance(49);
  assert.deepEqual(g.at(), []);
  clock.advance(1);
  assert.deepEqual(g.at(), [300], "the earlier of the two deadlines");
  await g.finish();
  await r.stop();
});
