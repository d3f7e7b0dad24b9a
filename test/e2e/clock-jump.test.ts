/**
 * The LB host's clock jumps ±1 h under load (issue 16 §1, "clocks"), in the lab as root with
 * real packets (test/fixtures/lab/e2e/). The machine's clock is never touched: `passlb lb`
 * is restarted under libfaketime (LD_PRELOAD) faking CLOCK_REALTIME only
 * (FAKETIME_DONT_FAKE_MONOTONIC=1) from a timestamp file read on every call
 * (FAKETIME_NO_CACHE=1); the test writes +1 h, then 0, then -1 h into it while one client
 * opens a new connection every 20 ms to an eTP Cluster VIP and another holds long-lived
 * ones to the eTP Local VIP.
 * Bounds: no health flap (no `health_transition` away from a verdict in the LB's log during
 * the jumps), 0 failed new connections, 0 broken long-lived ones. The prober's intervals and timeouts
 * run on the monotonic clock (src/health/clock.ts: performance.timeOrigin +
 * performance.now(), and Node's timers); the lease part is the unit test
 * src/controller/lease-elector.test.ts (this lab has no API server).
 * Needs libfaketime (Debian package `libfaketime`); skipped with that reason otherwise.
 * Root only; the lab (`fclk<pid>`) is removed when the test ends, pass or fail.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { holdLoad, streamFigures, streamLoad, waitServing } from "./under-load.ts";

const TOPOLOGY = "test/fixtures/lab/e2e/topology.yaml";
const LIBFAKETIME = [
  "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/aarch64-linux-gnu/faketime/libfaketime.so.1",
  "/usr/lib/faketime/libfaketime.so.1",
].find((p) => existsSync(p));
const why =
  labUnavailable() ??
  (LIBFAKETIME
    ? undefined
    : "needs libfaketime (Debian package libfaketime) to fake the LB's CLOCK_REALTIME: not installed");
/** offsets written to the timestamp file, one every `STEP_MS` (libfaketime's relative format) */
const JUMPS = ["+1h", "+0", "-1h"] as const;
const STEP_MS = 7000;

test("the LB host's clock jumps ±1 h: no health flap, nothing lost", { timeout: 240_000 }, async (t) => {
  if (why) return t.skip(why);
  const dir = mkdtempSync(join(tmpdir(), "plb-clock-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const stamp = join(dir, "faketime");
  writeFileSync(stamp, "+0\n");
  const env = {
    LD_PRELOAD: LIBFAKETIME!,
    FAKETIME_TIMESTAMP_FILE: stamp,
    FAKETIME_NO_CACHE: "1",
    FAKETIME_DONT_FAKE_MONOTONIC: "1",
  };
  // libfaketime works here: Node's own Date under it follows the file (what `passlb lb` reads)
  writeFileSync(stamp, "+1h\n");
  const faked = Number(
    spawnSync(process.execPath, ["-e", "console.log(Date.now() / 1000)"], {
      env: { ...process.env, ...env },
      encoding: "utf8",
    }).stdout,
  );
  writeFileSync(stamp, "+0\n");
  assert.ok(
    Math.abs(faked - Date.now() / 1000 - 3600) < 60,
    `libfaketime does not fake Node's clock (${faked} vs ${Date.now() / 1000})`,
  );

  const lab = await startLab(t, TOPOLOGY, { prefix: "fclk", lb: true });
  await lab.restart("lb", "lb", false, "SIGTERM", env);
  const stream = { client: "client-a", target: `${await lab.vip("e2e/any")}:81` };
  const held = { client: "client-b", target: `${await lab.vip("e2e/web")}:80` };
  await waitServing(lab, [stream, held]);
  await sleep(10_000); // the restarted LB's first probes have settled every target
  const log = lab.state.processes.find((p) => p.role === "lb")!.log;
  const from = readFileSync(log, "utf8").length;
  const ms = 2500 + JUMPS.length * STEP_MS + 2000;
  const s = streamLoad(lab, stream, ms);
  const h = holdLoad(lab, held, ms);
  await sleep(2500);
  const startedAt = Date.now();
  for (const offset of JUMPS) {
    writeFileSync(stamp, `${offset}\n`);
    await sleep(STEP_MS);
  }
  const run = await s;
  const holds = await h;
  const f = streamFigures(run, startedAt);
  const flaps = readFileSync(log, "utf8")
    .slice(from)
    .split("\n")
    // a flap is a verdict turned over; a first verdict (`unknown → …`) of a target the
    // restarted LB had not judged yet is not one
    .filter((l) => /health_transition/.test(l) && !/unknown →/.test(l));
  const broken = holds.connections.filter((c) => !c.ok);
  t.diagnostic(
    `clock jumps ${JUMPS.join(", ")} every ${STEP_MS} ms: ${f.failed.length} of ${run.events.length} new connections failed ${JSON.stringify(f.errors)}; ${broken.length} of ${holds.connections.length} long-lived broke; ${flaps.length} health transitions: ${flaps.slice(0, 3).join(" | ")}`,
  );
  assert.ok(run.events.length > 300, `only ${run.events.length} connections`);
  assert.deepEqual(flaps, [], "no health transition while the clock jumped");
  assert.deepEqual(f.failed, [], "no new connection failed");
  assert.deepEqual(broken, [], "no long-lived connection broke");
});
