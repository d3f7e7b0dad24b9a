// Benchmark: weighted Maglev table build time and table memory.
// Run: node --import tsx bench/maglev.bench.ts [--runs 30]
//
// Baseline, measured in the same process and interleaved run by run with ours: the paper's
// unweighted population (landscape.md §4.1) written plainly below, with the same hash and
// the same incremental preference lists. The ratio ours/baseline is what to compare across
// machines; absolute times depend on the host and its load (see docs/benchmarks.md).
// Does not: measure lookups or nftables map memory (a later issue).

import { cpus, loadavg } from "node:os";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { type MaglevBackend, maglevTable } from "../src/forwarding/maglev.ts";
import { finalMix32, hashString } from "../src/forwarding/maglev-hash.ts";

const runsArg = process.argv.indexOf("--runs");
const RUNS = runsArg > 0 ? Number(process.argv[runsArg + 1]) : 30;
const WARMUP = 5;

/** The paper's table: equal turns in name order until every slot is taken. */
function paperTable(names: readonly string[], size: number, seed: number): Int32Array {
  const n = names.length;
  const next = new Uint32Array(n);
  const skip = new Uint32Array(n);
  const skipSeed = finalMix32((seed + 0x9e3779b9) | 0);
  for (let i = 0; i < n; i++) {
    next[i] = hashString(names[i]!, seed) % size;
    skip[i] = (hashString(names[i]!, skipSeed) % (size - 1)) + 1;
  }
  const slots = new Int32Array(size).fill(-1);
  let filled = 0;
  for (;;) {
    for (let i = 0; i < n; i++) {
      const step = skip[i]!;
      let p = next[i]!;
      while (slots[p] !== -1) {
        p += step;
        if (p >= size) p -= size;
      }
      slots[p] = i;
      p += step;
      next[i] = p >= size ? p - size : p;
      if (++filled === size) return slots;
    }
  }
}

type Case = { label: string; size: number; backends: MaglevBackend[] };

const names = (n: number): string[] =>
  Array.from({ length: n }, (_, i) => `node-${String(i).padStart(4, "0")}`);
const withWeights = (n: number, weight: (i: number) => number): MaglevBackend[] =>
  names(n).map((name, i) => ({ name, weight: weight(i) }));

const cases: Case[] = [
  { label: "M=16381 N=1000 equal", size: 16381, backends: withWeights(1000, () => 1) },
  { label: "M=65537 N=1000 equal", size: 65537, backends: withWeights(1000, () => 1) },
  { label: "M=65537 N=1000 w 1..10", size: 65537, backends: withWeights(1000, (i) => 1 + ((i * 7) % 10)) },
  { label: "M=65537 N=1000 1×w1000", size: 65537, backends: withWeights(1000, (i) => (i === 0 ? 1000 : 1)) },
  { label: "M=131071 N=1000 equal", size: 131071, backends: withWeights(1000, () => 1) },
];

const quantile = (sorted: readonly number[], q: number): number =>
  sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)]!;

type Samples = { wall: number[]; cpu: number[] };

/** Wall time and this process's CPU time (user + system) of one call, in ms. */
function timed(run: () => void, into: Samples): void {
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  run();
  const t1 = performance.now();
  const cpu = process.cpuUsage(cpu0);
  into.wall.push(t1 - t0);
  into.cpu.push((cpu.user + cpu.system) / 1000);
}

function measure({ size, backends }: Case): { ours: Samples; base: Samples } {
  const sortedNames = backends.map((b) => b.name).sort();
  const ours: Samples = { wall: [], cpu: [] };
  const base: Samples = { wall: [], cpu: [] };
  const scratch: Samples = { wall: [], cpu: [] };
  for (let r = 0; r < WARMUP + RUNS; r++) {
    const keep = r >= WARMUP;
    timed(() => maglevTable({ backends, size, seed: r }), keep ? ours : scratch);
    timed(() => paperTable(sortedNames, size, r), keep ? base : scratch);
  }
  for (const s of [ours.wall, ours.cpu, base.wall, base.cpu]) s.sort((a, b) => a - b);
  return { ours, base };
}

/** Retained bytes per table (V8 heap + array buffers), measured over 20 live tables. */
function tableBytes(size: number, backends: MaglevBackend[]): number {
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  const used = (): number => {
    gc();
    gc();
    const m = process.memoryUsage();
    return m.heapUsed + m.arrayBuffers;
  };
  const keep: unknown[] = [];
  const before = used();
  for (let k = 0; k < 20; k++) keep.push(maglevTable({ backends, size, seed: k }));
  const after = used();
  if (keep.length !== 20) throw new Error("unreachable");
  return (after - before) / 20;
}

const fmt = (ms: number, width = 7): string => ms.toFixed(2).padStart(width);
console.log(
  `node ${process.version}, ${cpus()[0]?.model ?? "?"} × ${cpus().length}, load ${loadavg()[0]!.toFixed(2)}`,
);
console.log(`${RUNS} runs after ${WARMUP} warm-up, interleaved; ms; base = unweighted paper algorithm`);
console.log("wall: median and p95 of elapsed time; cpu: median of this process's CPU time per build");
console.log(
  `${"case".padEnd(26)}${"median".padStart(7)}${"p95".padStart(7)}${"cpu".padStart(7)} |${"base".padStart(7)}${"p95".padStart(7)}${"cpu".padStart(7)} | ratio wall (cpu)`,
);
for (const c of cases) {
  const { ours, base } = measure(c);
  const o = [quantile(ours.wall, 0.5), quantile(ours.wall, 0.95), quantile(ours.cpu, 0.5)] as const;
  const b = [quantile(base.wall, 0.5), quantile(base.wall, 0.95), quantile(base.cpu, 0.5)] as const;
  console.log(
    `${c.label.padEnd(26)}${o.map((x) => fmt(x)).join("")} |${b.map((x) => fmt(x)).join("")} | ${(o[0] / b[0]).toFixed(2)}× (${(o[2] / b[2]).toFixed(2)}×)`,
  );
}
console.log("table memory (bytes per table, measured / slots typed array):");
for (const size of [16381, 65537, 131071]) {
  const backends = withWeights(1000, () => 1);
  const measured = tableBytes(size, backends);
  console.log(
    `  M=${String(size).padEnd(7)} N=1000  ${Math.round(measured).toLocaleString("en")} / ${(size * 4).toLocaleString("en")}`,
  );
}
