/**
 * XDP map commit latency at scale (docs/benchmarks.md "XDP fast path"): the generated cluster
 * of bench/nft-bench-cluster.ts (eTP Cluster, every Service on every node: one shared Maglev
 * table), its forwarding state from the LB's own LbForwardings, written into the real
 * program's maps (loaded with bpftool onto a bpffs this benchmark mounts and unmounts) by
 * XdpDataplane. Measured: the full sync, then a node's health flipping (the shared table
 * changes: one new ring, every VIP entry switched), p50/p99 over `--changes` flips, each from
 * the change to the committed batch (forwarding state, render, plan, bpftool). Baseline in
 * the same run: `bpftool batch` of as many no-op updates of one element (the tool's floor).
 *
 *   node --import tsx bench/xdp-sync.bench.ts [--services 10000] [--nodes 1000] [--changes 20]
 *
 * Needs root, clang and bpftool. Nothing is sent anywhere.
 */
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createBpfTool } from "../src/drivers/bpftool.ts";
import type { HealthState } from "../src/forwarding/forwarding-state.ts";
import { LbForwardings } from "../src/lb-host/lb-forwardings.ts";
import { kernelTableSize } from "../src/lb-host/nftables/render/kernel-table-size.ts";
import { XdpDataplane } from "../src/lb-host/xdp/xdp-dataplane.ts";
import { encodeU32 } from "../src/lb-host/xdp/xdp-layout.ts";
import type { NextHop } from "../src/lb-host/xdp/xdp-maps.ts";
import { buildXdpObject } from "../src/lb-host/xdp/xdp-object.ts";
import { benchArg } from "./lab-bench-setup.ts";
import { benchCluster } from "./nft-bench-cluster.ts";

const SERVICES = benchArg("services", 10_000);
const NODES = benchArg("nodes", 1000);
const CHANGES = Math.min(benchArg("changes", 20), 200);
const say = (line: string): void => {
  process.stdout.write(`${line}\n`);
};
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.ceil(p * xs.length) - 1]!;

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
    const snapshot = benchCluster({ services: SERVICES, nodes: NODES, localNodes: 3, local: false });
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
      pinDir: join(bpffs, "passlb"),
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
    const t0 = performance.now();
    const full = await dp.apply({ forwarding: forwardings.update(snapshot, false, lookup, version), zones });
    const fullMs = performance.now() - t0;
    say(
      `xdp-sync: ${SERVICES} Services × ${NODES} nodes (eTP Cluster, one shared table of M = ${sizeFor(NODES)})`,
    );
    say(`full sync: ${fullMs.toFixed(0)} ms, ${full.ops} map updates`);
    const flips: number[] = [];
    const stateMs: number[] = [];
    const opsPerFlip: number[] = [];
    const phases = new Map<string, number[]>();
    for (let i = 0; i < CHANGES; i++) {
      const node = `node-${(i >> 1) % NODES}`;
      if (i % 2 === 0) health.set(node, "unhealthy");
      else health.delete(node);
      version++;
      const t = performance.now();
      const forwarding = forwardings.update(snapshot, false, lookup, version);
      const tf = performance.now();
      const r = await dp.apply({ forwarding, zones });
      flips.push(performance.now() - t);
      stateMs.push(tf - t);
      opsPerFlip.push(r.ops);
      for (const [k, v] of Object.entries(r.phases ?? {})) phases.set(k, [...(phases.get(k) ?? []), v]);
    }
    // the tool's floor: as many updates of one config element in one batch
    const n = pct(opsPerFlip, 0.5);
    const line = `map update pinned ${join(bpffs, "passlb/maps/config")} key hex ${encodeU32(0)} value hex 01 00 00 00 1e 00 00 00 00 00 00 00 00 00 00 00\n`;
    const file = join(dir, "floor");
    writeFileSync(file, line.repeat(n));
    const floors: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      spawnSync("bpftool", ["batch", "file", file]);
      floors.push(performance.now() - t);
    }
    const floor = pct(floors, 0.5);
    say(
      `a node's health flips: p50 ${pct(flips, 0.5).toFixed(0)} ms, p99 ${pct(flips, 0.99).toFixed(0)} ms (${CHANGES} flips, ${n} map updates each); bpftool floor for ${n} updates ${floor.toFixed(0)} ms (p50 ${(pct(flips, 0.5) / floor).toFixed(2)}× the floor); of which the forwarding state (LbForwardings, shared with nftables) p50 ${pct(stateMs, 0.5).toFixed(0)} ms`,
    );
    say(
      `per flip, p50 / p99: ${[...phases].map(([k, v]) => `${k} ${pct(v, 0.5).toFixed(0)} / ${pct(v, 0.99).toFixed(0)} ms`).join(", ")}; map updates p50 ${pct(opsPerFlip, 0.5)}, max ${Math.max(...opsPerFlip)}`,
    );
    // a baseline in the same run: the full sync (the figures move with the machine's load)
    say(
      `ratios to this run's full sync (${fullMs.toFixed(0)} ms): flip p50 ${(pct(flips, 0.5) / fullMs).toFixed(3)}, p99 ${(pct(flips, 0.99) / fullMs).toFixed(3)}`,
    );
  } finally {
    spawnSync("umount", [bpffs]);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
