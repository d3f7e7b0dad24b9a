/**
 * nftables data plane benchmark (issues 6 and 17), as root, in throwaway network namespaces:
 *   1. Maglev M vs kernel memory and load time: 40 slot maps of M elements each;
 *   2. full sync of Services × nodes through the LbController (plan → forwarding → render →
 *      one nft transaction), per size (`--sizes 1000x100,10000x1000`: a curve, each point
 *      a ratio to the smallest size of its shape in the same run) and shape: eTP Cluster
 *      (every Service on every node: one shared table; clusterBackendLimit raised to the
 *      node count, nft-bench-cluster.ts) and eTP Local (each Service on its own 10 nodes
 *      with pod-count weights: one distinct table per Service); transaction size, kernel
 *      slab delta per Service;
 *   3. incremental: single changes, time from the change to the committed transaction,
 *      p50/p99 (nearest rank) — under Cluster a node's health flips (every Service's table
 *      changes at once), then one endpoint of one Service leaves or comes back; under Local
 *      the endpoint change;
 *   4. this process's peak RSS, and with `--rss` `passlb lb --once` itself on the same
 *      cluster (peak RSS by /usr/bin/time, in a throwaway namespace).
 * Baselines measured in the same run: an empty-table transaction (`nft -f` fixed cost) and
 * a plain set with as many elements as the full sync (nft's per-element cost).
 * Run: node --import tsx bench/nft-sync.bench.ts [--skip-m 1] [--services N --nodes N |
 *        --sizes SxN,SxN] [--shapes cluster,local] [--changes N] [--rss]
 *        [--profile-changes DIR (a CPU profile of the incremental changes only)]
 * Addresses: nodes fd00:1::/64, VIPs fd00:10::/112 (ULA, nothing is sent anywhere).
 */
import { execFileSync, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { Session } from "node:inspector";
import { loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { createNftDriver } from "../src/drivers/nft.ts";
import { nftScript, type Transaction } from "../src/drivers/nft-transaction.ts";
import type { HealthState } from "../src/forwarding/forwarding-state.ts";
import { realClock } from "../src/health/clock.ts";
import { LbController } from "../src/lb-host/nftables/lb-controller.ts";
import { kernelTableSize } from "../src/lb-host/nftables/render/kernel-table-size.ts";
import { createNetns, deleteNetns, kernelSkipReason } from "../test/netns.ts";
import { benchCluster, endpointChange, healthChange } from "./nft-bench-cluster.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const CHANGES = arg("changes", 100);
const LOCAL_NODES = 10;
const argText = (name: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
/** `--sizes 1000x100,10000x1000` (a curve in one run), else `--services N --nodes N` */
const SIZES: [number, number][] = argText("sizes")
  ? argText("sizes")!
      .split(",")
      .map((p) => p.split("x").map(Number) as [number, number])
  : [[arg("services", 1000), arg("nodes", 100)]];
if (SIZES.some(([s, n]) => !(s > 0 && n > 0))) throw new Error(`bad --sizes ${argText("sizes")}`);
/** `--shapes cluster,local` (default both) */
const SHAPES = (argText("shapes") ?? "cluster,local").split(",").map((x) => {
  if (x !== "cluster" && x !== "local") throw new Error(`bad --shapes entry ${x}`);
  return x === "local";
});
/** `--profile-changes DIR`: a CPU profile of the incremental changes only (node:inspector) */
const PROFILE_CHANGES = argText("profile-changes");
/** `--rss`: also run `passlb lb --once` on each size and shape under /usr/bin/time */
const RSS = process.argv.includes("--rss");

const skip = kernelSkipReason();
if (skip) {
  console.log(`skipped: ${skip}`);
  process.exit(0);
}

const slabKb = () => Number(/^Slab:\s+(\d+)/m.exec(readFileSync("/proc/meminfo", "utf8"))![1]);
/** nearest-rank percentile: the smallest sample with at least p of all samples at or below it */
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil(xs.length * p) - 1)]!;
const ms = (x: number) => `${x.toFixed(1)} ms`;

const makeSnapshot = (services: number, nodes: number, local: boolean) =>
  benchCluster({ services, nodes, localNodes: LOCAL_NODES, local });

async function startProfile(): Promise<{ stop: (file: string) => Promise<void> }> {
  const session = new Session();
  session.connect();
  const post = (method: string, params?: object) =>
    new Promise<unknown>((resolve, reject) =>
      session.post(method, params ?? {}, (e, r) => (e ? reject(e) : resolve(r))),
    );
  await post("Profiler.enable");
  await post("Profiler.start");
  return {
    stop: async (file) => {
      const { profile } = (await post("Profiler.stop")) as { profile: unknown };
      mkdirSync(PROFILE_CHANGES!, { recursive: true });
      writeFileSync(file, JSON.stringify(profile));
      session.disconnect();
      console.log(`CPU profile of the changes: ${file}`);
    },
  };
}

/** The generated cluster as one JSON List manifest (what `passlb lb -f` reads). */
function writeManifests(dir: string, snap: ReturnType<typeof makeSnapshot>): void {
  const { config, ...objects } = snap;
  const items = [
    { apiVersion: "passlb.io/v1alpha1", kind: "PasslbConfig", metadata: { name: "default" }, spec: config },
    ...objects.nodes,
    ...objects.services,
    ...objects.endpointSlices,
  ];
  mkdirSync(dir, { recursive: true });
  writeFileSync(`${dir}/cluster.json`, JSON.stringify({ apiVersion: "v1", kind: "List", items }));
}

/** `passlb lb --once` on the same cluster in a throwaway namespace, peak RSS by /usr/bin/time. */
function rssOfLb(services: number, nodes: number, local: boolean): void {
  const dir = mkdtempSync(join(tmpdir(), "plb-scale-rss-"));
  const ns = createNetns("br");
  try {
    writeManifests(dir, makeSnapshot(services, nodes, local));
    const t = performance.now();
    const r = spawnSync(
      "/usr/bin/time",
      [
        "-f",
        "%M kB %U s user %S s sys",
        "ip",
        "netns",
        "exec",
        ns,
        process.execPath,
        "bin/passlb.js",
        "lb",
      ].concat(["--dataplane", "nftables", "-f", dir, "--once", "--no-routes", "--no-probe"]),
      { encoding: "utf8", timeout: 170_000 },
    );
    const wall = performance.now() - t;
    const line = /(\d+) kB (\S+) s user (\S+) s sys/.exec(r.stderr ?? "");
    if (r.status !== 0 || !line) throw new Error(`passlb lb failed (${r.status}): ${r.stderr?.slice(-2000)}`);
    console.log(
      `| \`passlb lb --once\` (${services} × ${nodes}, ${local ? "eTP Local" : "eTP Cluster"}): peak RSS | **${(Number(line[1]) / 1024).toFixed(0)} MB** (wall ${ms(wall)}, user ${line[2]} s, sys ${line[3]} s) |`,
    );
  } finally {
    deleteNetns(ns);
    rmSync(dir, { recursive: true, force: true });
  }
}

// `--write-manifests DIR [--local]`: write the generated cluster as JSON manifests (for
// measuring `passlb lb --once` itself with /usr/bin/time) and stop.
const writeTo = process.argv.indexOf("--write-manifests");
if (writeTo >= 0) {
  const [services, nodes] = SIZES[0]!;
  writeManifests(process.argv[writeTo + 1]!, makeSnapshot(services, nodes, process.argv.includes("--local")));
  process.exit(0);
}

function nftIn(ns: string, script: string): number {
  const t = performance.now();
  execFileSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], { input: script });
  return performance.now() - t;
}

function elementCount(script: string): number {
  let n = 0;
  for (const m of script.matchAll(/^add element [^{]*\{ (.*) \}$/gm)) n += m[1]!.split(", ").length;
  return n;
}

console.log(
  `nft-sync bench: ${SIZES.map(([s, n]) => `${s} Services × ${n} nodes`).join(", ")}; node ${process.version}; ${new Date().toISOString()}; load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);

// 1. M vs kernel memory and load time
console.log("\n| M | maps | elements | load time | per element | slab delta | per map |");
console.log("| --- | --- | --- | --- | --- | --- | --- |");
for (const M of arg("skip-m", 0) ? [] : [127, 251, 1021, 4093, 16381]) {
  const MAPS = 40;
  const ns = createNetns("bm");
  try {
    const lines = ["add table inet t"];
    for (let i = 0; i < MAPS; i++) {
      lines.push(`add map inet t m${i} { typeof numgen inc mod 2 : meta mark; }`);
      const els: string[] = [];
      for (let k = 0; k < M; k++) els.push(`${k} : 0x${(0x5a000001 + ((k * 7 + i) % 100)).toString(16)}`);
      for (let k = 0; k < els.length; k += 1024)
        lines.push(`add element inet t m${i} { ${els.slice(k, k + 1024).join(", ")} }`);
    }
    const s0 = slabKb();
    const t = nftIn(ns, `${lines.join("\n")}\n`);
    const ds = slabKb() - s0;
    console.log(
      `| ${M} | ${MAPS} | ${M * MAPS} | ${ms(t)} | ${((t * 1000) / (M * MAPS)).toFixed(1)} µs | ${ds} kB | ${(ds / MAPS).toFixed(0)} kB (${((ds * 1024) / (M * MAPS)).toFixed(0)} B/element) |`,
    );
  } finally {
    deleteNetns(ns);
  }
}

// 2–4. full sync, baselines, incremental — per size and shape
interface ShapeResult {
  readonly fullMs: number;
  readonly fullCpu: number;
  readonly reapplyMs: number;
  readonly elements: number;
  readonly slabPerService: number;
  readonly changes: ReadonlyMap<ChangeKind, { readonly p50: number; readonly p99: number }>;
}

type ChangeKind = "health" | "endpoint";
interface Incremental {
  readonly latencies: number[];
  readonly nftTimes: number[];
  readonly cpus: number[];
  readonly sizes: number[];
}

async function runShape(SERVICES: number, NODES: number, local: boolean): Promise<ShapeResult> {
  const label = `${SERVICES} Services × ${NODES} nodes, ${local ? `eTP Local, ${LOCAL_NODES} nodes per Service, weighted` : "eTP Cluster, all nodes (one shared table)"}`;
  const ns = createNetns("bs");
  try {
    const snapshot = makeSnapshot(SERVICES, NODES, local);
    const health = new Map<string, HealthState>();
    const nft = createNftDriver({ netns: ns });
    let applied = "";
    let nftMs = 0;
    let healthVersion = 0;
    const recording = {
      run: async (tx: Transaction) => {
        const t = performance.now();
        await nft.run(tx);
        nftMs = performance.now() - t;
        applied = nftScript(tx);
      },
      check: (tx: Transaction) => nft.check(tx),
      dump: (t: string, o?: { terse?: boolean }) => nft.dump(t, o),
      counters: (t: string) => nft.counters(t),
    };
    const c = new LbController({
      table: "passlb",
      seed: 1,
      nft: recording,
      health: {
        lookup: (svc, _c, node) => ({ state: health.get(`${svc}|${node}`) ?? health.get(node) ?? "unknown" }),
        subscribe: () => () => {},
        version: () => healthVersion,
      },
      clock: realClock(),
      sizeFor: kernelTableSize(),
      driftCheckMs: 0,
    });
    await c.start();
    c.setSnapshot(snapshot, false, false);
    const s0 = slabKb();
    const t0 = performance.now();
    const fullCpu0 = process.cpuUsage();
    const full = await c.syncOnce();
    const fullMs = performance.now() - t0;
    const fullCpuUsed = process.cpuUsage(fullCpu0);
    const fullCpu = (fullCpuUsed.user + fullCpuUsed.system) / 1000;
    const slab = slabKb() - s0;
    if (full.kind !== "ok") throw full.cause;
    const fullScript = applied;
    const elements = elementCount(fullScript);
    const maps = [...c.current!.sets.keys()].filter((n) => /^m\d+$/.test(n)).length;
    const reapplyMs = nftIn(ns, fullScript); // the same transaction again: nft's share
    // baselines
    const emptyRuns: number[] = [];
    for (let i = 0; i < 20; i++)
      emptyRuns.push(nftIn(ns, "add table inet e\ndelete table inet e\nadd table inet e\n"));
    const emptyMs = pct(emptyRuns, 0.5);
    const plain = ["add table inet b", "add set inet b s { type mark; }"];
    for (let k = 0; k < elements; k += 1024) {
      const chunk: string[] = [];
      for (let j = k; j < Math.min(elements, k + 1024); j++) chunk.push(String(j + 1));
      plain.push(`add element inet b s { ${chunk.join(", ")} }`);
    }
    const plainMs = nftIn(ns, `${plain.join("\n")}\n`);
    // incremental: under eTP Cluster a node's health flips (every Service's table at once),
    // then one endpoint of one Service leaves or comes back; under eTP Local the latter
    const profiler = PROFILE_CHANGES ? await startProfile() : undefined;
    let current = snapshot;
    const incremental = new Map<ChangeKind, Incremental>();
    for (const kind of local ? (["endpoint"] as const) : (["health", "endpoint"] as const)) {
      const r: Incremental = { latencies: [], nftTimes: [], cpus: [], sizes: [] };
      incremental.set(kind, r);
      for (let i = 0; i < CHANGES; i++) {
        if (kind === "health") {
          healthChange(health, NODES, i);
          healthVersion++;
        } else {
          current = endpointChange(snapshot, current, i);
          c.setSnapshot(current, false, false);
        }
        const t = performance.now();
        const cpu = process.cpuUsage();
        nftMs = 0;
        const out = await c.syncOnce();
        r.latencies.push(performance.now() - t);
        r.nftTimes.push(nftMs);
        const used = process.cpuUsage(cpu);
        r.cpus.push((used.user + used.system) / 1000);
        if (out.kind !== "ok") throw out.cause;
        r.sizes.push(out.bytes);
        if (process.env.DEBUG_BENCH) console.log(kind, i, out.kind === "ok" && out.mode, out.bytes);
      }
    }
    if (profiler)
      await profiler.stop(
        `${PROFILE_CHANGES}/changes-${SERVICES}x${NODES}-${local ? "local" : "cluster"}.cpuprofile`,
      );
    await c.stop();
    const rss = process.resourceUsage().maxRSS / 1024;
    console.log(`\n### ${label}`);
    console.log(`| measure | value |`);
    console.log(`| --- | --- |`);
    console.log(
      `| full sync (plan + forwarding + render + nft), first run | ${ms(fullMs)} (this process's CPU ${ms(fullCpu)}) |`,
    );
    console.log(`| of which nft (same transaction applied again) | ${ms(reapplyMs)} |`);
    console.log(
      `| transaction | ${(fullScript.length / 1e6).toFixed(2)} MB, ${elements} elements, ${maps} slot maps |`,
    );
    console.log(
      `| kernel slab delta after the full sync | ${slab} kB (${((slab * 1024) / SERVICES).toFixed(0)} B per Service) |`,
    );
    console.log(
      `| baseline: empty-table transaction (median of 20; p99 ${ms(pct(emptyRuns, 0.99))}) | ${ms(emptyMs)} (full sync = ${(fullMs / emptyMs).toFixed(0)}×) |`,
    );
    console.log(
      `| baseline: plain set of ${elements} marks | ${ms(plainMs)} (nft share of full sync = ${(reapplyMs / plainMs).toFixed(2)}× the plain set) |`,
    );
    for (const [kind, r] of incremental) {
      const what = kind === "health" ? "a node's health flips" : "one endpoint changes";
      console.log(
        `| one change → committed (${what}), ${CHANGES} changes: p50 / p99 / max | ${ms(pct(r.latencies, 0.5))} / **${ms(pct(r.latencies, 0.99))}** / ${ms(Math.max(...r.latencies))} |`,
      );
      console.log(
        `| of which the nft call (ip netns exec nft -f): p50 / p99 | ${ms(pct(r.nftTimes, 0.5))} / ${ms(pct(r.nftTimes, 0.99))} |`,
      );
      console.log(
        `| this process's CPU (plan + forwarding + render; nft runs in a child): p50 / p99 | ${ms(pct(r.cpus, 0.5))} / ${ms(pct(r.cpus, 0.99))} |`,
      );
      console.log(
        `| incremental transaction size p50 / max | ${pct(r.sizes, 0.5)} B / ${Math.max(...r.sizes)} B |`,
      );
    }
    console.log(`| peak RSS of this process so far | ${rss.toFixed(0)} MB |`);
    return {
      fullMs,
      fullCpu,
      reapplyMs,
      elements,
      slabPerService: (slab * 1024) / SERVICES,
      changes: new Map(
        [...incremental].map(([k, r]) => [k, { p50: pct(r.latencies, 0.5), p99: pct(r.latencies, 0.99) }]),
      ),
    };
  } finally {
    deleteNetns(ns);
  }
}
const results: { size: string; shape: string; r: ShapeResult }[] = [];
for (const [services, nodes] of SIZES)
  for (const local of SHAPES) {
    const r = await runShape(services, nodes, local);
    results.push({ size: `${services} × ${nodes}`, shape: local ? "eTP Local" : "eTP Cluster", r });
    if (RSS) rssOfLb(services, nodes, local);
  }
if (SIZES.length > 1) {
  console.log("\n### curve (each figure and its ratio to the smallest size of the same shape in this run)");
  console.log(
    "| Services × nodes | shape | full sync | of which nft | elements | kernel slab per Service | health flip p50 / p99 | endpoint change p50 / p99 |",
  );
  console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
  for (const { size, shape, r } of results) {
    const b = results.find((x) => x.shape === shape)!.r;
    const x = (a: number, c: number) => `${(a / c).toFixed(2)}×`;
    const change = (k: ChangeKind) => {
      const now = r.changes.get(k);
      const base = b.changes.get(k);
      return now && base ? `${ms(now.p50)} / ${ms(now.p99)} (p99 ${x(now.p99, base.p99)})` : "–";
    };
    console.log(
      `| ${size} | ${shape} | ${ms(r.fullMs)} (${x(r.fullMs, b.fullMs)}) | ${ms(r.reapplyMs)} | ${r.elements} | ${(r.slabPerService / 1024).toFixed(1)} KB | ${change("health")} | ${change("endpoint")} |`,
    );
  }
}
console.log(
  `\nend ${new Date().toISOString()}; load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(
      " ",
    )}; CPU of this process ${((process.cpuUsage().user + process.cpuUsage().system) / 1e6).toFixed(1)} s`,
);
