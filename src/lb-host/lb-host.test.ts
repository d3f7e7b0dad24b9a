/**
 * LbHost: parts start in the given order and stop in the reverse one; a part that fails to
 * start undoes the parts before it (and not itself or those after); an undo that throws is
 * reported and the teardown goes on; stop is idempotent.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { LbHost, type LbHostPart, LbHostStartError } from "./lb-host.ts";

/** parts that write "start X" / "stop X" into one journal; `fail` names parts whose start throws */
function journalled(names: readonly string[], fail: { start?: string; stop?: string } = {}) {
  const journal: string[] = [];
  const parts: LbHostPart[] = names.map((name) => ({
    name,
    async start() {
      await new Promise((r) => setImmediate(r));
      if (fail.start === name) throw new Error(`${name} would not start`);
      journal.push(`start ${name}`);
      return async () => {
        journal.push(`stop ${name}`);
        if (fail.stop === name) throw new Error(`${name} would not stop`);
      };
    },
  }));
  return { journal, parts };
}

test("start runs the parts in order, stop undoes them newest first, once", async () => {
  const { journal, parts } = journalled(["dataplane", "health", "input", "announcer", "reporter"]);
  const host = new LbHost(parts);
  assert.deepEqual(host.parts, ["dataplane", "health", "input", "announcer", "reporter"]);
  await host.start();
  assert.equal(host.state, "running");
  await host.stop();
  await host.stop();
  assert.deepEqual(journal, [
    "start dataplane",
    "start health",
    "start input",
    "start announcer",
    "start reporter",
    "stop reporter",
    "stop announcer",
    "stop input",
    "stop health",
    "stop dataplane",
  ]);
  assert.equal(host.state, "stopped");
});

test("a part that fails to start undoes the ones started before it and names itself", async () => {
  const { journal, parts } = journalled(["dataplane", "health", "announcer", "reporter"], {
    start: "announcer",
  });
  const host = new LbHost(parts);
  const err = await host.start().then(
    () => undefined,
    (e: unknown) => e,
  );
  assert.ok(err instanceof LbHostStartError);
  assert.equal(err.part, "announcer");
  assert.match(err.message, /^announcer: announcer would not start$/);
  assert.deepEqual(journal, ["start dataplane", "start health", "stop health", "stop dataplane"]);
  await assert.rejects(host.start(), /start\(\) when stopped/);
});

test("an undo step that throws is reported and the rest of the teardown still runs", async () => {
  const { journal, parts } = journalled(["dataplane", "health", "reporter"], { stop: "health" });
  const failed: string[] = [];
  const stopped: string[] = [];
  const host = new LbHost(parts, {
    stopped: (p) => stopped.push(p),
    stopFailed: (p, e) => failed.push(`${p}: ${(e as Error).message}`),
  });
  await host.start();
  await host.stop();
  assert.deepEqual(journal.slice(3), ["stop reporter", "stop health", "stop dataplane"]);
  assert.deepEqual(stopped, ["reporter", "dataplane"]);
  assert.deepEqual(failed, ["health: health would not stop"]);
});

test("a part with nothing to undo is skipped at stop; a name given twice is refused", async () => {
  const journal: string[] = [];
  const host = new LbHost([
    { name: "conntrack", start: () => void journal.push("sized") },
    { name: "dataplane", start: () => () => void journal.push("dataplane stopped") },
  ]);
  await host.start();
  await host.stop();
  assert.deepEqual(journal, ["sized", "dataplane stopped"]);
  assert.throws(
    () =>
      new LbHost([
        { name: "health", start: () => undefined },
        { name: "health", start: () => undefined },
      ]),
    /part "health" given twice/,
  );
});
