/**
 * The tunnel check keeper under a fake clock, over a scripted EncapCheckRoutes: syncs never
 * overlap and coalesce, the periodic re-check runs only with the check on, failures are
 * reported once per message and do not stop it.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { FakeClock } from "../health/clock.ts";
import type { EncapCheckRoutes } from "./routing/encap-check-routes.ts";
import { TunnelCheckKeeper } from "./tunnel-check-keeper.ts";

const settle = () => new Promise((r) => setImmediate(r));

/** routes whose syncs the test finishes by hand, with the results it scripts */
function scripted(results: ({ changed: boolean } | Error)[]) {
  const calls: { addresses: readonly string[]; enabled: boolean | undefined }[] = [];
  const open: (() => void)[] = [];
  const routes: EncapCheckRoutes = {
    async sync(addresses, enabled) {
      calls.push({ addresses, enabled });
      await new Promise<void>((resolve) => open.push(resolve));
      const r = results.shift() ?? { changed: false };
      if (r instanceof Error) throw r;
      return r;
    },
  };
  const finish = async () => {
    open.shift()?.();
    await settle();
  };
  return { routes, calls, finish };
}

test("syncs coalesce, re-check every period with the check on, report each new failure once", async () => {
  const clock = new FakeClock(0);
  const r = scripted([{ changed: true }, new Error("ip: boom"), new Error("ip: boom"), { changed: false }]);
  let addresses = ["198.51.100.11"];
  const synced: number[] = [];
  const failed: string[] = [];
  const k = new TunnelCheckKeeper({
    routes: r.routes,
    addresses: () => addresses,
    enabled: true,
    everyMs: 5000,
    clock,
    onSynced: (n) => synced.push(n),
    onFailed: (m) => failed.push(m),
  });
  k.sync();
  addresses = ["198.51.100.11", "198.51.100.12"];
  k.sync();
  k.sync();
  assert.equal(r.calls.length, 1, "one sync at a time");
  await r.finish();
  assert.deepEqual(synced, [2]);
  assert.equal(r.calls.length, 2, "the two requests during the sync: one more");
  assert.deepEqual(r.calls[1], { addresses, enabled: true });
  await r.finish();
  assert.deepEqual(failed, ["tunnel check routes: ip: boom"]);
  clock.advance(4999);
  assert.equal(r.calls.length, 2);
  clock.advance(1);
  assert.equal(r.calls.length, 3, "the periodic re-check");
  await r.finish();
  assert.equal(failed.length, 1, "the same failure again is not reported again");
  clock.advance(5000);
  await r.finish();
  assert.equal(r.calls.length, 4);
  await k.stop();
  clock.advance(60_000);
  assert.equal(r.calls.length, 4);
  assert.equal(clock.pending, 0);
});

test("without --encap-check: one sync removes a previous run's check, and no period", async () => {
  const clock = new FakeClock(0);
  const r = scripted([{ changed: true }]);
  const synced: number[] = [];
  const k = new TunnelCheckKeeper({
    routes: r.routes,
    addresses: () => [],
    enabled: false,
    everyMs: 5000,
    clock,
    onSynced: (n) => synced.push(n),
  });
  assert.equal(clock.pending, 0);
  k.sync();
  await r.finish();
  assert.deepEqual(r.calls, [{ addresses: [], enabled: false }]);
  assert.deepEqual(synced, [], "removing is not reported as synced");
  clock.advance(60_000);
  assert.equal(r.calls.length, 1);
  await k.stop();
});
