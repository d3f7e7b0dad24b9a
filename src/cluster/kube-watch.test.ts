/**
 * The reflector's retry policy and the source's read runner (coalescing-runner.ts), under a
 * fake clock and a scripted transport (the HTTP behaviour is tested against the fake API server in test/kube/).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { FakeClock } from "../health/clock.ts";
import { CoalescingRunner } from "./coalescing-runner.ts";
import type { KubeTransport, ListResult } from "./kube-transport.ts";
import { backoffDelay, ResourceReflector, type RestartReason } from "./kube-watch.ts";

const flush = () => new Promise((r) => setImmediate(r));

test("backoff doubles from the initial delay to the cap, with up to half of it jittered", () => {
  const b = { initialMs: 500, maxMs: 30_000 };
  assert.deepEqual(
    [1, 2, 3, 4, 5, 6, 7, 8].map((n) => backoffDelay(n, b, () => 0)),
    [250, 500, 1000, 2000, 4000, 8000, 15_000, 15_000],
  );
  assert.equal(
    backoffDelay(3, b, () => 0.999_999),
    2000,
  );
  for (let n = 1; n < 12; n++) {
    const d = backoffDelay(n, b, Math.random);
    const base = Math.min(30_000, 500 * 2 ** (n - 1));
    assert.ok(d >= base / 2 && d <= base, `attempt ${n}: ${d}`);
  }
});

/** A transport whose lists fail while `down`, and whose watches the test ends by hand. */
function scripted() {
  const calls: string[] = [];
  let down = true;
  let items: unknown[] = [];
  let rv = 10;
  let end: ((err: unknown) => void) | undefined;
  let emit: ((type: string, obj: unknown) => void) | undefined;
  const transport: KubeTransport = {
    async list(): Promise<ListResult> {
      calls.push("list");
      if (down) throw new Error("connect ECONNREFUSED 127.0.0.1:6443");
      return { items, resourceVersion: String(rv) };
    },
    async watch(_path, params, onEvent, onDone) {
      calls.push(`watch ${params.resourceVersion}`);
      if (down) {
        onDone(new Error("connect ECONNREFUSED"));
        return { abort() {} };
      }
      emit = onEvent;
      end = onDone;
      return { abort() {} };
    },
  };
  return {
    transport,
    calls,
    set down(v: boolean) {
      down = v;
    },
    set items(v: unknown[]) {
      items = v;
      rv++;
    },
    emit: (type: string, obj: unknown) => emit?.(type, obj),
    end: (err: unknown) => end?.(err),
  };
}

const svc = (name: string, rv: string) => ({ metadata: { name, namespace: "default", resourceVersion: rv } });

test("the reflector backs off while the server is away, relists on 410 and re-watches at once after a close", async () => {
  const clock = new FakeClock();
  const api = scripted();
  const restarts: { reason: RestartReason; delay: number }[] = [];
  let changes = 0;
  const r = new ResourceReflector({
    resource: "services",
    path: "/api/v1/services",
    kind: "Service",
    apiVersion: "v1",
    transport: api.transport,
    clock,
    random: () => 0,
    backoff: { initialMs: 100, maxMs: 1000 },
    onChange: () => changes++,
    onRestart: (reason, _detail, delay) => restarts.push({ reason, delay }),
  });
  r.start();
  await flush();
  for (let i = 0; i < 5; i++) {
    clock.advance(restarts[restarts.length - 1]?.delay ?? 0);
    await flush();
  }
  assert.deepEqual(
    restarts.map((x) => x.delay),
    [50, 100, 200, 400, 500, 500],
    "doubling, capped, all errors",
  );
  assert.ok(restarts.every((x) => x.reason === "error"));
  assert.equal(r.synced, false);

  api.down = false;
  api.items = [svc("a", "5"), svc("b", "6")];
  clock.advance(500);
  await flush();
  assert.equal(r.synced, true);
  assert.equal(r.objects.size, 2);
  assert.equal(r.objects.get("default/a")?.kind, "Service", "kind restored on list items");
  assert.equal(api.calls[api.calls.length - 1], "watch 11");

  api.emit("MODIFIED", { ...svc("a", "12"), kind: "Service", apiVersion: "v1" });
  api.emit("BOOKMARK", { metadata: { resourceVersion: "20" } });
  assert.equal(r.resourceVersion, "12", "a bookmark without kind does not move the version");
  clock.advance(5000); // the watch has lived long enough: a close is a normal restart
  api.end(null);
  await flush();
  assert.deepEqual(restarts[restarts.length - 1], { reason: "closed", delay: 0 });
  assert.equal(api.calls[api.calls.length - 1], "watch 12");

  const changesBefore = changes;
  api.emit("ERROR", { kind: "Status", code: 410, reason: "Expired" });
  api.items = [svc("a", "12")];
  api.end(null);
  await flush();
  assert.deepEqual(restarts[restarts.length - 1], { reason: "expired", delay: 0 });
  assert.deepEqual(api.calls.slice(-2), ["list", "watch 12"], "a relist, then a watch from its version");
  assert.deepEqual([...r.objects.keys()], ["default/a"], "the relist saw the deletion of b");
  assert.equal(changes, changesBefore + 1);

  // a watch the server ends at once without an event backs off instead of spinning
  api.end(null);
  await flush();
  assert.equal(restarts[restarts.length - 1]?.reason, "closed");
  assert.ok((restarts[restarts.length - 1]?.delay ?? 0) > 0);
  r.stop();
  assert.equal(clock.pending, 0, "stop clears the timer");
});

test("a watch silent well past its own timeout is abandoned and retried", async () => {
  const clock = new FakeClock();
  const api = scripted();
  api.down = false;
  const restarts: string[] = [];
  const r = new ResourceReflector({
    resource: "nodes",
    path: "/api/v1/nodes",
    kind: "Node",
    apiVersion: "v1",
    transport: api.transport,
    clock,
    random: () => 0, // timeoutSeconds = 300
    minWatchTimeoutSeconds: 300,
    onChange: () => {},
    onRestart: (reason, detail) => restarts.push(`${reason}: ${detail}`),
  });
  r.start();
  await flush();
  clock.advance(329_000);
  assert.deepEqual(restarts, [], "not before the grace period");
  clock.advance(1000);
  await flush();
  assert.match(restarts[0] ?? "", /^error: watch: no end of the watch 30 s past its 300 s timeout/);
  r.stop();
  assert.equal(clock.pending, 0);
});

test("the source's read runner waits for quiet, but never longer than the ceiling after the first poke", async () => {
  const clock = new FakeClock();
  const fired: number[] = [];
  const start = clock.now();
  const r = new CoalescingRunner(
    () => {
      fired.push(clock.now() - start);
    },
    { clock, delayMs: 100, maxDelayMs: 1000 },
  );
  const d = { poke: () => r.run(), close: () => r.stop() };
  d.poke();
  clock.advance(50);
  d.poke();
  clock.advance(99);
  assert.deepEqual(fired, []);
  clock.advance(1);
  await flush();
  assert.deepEqual(fired, [150], "100 ms after the last poke");

  // a poke every 10 ms for 3 s: one call per second, not one per poke
  fired.length = 0;
  for (let i = 0; i < 300; i++) {
    d.poke();
    clock.advance(10);
    await flush();
  }
  clock.advance(200);
  await flush();
  assert.ok(fired.length >= 3 && fired.length <= 4, `${fired.length} calls`);
  await d.close();
  d.poke();
  assert.equal(clock.pending, 0, "closed: no more timers");
});
