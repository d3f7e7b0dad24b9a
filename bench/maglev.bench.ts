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
import { type MaglevBackend, maglevTable } from "../src/dataplane/maglev.ts";
import { finalMix32, hashString } from "../src/dataplane/maglev-hash.ts";

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

function measure({ size, backends }: Case): { ours: number[]; base: number[] } {
  const sortedNames = backends.map((b) => b.name).sort();
  const ours: number[] = [];
  const base: number[] = [];
  for (let r = 0; r < WARMUP + RUNS; r++) {
    const t0 = performance.now();
    maglevTable({ backends, size, seed: r });
    const t1 = performance.now();
    paperTable(sortedNames, size, r);
    const t2 = performance.now();
    if (r >= WARMUP) {
      ours.push(t1 - t0);
      base.push(t2 - t1);
    }
  }
  ours.sort((a, b) => a - b);
  base.sort((a, b) => a - b);
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
console.log(
  `${"case".padEnd(26)}${"min".padStart(7)}${"median".padStart(8)}${"p95".padStart(8)} |${"base min".padStart(9)}${"median".padStart(8)}${"p95".padStart(8)} | ratio med (min)`,
);
for (const c of cases) {
  const { ours, base } = measure(c);
  const [oMin, oMed, oP95] = [ours[0]!, quantile(ours, 0.5), quantile(ours, 0.95)];
  const [bMin, bMed, bP95] = [base[0]!, quantile(base, 0.5), quantile(base, 0.95)];
  console.log(
    `${c.label.padEnd(26)}${fmt(oMin)}${fmt(oMed, 8)}${fmt(oP95, 8)} |${fmt(bMin, 9)}${fmt(bMed, 8)}${fmt(bP95, 8)} | ${(oMed / bMed).toFixed(2)}× (${(oMin / bMin).toFixed(2)}×)`,
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
