// Measurement: how many slots move when one backend is removed or added (equal weights).
// Run: node --import tsx bench/maglev-disruption.bench.ts [--cases 400]
//
// "extra" is the fraction of all slots that changed owner beyond the 1/N (or 1/(N+1)) that
// must move; "survivors" is the fraction of the slots of backends present in both tables
// that changed owner. Cases come from a fixed linear congruential generator, so the
// figures are reproducible. Does not: time anything (see maglev.bench.ts).

import { type MaglevTable, maglevTable, slotsMoved } from "../src/forwarding/maglev.ts";
import { nextPrime } from "../src/forwarding/maglev-size.ts";

const casesArg = process.argv.indexOf("--cases");
const CASES = casesArg > 0 ? Number(process.argv[casesArg + 1]) : 400;

let state = 12345;
const random = (): number => {
  state = (Math.imul(state, 1103515245) + 12345) >>> 0;
  return state / 2 ** 32;
};

const equal = (names: readonly string[]) => names.map((name) => ({ name, weight: 1 }));

function survivorsMoved(before: MaglevTable, after: MaglevTable, removed: string): number {
  const gone = before.backends.indexOf(removed);
  let owned = 0;
  let changed = 0;
  for (let k = 0; k < before.size; k++) {
    const owner = before.slots[k]!;
    if (owner === gone) continue;
    owned++;
    if (before.backends[owner] !== after.backends[after.slots[k]!]) changed++;
  }
  return changed / owned;
}

const pct = (sorted: readonly number[], q: number): string =>
  `${(100 * sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!).toFixed(2)}%`;

function summary(label: string, values: number[]): string {
  values.sort((a, b) => a - b);
  return `${label} median ${pct(values, 0.5)} p99 ${pct(values, 0.99)} max ${pct(values, 1)}`;
}

console.log(`equal weights, N uniform in 2..50, ${CASES} cases per row`);
for (const ratio of [100, 1000]) {
  const removeExtra: number[] = [];
  const addExtra: number[] = [];
  const survivors: number[] = [];
  for (let c = 0; c < CASES; c++) {
    const n = 2 + Math.floor(random() * 49);
    const size = nextPrime(ratio * n + 1);
    const seed = Math.floor(random() * 2 ** 32);
    const names = Array.from({ length: n }, (_, i) => `be-${Math.floor(random() * 1e9)}-${i}`);
    const before = maglevTable({ backends: equal(names), size, seed });
    const removed = names[Math.floor(random() * n)]!;
    const without = maglevTable({ backends: equal(names.filter((x) => x !== removed)), size, seed });
    removeExtra.push(slotsMoved(before, without) - 1 / n);
    survivors.push(survivorsMoved(before, without, removed));
    const added = maglevTable({ backends: equal([...names, "added"]), size, seed });
    addExtra.push(slotsMoved(before, added) - 1 / (n + 1));
  }
  console.log(`M ≈ ${ratio}·N`);
  console.log(`  ${summary("remove one: extra", removeExtra)}`);
  console.log(`  ${summary("remove one: survivors", survivors)}`);
  console.log(`  ${summary("add one:    extra", addExtra)}`);
}

console.log("N = 1000 (names node-0000…), seed 0");
const thousand = Array.from({ length: 1000 }, (_, i) => `node-${String(i).padStart(4, "0")}`);
for (const size of [16381, 65537, 131071]) {
  const before = maglevTable({ backends: equal(thousand), size, seed: 0 });
  const parts = [1, 10].map((k) => {
    const after = maglevTable({ backends: equal(thousand.slice(k)), size, seed: 0 });
    const moved = slotsMoved(before, after);
    return `remove ${k}: ${(100 * moved).toFixed(2)}% moved (${(100 * (moved - k / 1000)).toFixed(2)}% extra)`;
  });
  console.log(`  M=${String(size).padEnd(7)} ${parts.join("; ")}`);
}
