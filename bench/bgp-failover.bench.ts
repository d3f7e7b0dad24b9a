/**
 * BGP + ECMP failover benchmark (issue #19, docs/vip-announce.md "BGP: the routed LB tier"): the lab
 * with an FRR router and three LB hosts running `passlb lb --announce bgp`
 * (test/fixtures/lab/bgp/topology.yaml). Each round first opens 1,000 new connections and
 * counts them in each LB host's conntrack (the spread), then, while a client holds 150
 * established connections (a ping every 100 ms) and opens a new one every 20 ms (900 ms
 * timeout, below TCP's first SYN retransmission), 2 s in, LB host lb-2
 *   - steady:   nothing happens (the baseline);
 *   - graceful: its `passlb lb` gets SIGTERM (withdraw, wait 1 s, stop BIRD);
 *   - hard:     its links go down, then passlb and BIRD are SIGKILLed (a dead machine).
 * Printed per case: the router's path removal (from the event to lb-2 leaving the VIP's
 * ECMP next hops), established connections that survived, new connections that failed and
 * the span of those failures, and the largest spacing between successful new connections
 * (gap) with its ratio to the steady baseline of the same run; the script's CPU time and
 * the load average.
 *
 *   node --import tsx bench/bgp-failover.bench.ts [--rounds 3]
 *
 * Needs root, ip, nft, conntrack, FRR and BIRD; otherwise says what is missing and exits 0.
 * Traffic goes only to documentation addresses inside the lab's own namespaces; the lab is
 * removed at the end, also on failure.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { readManifests } from "../src/cluster/manifest-files.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { labRouterUnavailable, routerNextHops } from "../src/lab/lab-frr.ts";
import { compileLabScripts, type LabState, labDown, labRestart, labUp } from "../src/lab/lab-runner.ts";
import { planSnapshot } from "../src/plan/planner.ts";
import { namedTopology } from "./lab-bench-setup.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const ROUNDS = Math.min(Math.max(arg("rounds", 3), 1), 10);
const REPO = resolve(import.meta.dirname, "..");
const FIXTURE = join(REPO, "test/fixtures/lab/bgp/topology.yaml");
const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function missing(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root (network namespaces, nft)";
  for (const t of ["ip", "nft", "conntrack"])
    if (spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0) return `${t} is not installed`;
  return labRouterUnavailable();
}

interface Event {
  t: number;
  ok: boolean;
}

/** the largest spacing between successive successful new connections */
function gap(events: readonly Event[]): number {
  const ok = events.filter((e) => e.ok);
  let worst = 0;
  for (let i = 1; i < ok.length; i++) worst = Math.max(worst, ok[i]!.t - ok[i - 1]!.t);
  return worst;
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const why = missing();
  if (why) {
    say(`bgp-failover: skipped: ${why}`);
    return;
  }
  const {
    name: labName,
    dir,
    topology: topo,
  } = namedTopology(FIXTURE, `bgb${process.pid % 10000}`, "plb-bgpbench-");
  const options = { repoRoot: REPO, agentArgs: ["--dataplane=nftables"], lbArgs: ["--dataplane=nftables"] };
  const cpu0 = process.cpuUsage();
  const load0 = loadavg();
  try {
    const state: LabState = await labUp(topo, options);
    const scripts = await compileLabScripts(REPO, state.stateDir);
    const snap = decodeDocuments(
      (await readManifests([state.manifestsDir], async () => "")).documents,
    ).snapshot;
    const vip = planSnapshot(snap)
      .plans.find((p) => p.service === "bgp/web")!
      .vips.find((v) => v.family === "IPv4")!.address;
    const hosts = state.layout.lbHosts;
    const victim = hosts[1]!;
    const clientNs = state.layout.clients[0]!.ns;
    const client = <T>(args: string[]) =>
      new Promise<T>((res, rej) => {
        const child = spawn(
          "ip",
          [
            "netns",
            "exec",
            clientNs,
            process.execPath,
            ...scripts.command("lab-client"),
            "--target",
            `${vip}:80`,
            ...args,
          ],
          { stdio: ["ignore", "pipe", "inherit"] },
        );
        let out = "";
        child.stdout.setEncoding("utf8").on("data", (d: string) => {
          out += d;
        });
        child.on("close", (code) =>
          code === 0 ? res(JSON.parse(out) as T) : rej(new Error(`client ${code}`)),
        );
      });
    const hops = () => routerNextHops(state.layout, vip);
    const waitFor = async (cond: () => boolean, ms: number) => {
      const t0 = Date.now();
      while (!cond() && Date.now() - t0 < ms) await sleep(10);
      return cond() ? Date.now() - t0 : Number.POSITIVE_INFINITY;
    };
    if (!Number.isFinite(await waitFor(() => hops().length === 3, 60_000)))
      throw new Error("no ECMP over 3 hosts");
    const spread: number[][] = [];
    const results: Record<
      string,
      { removal: number[]; survived: number[]; failed: number[]; span: number[]; gap: number[] }
    > = {};
    for (let r = 0; r < ROUNDS; r++) {
      for (const h of hosts) spawnSync("ip", ["netns", "exec", h.ns, "conntrack", "-F"]);
      await client(["--count", "1000", "--concurrency", "16"]);
      const counts = hosts.map(
        (h) =>
          spawnSync("ip", ["netns", "exec", h.ns, "conntrack", "-L", "-p", "tcp", "-d", vip], {
            encoding: "utf8",
          })
            .stdout.split("\n")
            .filter((l) => l.includes(`dst=${vip}`)).length,
      );
      spread.push(counts);
      for (const kind of ["steady", "graceful", "hard"] as const) {
        const held = client<{ connections: { ok: boolean }[] }>([
          "--mode",
          "hold",
          "--connections",
          "150",
          "--interval",
          "100",
          "--duration",
          "7000",
        ]);
        const fresh = client<{ events: Event[] }>([
          "--mode",
          "stream",
          "--interval",
          "20",
          "--duration",
          "7000",
          "--timeout",
          "900",
        ]);
        await sleep(2000);
        const t0 = Date.now();
        const stopping =
          kind === "graceful"
            ? labRestart(state, "lb", victim.name, { repoRoot: REPO, stopOnly: true })
            : undefined;
        if (kind === "hard") {
          for (const dev of ["eth1", "eth0"]) spawnSync("ip", ["-n", victim.ns, "link", "set", dev, "down"]);
          const lb = state.processes.find((p) => p.role === "lb" && p.host === victim.name)!.pid;
          const bird = Number(readFileSync(join(state.stateDir, `bird-${victim.name}`, "bird.pid"), "utf8"));
          for (const pid of [lb, bird]) process.kill(pid, "SIGKILL");
        }
        let removal = 0;
        if (kind !== "steady") {
          const waited = await waitFor(() => !hops().includes(victim.nodeIpv4), 5000);
          removal = Number.isFinite(waited) ? Date.now() - t0 : waited;
        }
        const { connections } = await held;
        const { events } = await fresh;
        await stopping;
        const failedEvents = events.filter((e) => !e.ok);
        results[kind] ??= { removal: [], survived: [], failed: [], span: [], gap: [] };
        const row = results[kind];
        row.removal.push(removal);
        row.survived.push(connections.filter((c) => c.ok).length);
        row.failed.push(failedEvents.length);
        row.span.push(
          failedEvents.length ? failedEvents[failedEvents.length - 1]!.t - failedEvents[0]!.t : 0,
        );
        row.gap.push(gap(events));
        say(
          `round ${r + 1} ${kind.padEnd(8)} path removed ${removal} ms; ${row.survived.at(-1)}/150 established survived; ` +
            `${failedEvents.length}/${events.length} new failed within ${row.span.at(-1)} ms; gap ${row.gap.at(-1)} ms`,
        );
        if (kind !== "steady") {
          for (const dev of ["eth0", "eth1"]) spawnSync("ip", ["-n", victim.ns, "link", "set", dev, "up"]);
          await labRestart(state, "lb", victim.name, { repoRoot: REPO });
          await waitFor(() => hops().length === 3, 20_000);
          await sleep(1000);
        }
      }
    }
    const cpu = process.cpuUsage(cpu0);
    const base = median(results.steady!.gap);
    say("");
    say(`spread of 1,000 connections over lb-1/lb-2/lb-3: ${spread.map((c) => c.join("/")).join(", ")}`);
    say("");
    say(
      "| case | path removal, median (worst) ms | established survived (worst) | new failed, median (worst) | failure span, worst ms | gap median ms | gap / steady |",
    );
    say("| --- | --- | --- | --- | --- | --- | --- |");
    for (const kind of ["steady", "graceful", "hard"] as const) {
      const x = results[kind]!;
      say(
        `| ${kind} | ${kind === "steady" ? "—" : `${median(x.removal)} (${Math.max(...x.removal)})`} | ${median(x.survived)}/150 (${Math.min(...x.survived)}) | ${median(x.failed)} (${Math.max(...x.failed)}) | ${Math.max(...x.span)} | ${median(x.gap)} | ${(median(x.gap) / base).toFixed(1)} |`,
      );
    }
    say("");
    say(
      `rounds ${ROUNDS}; script CPU ${((cpu.user + cpu.system) / 1e6).toFixed(2)} s; load average ${load0.map((l) => l.toFixed(2)).join(" ")} → ${loadavg()
        .map((l) => l.toFixed(2))
        .join(" ")}`,
    );
  } finally {
    await labDown(labName, options);
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
