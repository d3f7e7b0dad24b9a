/**
 * What the LB's per-interval drift check costs (issue 16), as root, in a throwaway network
 * namespace: N Services programmed by the LbController with the real nft, the real policy
 * routes (IPv6 next hops on a veth) and the real generation watch (`nft monitor`), then,
 * per check, the median wall time of K runs of:
 *   - baseline: one `nft list tables` in an empty namespace (the fixed cost of starting nft
 *     at all), this run; and the same in the programmed namespace (nft 1.0.6 fills its
 *     whole cache, elements included, for any listing: that is what every `nft` costs there);
 *   - terse listing + compare (what ran on 11 of 12 intervals before: names, rule counts,
 *     hashes; blind to a flushed map);
 *   - full listing with every element + compare (what ran on the 12th);
 *   - routes: `ip -j rule show` ×2 + one `ip -j -batch` of `route show table T` + compare;
 *   - the check as it runs now, nothing changed (generation unchanged: routes only);
 *   - the check as it runs now right after a commit (generation moved: routes + full listing).
 * Plus the monitor's own CPU during one full sync of the table (it prints every element).
 * Run: node --import tsx bench/drift-check.bench.ts [--services 100,1000 --checks 15]
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { createPolicyRoutes } from "../src/drivers/ip-routes.ts";
import { createNftDriver } from "../src/drivers/nft.ts";
import { transaction } from "../src/drivers/nft-transaction.ts";
import { realClock } from "../src/health/clock.ts";
import { LbController } from "../src/lb-host/nftables/lb-controller.ts";
import { driftBetween } from "../src/lb-host/nftables/nft-drift.ts";
import { createNftGenerationWatch } from "../src/lb-host/nftables/nft-generation.ts";
import { kernelTableSize } from "../src/lb-host/nftables/render/kernel-table-size.ts";
import { type PolicyRoute, policyRoutesOf } from "../src/lb-host/routing/policy-routes.ts";
import { expectedRouting, routingDrift } from "../src/lb-host/routing/route-drift.ts";
import { createNetns, deleteNetns, kernelSkipReason } from "../test/netns.ts";
import { benchCluster } from "./nft-bench-cluster.ts";

const argOf = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const SIZES = argOf("services", "100,1000").split(",").map(Number);
const CHECKS = Number(argOf("checks", "15"));
const NODES = 100;

const skip = kernelSkipReason();
if (skip) {
  console.log(`skipped: ${skip}`);
  process.exit(0);
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
async function timed(fn: () => Promise<unknown>): Promise<number> {
  const samples: number[] = [];
  for (let i = 0; i < CHECKS; i++) {
    const t = performance.now();
    await fn();
    samples.push(performance.now() - t);
  }
  return median(samples);
}
/** user+system CPU of a process, ms (/proc/<pid>/stat fields 14 and 15, clock ticks of 10 ms) */
function cpuMs(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) * 10;
}
function monitorPid(ns: string): number | undefined {
  const out = execFileSync("ip", ["netns", "pids", ns], { encoding: "utf8" }).trim().split("\n");
  return out
    .map(Number)
    .find((p) => p > 0 && readFileSync(`/proc/${p}/cmdline`, "utf8").startsWith("nft\0monitor"));
}

console.log(
  `drift-check bench: ${SIZES.join(", ")} Services × ${NODES} nodes, median of ${CHECKS}; node ${process.version}; ${new Date().toISOString()}; load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(" ")}`,
);
console.log(
  "\n| Services | eTP | elements | baseline: `nft list tables`, empty namespace | `nft list tables` here | terse listing (old, 11 of 12) | full listing (old 12th) | routes | check now, no commit | check now, after a commit | monitor CPU in the full sync |",
);
console.log("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
for (const services of SIZES)
  for (const local of [false, true]) {
    const ns = createNetns("dc");
    const generations = createNftGenerationWatch({ netns: ns });
    try {
      const ip = (...a: string[]) => execFileSync("ip", ["-n", ns, ...a]);
      ip("link", "add", "plbdc0", "type", "veth", "peer", "name", "plbdc1");
      ip("link", "set", "plbdc0", "up");
      ip("link", "set", "plbdc1", "up");
      ip("addr", "add", "fd00:1::ffff/64", "dev", "plbdc0", "nodad");
      const nft = createNftDriver({ netns: ns });
      const routes = createPolicyRoutes({ netns: ns });
      const c = new LbController({
        table: "passlb",
        seed: 1,
        nft,
        routes,
        generations,
        clock: realClock(),
        sizeFor: kernelTableSize(),
        driftCheckMs: 0,
      });
      await c.start();
      await new Promise((r) => setTimeout(r, 300)); // the monitor subscribes
      const pid = monitorPid(ns);
      const cpu0 = pid ? cpuMs(pid) : Number.NaN;
      c.setSnapshot(benchCluster({ services, nodes: NODES, localNodes: 10, local }), false, false);
      const out = await c.syncOnce();
      if (out.kind !== "ok") throw new Error(`sync failed: ${String(out.kind === "retry" && out.cause)}`);
      for (let i = 0; i < 500 && generations.token() === undefined; i++)
        await new Promise((r) => setTimeout(r, 10));
      // the monitor prints every element of the sync: wait until it has drained them
      for (let last = generations.token(), i = 0; i < 60; i++) {
        await new Promise((r) => setTimeout(r, 500));
        if (generations.token() === last) break;
        last = generations.token();
      }
      const monitorCpu = pid ? cpuMs(pid) - cpu0 : Number.NaN;
      const current = c.current!;
      const elements = [...current.sets.values()].reduce((n, s) => n + s.elements.size, 0);
      const wanted: PolicyRoute[] = policyRoutesOf(current);
      const expected = expectedRouting(wanted);
      const empty = createNetns("dce");
      const baseline = await timed(() =>
        Promise.resolve(execFileSync("ip", ["netns", "exec", empty, "nft", "list", "tables"])),
      ).finally(() => deleteNetns(empty));
      const listTables = await timed(() =>
        Promise.resolve(execFileSync("ip", ["netns", "exec", ns, "nft", "list", "tables"])),
      );
      const terse = await timed(async () =>
        driftBetween(current, await nft.dump("passlb", { terse: true }), false),
      );
      const full = await timed(async () => {
        const what = driftBetween(current, await nft.dump("passlb"), true);
        if (what) throw new Error(`unexpected drift: ${what}`);
      });
      const routeCheck = await timed(async () => {
        const what = routingDrift(expected, await routes.read(expected.tables));
        if (what) throw new Error(`unexpected route drift: ${what}`);
      });
      await c.checkDrift(); // verifies the current generation
      const quiet = await timed(async () => {
        if (await c.checkDrift()) throw new Error("unexpected drift");
      });
      // after a commit elsewhere in the namespace (another table), the check lists ours again
      await nft.run(
        transaction("plbother", [
          { verb: "add", object: { kind: "table" } },
          { verb: "add", object: { kind: "set", name: "s", decl: "type mark;" } },
        ]),
      );
      const commits: number[] = [];
      for (let i = 0; i < CHECKS; i++) {
        const before = generations.token();
        // a commit that changes something (an empty one bumps no generation)
        await nft.run(
          transaction("plbother", [
            { verb: "flush", object: { kind: "set", name: "s" } },
            { verb: "add", object: { kind: "element", set: "s", elements: [{ key: String(i + 1) }] } },
          ]),
        );
        for (let k = 0; k < 2500 && generations.token() === before; k++)
          await new Promise((r) => setTimeout(r, 2));
        if (generations.token() === before) throw new Error("the monitor did not see the commit within 5 s");
        const t = performance.now();
        if (await c.checkDrift()) throw new Error("unexpected drift");
        commits.push(performance.now() - t);
      }
      const afterCommit = median(commits);
      const r = (x: number) => `${x.toFixed(1)} ms (${(x / baseline).toFixed(1)}×)`;
      console.log(
        `| ${services} | ${local ? "Local" : "Cluster"} | ${elements} | ${baseline.toFixed(1)} ms (1×) | ${r(listTables)} | ${r(terse)} | ${r(full)} | ${r(routeCheck)} (${wanted.length} routes) | ${r(quiet)} | ${r(afterCommit)} | ${monitorCpu} ms |`,
      );
      await c.stop();
    } finally {
      generations.close();
      deleteNetns(ns);
    }
  }
