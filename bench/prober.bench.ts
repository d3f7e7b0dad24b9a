// Benchmark: the health prober at scale (issue 5 §4). Run:
//   node --import tsx bench/prober.bench.ts [--targets 5000] [--seconds 60] [--baseline-seconds 10]
//     [--fresh-seconds 10] [--max-concurrent 8192]
// 1. Starts N loopback HTTP health servers (127.10.a.b:10256) in a child process.
// 2. Baseline, same process and schedule: the Prober with a probe that does no I/O
//    (timers, scheduling and the state machine only).
// 3. The real thing: the Prober over real sockets with kept-alive connections
//    (ProbeConnections, the default), every target each second; and, shorter, the same
//    with a new connection per probe (probeOnce) for comparison. Measures CPU of this process (process.cpuUsage), lateness of each probe's
//    start against its schedule (p50/p99/max), RSS over time.
// 4. Detection: targets start answering 503, hanging or refusing; the time from the
//    change (the moment it was asked of the child) until the prober marks them unhealthy,
//    against interval × unhealthyThreshold + timeout.
// Prints a Markdown table for docs/benchmarks.md.
import { type ChildProcess, fork } from "node:child_process";
import { loadavg } from "node:os";
import { realClock } from "../src/health/clock.ts";
import { ProbeConnections } from "../src/health/probe-connections.ts";
import { probeOnce } from "../src/health/probe-once.ts";
import { type ProbeFn, Prober, type ProberEvent } from "../src/health/prober.ts";
import type { ProbeTarget } from "../src/health/state-probe-targets.ts";
import { benchAddress } from "./bench-addresses.ts";

function flag(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  const v = i >= 0 ? Number(process.argv[i + 1]) : fallback;
  if (!(v > 0)) throw new Error(`--${name} must be a positive number`);
  return v;
}

const TARGETS = flag("targets", 5000);
const SECONDS = flag("seconds", 60);
const BASELINE_SECONDS = flag("baseline-seconds", Math.min(10, SECONDS));
const FRESH_SECONDS = flag("fresh-seconds", Math.min(10, SECONDS));
const PORT = 10256;
const INTERVAL_MS = 1000;
const TIMEOUT_MS = 1000;
const UNHEALTHY = 2;
const HEALTHY = 1;
const CPU_BUDGET = 0.3;
const LATENESS_BUDGET_MS = 100;
/** steady state: the first connections to every target are made before measuring */
const WARMUP_MS = 5000;
/** kept connections hold a socket per target anyway; new connections are bounded harder */
const MAX_CONCURRENT = flag("max-concurrent", 8192);
const FRESH_MAX_CONCURRENT = 512;

const targets: ProbeTarget[] = Array.from({ length: TARGETS }, (_, i) => {
  const address = benchAddress(i);
  return {
    key: `HTTP ${address}:${PORT}/healthz`,
    protocol: "HTTP",
    family: "IPv4",
    address,
    port: PORT,
    path: "/healthz",
    intervalMs: INTERVAL_MS,
    timeoutMs: TIMEOUT_MS,
    healthyThreshold: HEALTHY,
    unhealthyThreshold: UNHEALTHY,
    readsWeight: true,
    users: [{ service: "bench/svc", check: "local", node: `node-${i}` }],
  };
});

function startChild(): Promise<ChildProcess> {
  const child = fork(
    new URL("./probe-targets-server.ts", import.meta.url).pathname,
    [String(TARGETS), String(PORT)],
    {
      execArgv: ["--import", "tsx"],
      stdio: ["ignore", "inherit", "inherit", "ipc"],
    },
  );
  return new Promise((resolve, reject) => {
    child.once("error", reject);
    child.once("exit", (code) => reject(new Error(`target servers exited with ${code}`)));
    child.once("message", () => resolve(child));
  });
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** lateness in 0.1 ms buckets up to 10 s: fixed memory, so the bench does not grow the heap it measures */
class Histogram {
  readonly counts = new Uint32Array(100_001);
  n = 0;
  max = Number.NEGATIVE_INFINITY;
  add(ms: number): void {
    this.n++;
    if (ms > this.max) this.max = ms;
    const i = Math.min(100_000, Math.max(0, Math.round(ms * 10)));
    this.counts[i] = (this.counts[i] ?? 0) + 1;
  }
  percentile(p: number): number {
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      seen += this.counts[i] ?? 0;
      if (seen > p * this.n) return i / 10;
    }
    return Number.NaN;
  }
}

interface Run {
  cpuFraction: number;
  targetsCpuFraction: number;
  probes: number;
  perSecond: number;
  failures: number;
  lateness: { p50: number; p99: number; max: number };
  rssMiB: number[];
  heapMiB: number[];
  skipped: number;
  reasons: [string, number][];
}

async function measure(
  probe: ProbeFn,
  seconds: number,
  events: ProberEvent[] = [],
  after?: () => Promise<void>,
  forget?: (key: string) => void,
  maxConcurrent = MAX_CONCURRENT,
): Promise<Run> {
  const lateness = new Histogram();
  const reasons = new Map<string, number>();
  let failures = 0;
  let measuring = false;
  const prober = new Prober({
    clock: realClock(),
    probe,
    seed: 1,
    // kept connections hold one socket per target anyway; the bound matters for new ones
    maxConcurrent,
    onEvent: (e) => events.push(e),
    ...(forget && { forget }),
    onProbe: (r) => {
      if (!measuring) return;
      lateness.add(r.startedAt - r.scheduledAt);
      if (!r.outcome.ok) {
        failures++;
        reasons.set(r.outcome.reason, (reasons.get(r.outcome.reason) ?? 0) + 1);
      }
    },
  });
  prober.setTargets(targets);
  await sleep(WARMUP_MS);
  const rssMiB: number[] = [];
  const heapMiB: number[] = [];
  const sample = () => {
    const m = process.memoryUsage();
    rssMiB.push(m.rss / 2 ** 20);
    heapMiB.push(m.heapUsed / 2 ** 20);
  };
  sample();
  const childCpu0 = await childCpu();
  measuring = true;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  for (let s = 0; s < seconds; s += 5) {
    await sleep(Math.min(5, seconds - s) * 1000);
    sample();
  }
  const cpu = process.cpuUsage(cpu0);
  const wall = performance.now() - t0;
  measuring = false;
  const childCpu1 = await childCpu(); // the child may answer late; its figure is approximate
  await after?.();
  await prober.close();
  return {
    cpuFraction: (cpu.user + cpu.system) / 1000 / wall,
    targetsCpuFraction: (childCpu1 - childCpu0) / 1000 / wall,
    probes: lateness.n,
    perSecond: lateness.n / (wall / 1000),
    failures,
    lateness: { p50: lateness.percentile(0.5), p99: lateness.percentile(0.99), max: lateness.max },
    rssMiB,
    heapMiB,
    skipped: prober.skipped,
    reasons: [...reasons].sort((a, b) => b[1] - a[1]).slice(0, 3),
  };
}

async function detection(child: ChildProcess, events: ProberEvent[]) {
  const budget = INTERVAL_MS * UNHEALTHY + TIMEOUT_MS;
  const results: { mode: string; ms: number }[] = [];
  const modes = ["503", "hang", "refuse"] as const;
  let index = 0;
  for (const mode of modes)
    for (let k = 0; k < 3; k++) {
      const i = 17 + 400 * index++;
      const key = targets[i]?.key ?? "";
      const asked = performance.timeOrigin + performance.now();
      child.send({ index: i, mode });
      const deadline = asked + budget + 5000;
      let found: ProberEvent | undefined;
      while (!found && performance.timeOrigin + performance.now() < deadline) {
        await sleep(10);
        found = events.find(
          (e) => e.kind === "transition" && e.to === "unhealthy" && e.target.key === key && e.at >= asked,
        );
      }
      results.push({ mode, ms: found ? found.at - asked : Number.POSITIVE_INFINITY });
    }
  return { budget, results };
}

/** how much of one core this process gets when it wants all of it (the machine is shared) */
function cpuAvailable(): number {
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  while (performance.now() - t0 < 1000) {}
  const c = process.cpuUsage(c0);
  return (c.user + c.system) / 1000 / (performance.now() - t0);
}

const child = await startChild();
/** CPU microseconds the target servers' process has used so far */
function childCpu(): Promise<number> {
  return new Promise((resolve) => {
    const onMessage = (m: { cpu?: number }) => {
      if (m.cpu === undefined) return;
      child.off("message", onMessage);
      resolve(m.cpu);
    };
    child.on("message", onMessage);
    child.send({ cpu: true });
  });
}
const load = loadavg()[0]?.toFixed(2);
const available = cpuAvailable();
const idle: ProbeFn = () => Promise.resolve({ ok: true, reason: "HTTP 200", weight: 1 });
const base = await measure(idle, BASELINE_SECONDS);

const events: ProberEvent[] = [];
let detect: Awaited<ReturnType<typeof detection>> | undefined;
const connections = new ProbeConnections();
const real = await measure(
  connections.probe,
  SECONDS,
  events,
  async () => {
    detect = await detection(child, events);
  },
  (key) => connections.forget(key),
);
connections.close();
// last, so its connection storms cannot disturb the main measurement
const fresh = await measure(probeOnce, FRESH_SECONDS, [], undefined, undefined, FRESH_MAX_CONCURRENT);
child.disconnect();

const fmt = (n: number, d = 1) => (Number.isFinite(n) ? n.toFixed(d) : "∞");
const mem = (xs: number[]) =>
  `${fmt(xs[0] ?? Number.NaN)} → ${fmt(xs.at(-1) ?? Number.NaN)} (max ${fmt(Math.max(...xs))})`;
const lat = (r: Run) => `${fmt(r.lateness.p50, 2)} / ${fmt(r.lateness.p99, 2)} / ${fmt(r.lateness.max, 2)}`;
const row = (name: string, f: (r: Run) => string, budget: string, ratio: string) =>
  console.log(`| ${name} | ${f(base)} | ${f(real)} | ${f(fresh)} | ${budget} | ${ratio} |`);
console.log(
  `\nprober benchmark: ${TARGETS} targets, every ${INTERVAL_MS} ms; measured ${SECONDS} s (kept connections), ` +
    `${FRESH_SECONDS} s (new connection per probe), ${BASELINE_SECONDS} s (baseline); load average at start ${load}; ` +
    `a busy loop got ${fmt(available * 100)} % of a core\n`,
);
console.log(
  "| measure | baseline: no I/O, same schedule | prober, kept connections | prober, new connection per probe | budget | kept / budget |",
);
console.log("| --- | --- | --- | --- | --- | --- |");
row(
  "CPU, share of one core",
  (r) => `${fmt(r.cpuFraction * 100)} %`,
  `${CPU_BUDGET * 100} %`,
  fmt(real.cpuFraction / CPU_BUDGET, 2),
);
row("CPU / baseline", (r) => fmt(r.cpuFraction / base.cpuFraction, 2), "", "");
row("target servers' CPU (other process)", (r) => `${fmt(r.targetsCpuFraction * 100)} %`, "", "");
row("probes run (failed)", (r) => `${r.probes} (${r.failures})`, "", "");
row("probes a second", (r) => fmt(r.perSecond, 0), `${TARGETS}`, fmt(real.perSecond / TARGETS, 3));
row(
  "start lateness p50 / p99 / max, ms",
  lat,
  `max ${LATENESS_BUDGET_MS}`,
  fmt(real.lateness.max / LATENESS_BUDGET_MS, 2),
);
row("top failure reasons", (r) => r.reasons.map(([k, v]) => `${k} ×${v}`).join("; "), "", "");
row("turns skipped (probe still running)", (r) => String(r.skipped), "0", "");
row(
  "RSS MiB, start → end (max)",
  (r) => mem(r.rssMiB),
  "flat",
  fmt((real.rssMiB.at(-1) ?? 0) / (real.rssMiB[0] ?? 1), 2),
);
row(
  "heap used MiB, start → end (max)",
  (r) => mem(r.heapMiB),
  "flat",
  fmt((real.heapMiB.at(-1) ?? 0) / (real.heapMiB[0] ?? 1), 2),
);
if (detect) {
  console.log(
    `\ndetection (interval ${INTERVAL_MS} ms × unhealthyThreshold ${UNHEALTHY} + timeout ${TIMEOUT_MS} ms = ${detect.budget} ms):\n`,
  );
  console.log("| target starts to | detection times, ms | worst / budget |");
  console.log("| --- | --- | --- |");
  for (const mode of ["503", "hang", "refuse"]) {
    const ms = detect.results.filter((r) => r.mode === mode).map((r) => r.ms);
    console.log(
      `| ${mode} | ${ms.map((m) => fmt(m, 0)).join(", ")} | ${fmt(Math.max(...ms) / detect.budget, 2)} |`,
    );
  }
}
