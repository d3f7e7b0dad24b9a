/**
 * XDP map commit latency at scale (docs/benchmarks.md "XDP fast path"): the generated
 * clusters of bench/nft-bench-cluster.ts, their forwarding state from the LB's own
 * LbForwardings, written into the real program's maps (loaded with bpftool onto a bpffs this
 * benchmark mounts and unmounts) by XdpDataplane. Two shapes:
 *   - eTP Cluster (every Service on every node: one shared Maglev table): the full sync, then
 *     a node's health flipping (the shared ring swapped under its ring id);
 *   - eTP Local (10 weighted nodes per Service: a table each): the full sync, then one
 *     endpoint of one Service leaving or coming back (through the planner).
 * Each change is timed from the change to the committed batch (forwarding state, render,
 * plan, bpftool), with the phases XdpDataplane reports; p50/p99 over `--changes`. Baselines
 * in the same run: the full sync (ratios) and one bpftool process (the tool's floor).
 *
 *   node --import tsx bench/xdp-sync.bench.ts [--services 10000] [--nodes 1000] [--changes 20]
 *     [--shapes cluster,local]
 *
 * Needs root, clang and bpftool. Nothing is sent anywhere.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBpfTool } from "../src/drivers/bpftool.ts";
import type { HealthState } from "../src/forwarding/forwarding-state.ts";
import { LbForwardings } from "../src/lb-host/lb-forwardings.ts";
import { kernelTableSize } from "../src/lb-host/nftables/render/kernel-table-size.ts";
import { XdpDataplane } from "../src/lb-host/xdp/xdp-dataplane.ts";
import type { NextHop } from "../src/lb-host/xdp/xdp-maps.ts";
import { buildXdpObject } from "../src/lb-host/xdp/xdp-object.ts";
import { benchArg } from "./lab-bench-setup.ts";
import { benchCluster, endpointChange, healthChange } from "./nft-bench-cluster.ts";

const SERVICES = benchArg("services", 10_000);
const NODES = benchArg("nodes", 1000);
const CHANGES = Math.min(benchArg("changes", 20), 200);
/** `--shapes cluster,local` (default both) */
const SHAPES = (
  process.argv.includes("--shapes") ? process.argv[process.argv.indexOf("--shapes") + 1]! : "cluster,local"
)
  .split(",")
  .map((x) => {
    if (x !== "cluster" && x !== "local") throw new Error(`xdp-sync: bad --shapes entry ${x}`);
    return x === "local";
  });
const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.ceil(p * xs.length) - 1]!;

const LOCAL_NODES = 10;

interface Run {
  readonly fullMs: number;
  readonly fullOps: number;
  readonly changes: number[];
  readonly stateMs: number[];
  readonly ops: number[];
  readonly phases: Map<string, number[]>;
}

/** One shape: the full sync, then `CHANGES` changes — under eTP Cluster a node's health
 * flipping (every Service's shared table), under eTP Local one endpoint of one Service
 * leaving or coming back (that Service's table, through the planner). */
async function runShape(local: boolean, object: string, pinDir: string): Promise<Run> {
  const snapshot = benchCluster({ services: SERVICES, nodes: NODES, localNodes: LOCAL_NODES, local });
  const hops = new Map<string, NextHop>();
  for (const n of snapshot.nodes)
    for (const a of n.status?.addresses ?? [])
      hops.set(a.address, {
        xdp: true,
        ifindex: 1,
        mtu: 1500,
        dmac: "02:00:00:00:00:02",
        smac: "02:00:00:00:00:01",
      });
  const sizeFor = kernelTableSize();
  const dp = new XdpDataplane({
    bpf: createBpfTool(),
    nextHops: { resolve: async () => hops },
    interfaces: [],
    pinDir,
    object,
    seed: 1,
    blockSize: sizeFor(NODES),
    now: () => performance.now(),
  });
  await dp.start();
  const health = new Map<string, HealthState>();
  let version = 0;
  const forwardings = new LbForwardings({ seed: 1, sizeFor });
  const lookup = (_s: string, _c: string, node: string) => ({
    state: health.get(node) ?? ("unknown" as const),
  });
  const zones = snapshot.config.zones ?? [];
  let current = snapshot;
  const t0 = performance.now();
  const full = await dp.apply({ forwarding: forwardings.update(current, false, lookup, version), zones });
  const run: Run = {
    fullMs: performance.now() - t0,
    fullOps: full.ops,
    changes: [],
    stateMs: [],
    ops: [],
    phases: new Map(),
  };
  for (let i = 0; i < CHANGES; i++) {
    if (!local) {
      healthChange(health, NODES, i);
      version++;
    } else current = endpointChange(snapshot, current, i);
    const t = performance.now();
    const forwarding = forwardings.update(current, false, lookup, version);
    const tf = performance.now();
    const r = await dp.apply({ forwarding, zones });
    run.changes.push(performance.now() - t);
    run.stateMs.push(tf - t);
    run.ops.push(r.ops);
    for (const [k, v] of Object.entries(r.phases ?? {})) run.phases.set(k, [...(run.phases.get(k) ?? []), v]);
  }
  await dp.stop();
  await dp.remove();
  return run;
}

async function main(): Promise<void> {
  if (process.getuid?.() !== 0) return say("xdp-sync: needs root (loads a BPF program); skipped");
  for (const cmd of ["clang", "bpftool"])
    if (spawnSync(cmd, ["--version"]).error) return say(`xdp-sync: needs ${cmd}; skipped`);
  const dir = mkdtempSync(join(tmpdir(), "plb-xdpsync-"));
  const bpffs = join(dir, "bpffs");
  mkdirSync(bpffs);
  if (spawnSync("mount", ["-t", "bpf", "bpf", bpffs]).status !== 0) throw new Error("cannot mount a bpffs");
  try {
    const object = join(dir, "passlb-xdp.o");
    await buildXdpObject(object);
    for (const local of SHAPES) {
      const r = await runShape(local, object, join(bpffs, local ? "local" : "cluster"));
      const shape = local
        ? `eTP Local, ${LOCAL_NODES} nodes per Service, weighted: a table per Service`
        : `eTP Cluster, one shared table of M = ${kernelTableSize()(NODES)}`;
      const what = local ? "one endpoint of one Service changes" : "a node's health flips";
      say(`xdp-sync: ${SERVICES} Services × ${NODES} nodes (${shape})`);
      say(`full sync: ${r.fullMs.toFixed(0)} ms, ${r.fullOps} map updates`);
      if (process.env.XDP_SYNC_ALL) say(`each change (ms): ${r.changes.map((x) => x.toFixed(0)).join(" ")}`);
      say(
        `${what}: p50 ${pct(r.changes, 0.5).toFixed(0)} ms, p99 ${pct(r.changes, 0.99).toFixed(0)} ms, the first ${r.changes[0]!.toFixed(0)} ms (${CHANGES} changes); without the first: p99 ${pct(r.changes.slice(1), 0.99).toFixed(0)} ms; of which the forwarding state (LbForwardings, shared with nftables) p50 ${pct(r.stateMs, 0.5).toFixed(0)} ms`,
      );
      say(
        `per change, p50 / p99: ${[...r.phases].map(([k, v]) => `${k} ${pct(v, 0.5).toFixed(0)} / ${pct(v, 0.99).toFixed(0)} ms`).join(", ")}; map updates p50 ${pct(r.ops, 0.5)}, max ${Math.max(...r.ops)}`,
      );
      // a baseline in the same run: the full sync (the figures move with the machine's load)
      say(
        `ratios to this run's full sync: p50 ${(pct(r.changes, 0.5) / r.fullMs).toFixed(3)}, p99 ${(pct(r.changes, 0.99) / r.fullMs).toFixed(3)}`,
      );
    }
    // the tool's floor: one update of one element, a process of its own
    const floors: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      spawnSync("bpftool", ["version"]);
      floors.push(performance.now() - t);
    }
    say(`bpftool's floor (one process): ${pct(floors, 0.5).toFixed(0)} ms`);
  } finally {
    spawnSync("umount", [bpffs]);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
