/**
 * The prober's HTTP fuzzer at volume (issue 16 §3): N generated answers (default 3,000;
 * test/prober-fuzz.ts) played by loopback servers to passlb's real probes — probeOnce and
 * two probes in a row on a kept connection (ProbeConnections) — `--parallel` cases at a
 * time, each on a server of its own. Counts exceptions, probes that ended later than their
 * timeout + 250 ms, verdicts other than the oracle's, and what is left open at the end;
 * the time per probe (p50, p99, max) against a baseline measured in the same run: probes
 * of a well-formed `HTTP/1.1 200 OK` answer. Servers and probes share one process, so a
 * stalled event loop (a loaded machine deschedules it) delays the probe's own timer: a
 * timer sampling every 5 ms measures the loop's lag, and a late probe is "explained" when
 * the lag seen during it covers its overshoot.
 * Run: node --import tsx bench/prober-fuzz.bench.ts [--runs 3000 --seed 16 --parallel 8]
 */
import { loadavg } from "node:os";
import fc from "fast-check";
import { ProbeConnections } from "../src/health/probe-connections.ts";
import { type Answer, AnswerServer, answerArb, expectation, probeCase } from "../test/prober-fuzz.ts";

const argOf = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const RUNS = argOf("runs", 3000);
const SEED = argOf("seed", 16);
const PARALLEL = argOf("parallel", 8);
const TIMEOUT_MS = 300;
const SLACK_MS = 250;

const answers = fc.sample(answerArb(TIMEOUT_MS), { numRuns: RUNS, seed: SEED });
const baseline: Answer = {
  family: "baseline",
  steps: [{ write: "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok" }],
  end: "hang",
  protocol: "HTTP",
};

const families: Record<string, number> = {};
const crashes: string[] = [];
const late: string[] = [];
const wrong: string[] = [];
const times: number[] = [];
const baseTimes: number[] = [];
let next = 0;
// event-loop lag: [time, lag] every 5 ms
const lag: [number, number][] = [];
let expected = performance.now() + 5;
const lagTimer = setInterval(() => {
  const now = performance.now();
  lag.push([now, Math.max(0, now - expected)]);
  expected = now + 5;
}, 5);
const lagDuring = (from: number, to: number) => {
  let m = 0;
  for (let i = lag.length - 1; i >= 0 && lag[i]![0] >= from; i--)
    if (lag[i]![0] <= to + 50) m = Math.max(m, lag[i]![1]);
  return m;
};
let explained = 0;
let stalledTimeouts = 0;
process.on("uncaughtException", (e) => crashes.push(`uncaught: ${e.stack ?? e.message}`));
process.on("unhandledRejection", (e) => crashes.push(`unhandled rejection: ${String(e)}`));
let left = 0;
const started = performance.now();

async function worker(w: number): Promise<void> {
  const server = new AnswerServer();
  await server.start();
  const conns = new ProbeConnections({ reuse: true });
  for (let i = next++; i < RUNS; i = next++) {
    const a = answers[i]!;
    families[a.family] = (families[a.family] ?? 0) + 1;
    const want = expectation(a, TIMEOUT_MS);
    try {
      for (const r of await probeCase(server, conns, a, `w${w}c${i}`, TIMEOUT_MS)) {
        times.push(r.ms);
        if (r.ms > TIMEOUT_MS + SLACK_MS) {
          const stall = lagDuring(r.at, r.at + r.ms);
          if (r.ms - stall <= TIMEOUT_MS + SLACK_MS) explained++;
          else
            late.push(
              `case ${i} ${r.via}: ${r.ms.toFixed(0)} ms (${r.reason}), loop lag ${stall.toFixed(0)} ms`,
            );
        }
        if (want.verdict !== "either" && (r.ok ? "healthy" : "unhealthy") !== want.verdict) {
          // the answering server shares this process: a stalled loop delays its answer too
          const stall = lagDuring(r.at, r.at + r.ms);
          if (want.verdict === "healthy" && r.reason.startsWith("timeout") && stall >= 50) stalledTimeouts++;
          else
            wrong.push(
              `case ${i} ${r.via}: ${r.reason}, expected ${want.verdict} (${want.why}), loop lag ${stall.toFixed(0)} ms`,
            );
        }
      }
      server.cut();
      if (i % 10 === 0)
        for (const r of await probeCase(server, conns, baseline, `w${w}b${i}`, TIMEOUT_MS))
          baseTimes.push(r.ms);
    } catch (e) {
      crashes.push(`case ${i}: ${e instanceof Error ? e.stack : String(e)}`);
    }
    server.cut();
  }
  conns.close();
  left += conns.open;
  await new Promise((r) => setTimeout(r, 200));
  left += server.open;
  await server.close();
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.max(0, Math.ceil(s.length * p) - 1)] ?? 0;
};
await Promise.all(Array.from({ length: PARALLEL }, (_, w) => worker(w)));
clearInterval(lagTimer);
const wall = (performance.now() - started) / 1000;
console.log(`
| figure | value |
| --- | --- |
| answers | ${RUNS} (${Object.entries(families)
  .map(([k, v]) => `${k} ${v}`)
  .join(", ")}), seed ${SEED}, ${PARALLEL} at a time, 3 probes each |
| exceptions | ${crashes.length} |
| probes past timeout + ${SLACK_MS} ms (${TIMEOUT_MS} ms timeout), not explained by a stalled event loop | ${late.length} |
| … explained by a stalled event loop (the loop's lag during the probe covers the overshoot) | ${explained} (largest lag ${Math.max(0, ...lag.map((l) => l[1])).toFixed(0)} ms) |
| verdicts other than the oracle's | ${wrong.length} |
| … a healthy answer timed out while the shared event loop stalled ≥ 50 ms (the answering server runs in this process) | ${stalledTimeouts} |
| connections left open (client + server) | ${left} |
| time per probe: p50 / p99 / max | ${pct(times, 0.5).toFixed(1)} / ${pct(times, 0.99).toFixed(0)} / ${pct(times, 1).toFixed(0)} ms |
| baseline, a well-formed 200: p50 / p99 | ${pct(baseTimes, 0.5).toFixed(2)} / ${pct(baseTimes, 0.99).toFixed(1)} ms (${baseTimes.length} probes) |
| wall time, load average | ${wall.toFixed(0)} s, ${loadavg()
  .map((l) => l.toFixed(1))
  .join(" ")} |
`);
for (const x of [...crashes, ...late, ...wrong].slice(0, 20)) console.log(x.slice(0, 600));
process.exit(crashes.length + late.length + wrong.length + left > 0 ? 1 : 0);
