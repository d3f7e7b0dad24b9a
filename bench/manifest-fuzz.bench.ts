/**
 * The manifest fuzzer at volume (issue 16 §3): N generated manifests (default 100,000;
 * valid, near-valid and garbage, test/manifest-fuzz.ts) through parse → decode → plan →
 * provider views → the LB's transaction and the agents' rulesets. Counts crashes (an
 * exception out of the pipeline), escaping problems, inputs over the 2 s bound, the time
 * per input (p50, p99, max), and — as root — feeds every distinct script to the real
 * `nft --check` in a throwaway namespace, in batches (each LB transaction under a table
 * name of its own). Baseline in the same run: parsing alone (parseDocuments), so the
 * pipeline's cost reads as a multiple of reading the text.
 * Run: node --import tsx bench/manifest-fuzz.bench.ts [--runs 100000 --seed 16]
 */
import { createHash } from "node:crypto";
import { loadavg } from "node:os";
import fc from "fast-check";
import { parseDocuments } from "../src/k8s/documents.ts";
import { manifestText, nftCheckAll, runPipeline, scriptProblems } from "../test/manifest-fuzz.ts";
import { createNetns, deleteNetns, kernelSkipReason } from "../test/netns.ts";

const argOf = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const RUNS = argOf("runs", 100_000);
const SEED = argOf("seed", 16);
const BOUND_MS = 2000;
const BATCH = 400;

const skip = kernelSkipReason();
const ns = skip ? undefined : createNetns("fzb");
process.on("exit", () => ns && deleteNetns(ns));
for (const sig of ["SIGINT", "SIGTERM"] as const) process.on(sig, () => process.exit(130));

const pct = (xs: Float64Array, p: number) => xs[Math.max(0, Math.ceil(xs.length * p) - 1)]!;
const kinds: Record<string, number> = {};
const crashes: string[] = [];
const escapes: string[] = [];
const refused: string[] = [];
const seen = new Set<string>();
let pendingLb: string[] = [];
let pendingAgent: string[] = [];
let checked = 0;
let checkMs = 0;
let tableNo = 0;
const times = new Float64Array(RUNS);
const parseTimes = new Float64Array(RUNS);
let over = 0;

const flush = (force: boolean) => {
  if (!ns) return;
  const t = performance.now();
  if (pendingLb.length >= BATCH || (force && pendingLb.length > 0)) {
    for (const r of nftCheckAll(ns, pendingLb, BATCH)) refused.push(`${r.error}\n${r.script.slice(0, 800)}`);
    checked += pendingLb.length;
    pendingLb = [];
  }
  if (pendingAgent.length >= BATCH / 4 || (force && pendingAgent.length > 0)) {
    for (const r of nftCheckAll(ns, pendingAgent, BATCH / 4))
      refused.push(`${r.error}\n${r.script.slice(0, 800)}`);
    checked += pendingAgent.length;
    pendingAgent = [];
  }
  checkMs += performance.now() - t;
};
/** the figures so far (printed every 10,000 inputs, so a cut-short run still has them) */
function report(): void {
  const wall = (performance.now() - started) / 1000;
  const done = times.slice(0, n).sort();
  const parsed = parseTimes.slice(0, n).sort();
  const med = pct(done, 0.5);
  const pmed = pct(parsed, 0.5);
  console.log(`
| figure | value |
| --- | --- |
| inputs | ${n} (${Object.entries(kinds)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ")}) |
| crashes (an exception out of the pipeline) | ${crashes.length} |
| inputs over ${BOUND_MS} ms | ${over} |
| time per input: p50 / p99 / max | ${med.toFixed(2)} / ${pct(done, 0.99).toFixed(1)} / ${done[n - 1]!.toFixed(0)} ms |
| baseline, parsing alone: p50 / p99 / max | ${pmed.toFixed(2)} / ${pct(parsed, 0.99).toFixed(1)} / ${parsed[n - 1]!.toFixed(0)} ms (pipeline p50 = ${(med / pmed).toFixed(1)}× parsing) |
| scripts with escaping problems | ${escapes.length} |
| distinct scripts given to nft --check | ${ns ? checked : "not run"} |
| refused by nft --check | ${ns ? refused.length : "not run"} |
| wall time (pipeline; nft --check) | ${(wall - checkMs / 1000).toFixed(0)} s; ${(checkMs / 1000).toFixed(0)} s |
`);
}

const fresh = (script: string) => {
  const h = createHash("sha1").update(script).digest("base64");
  if (seen.has(h)) return false;
  seen.add(h);
  return true;
};

console.log(
  `manifest-fuzz bench: ${RUNS} inputs, seed ${SEED}; node ${process.version}; ${new Date().toISOString()}; load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}; nft --check: ${skip ? `not run (${skip})` : "yes"}`,
);
const started = performance.now();
let n = 0;
// sampled in chunks of 1,000 (a seed each), so the inputs are never all in memory at once
const inputs = function* () {
  for (let chunk = 0; chunk * 1000 < RUNS; chunk++)
    yield* fc.sample(manifestText, {
      numRuns: Math.min(1000, RUNS - chunk * 1000),
      seed: SEED * 100_000 + chunk,
    });
};
for (const { kind, text } of inputs()) {
  kinds[kind] = (kinds[kind] ?? 0) + 1;
  const p0 = performance.now();
  try {
    parseDocuments("fuzz.yaml", text);
  } catch {
    // counted below, by the pipeline
  }
  parseTimes[n] = performance.now() - p0;
  try {
    const r = await runPipeline(text, "passlb");
    times[n] = r.ms;
    if (r.ms > BOUND_MS) over++;
    for (const s of [r.lbScript, ...r.agentScripts]) {
      const problems = scriptProblems(s, r.names);
      if (problems.length > 0 && escapes.length < 20)
        escapes.push(`${problems.join("; ")} (input ${JSON.stringify(text.slice(0, 200))})`);
    }
    if (r.lbScript !== "" && fresh(r.lbScript))
      pendingLb.push(
        r.lbScript
          .replaceAll(" inet passlb ", ` inet f${tableNo++} `)
          .replaceAll(" inet passlb\n", ` inet f${tableNo - 1}\n`),
      );
    for (const s of r.agentScripts) if (fresh(s)) pendingAgent.push(s);
  } catch (e) {
    times[n] = performance.now() - p0;
    if (crashes.length < 20)
      crashes.push(
        `${(e as Error).stack?.split("\n").slice(0, 4).join(" | ")} (input ${JSON.stringify(text.slice(0, 200))})`,
      );
    else crashes.push("…");
  }
  n++;
  flush(false);
  if (n % 10_000 === 0) {
    flush(true);
    report();
  }
}
flush(true);
report();
for (const c of crashes.slice(0, 5)) console.log(`crash: ${c}`);
for (const e of escapes.slice(0, 5)) console.log(`escape: ${e}`);
for (const r of refused.slice(0, 5)) console.log(`refused: ${r}`);
process.exit(crashes.length + escapes.length + refused.length + over > 0 ? 1 : 0);
