/**
 * L2 failover benchmark (issues 8 §3 and 20 §2, docs/vip-announce.md): the lab with two LB
 * hosts on the clients' segment (test/fixtures/lab/l2/topology.yaml), announcing through
 * VRRP with keepalived. A client opens a new TCP connection to a VIP every 20 ms (300 ms
 * timeout, shorter than TCP's first SYN retransmission) for 6 s; 1.5 s in, the VIP's holder
 *   - steady:    nothing happens (the baseline: the largest gap with no failure at all);
 *   - graceful:  its `passlb lb` gets SIGTERM (priority drop, hand-over, keepalived stops);
 *   - hard:      its links go down, then its `passlb lb` and keepalived get SIGKILL (a dead host);
 *   - passlb:    only its `passlb lb` gets SIGKILL (keepalived and the kernel carry on);
 *   - keepalived: only keepalived's process group gets SIGKILL (passlb removes its leftovers,
 *                restarts it).
 * The gap is the time from the last successful connection before the first failure to the
 * first success after it. Rounds interleave the three; medians and the worst are printed,
 * with the ratio of each to the steady baseline of the same run, the script's CPU time and
 * the load average.
 *
 *   node --import tsx bench/l2-failover.bench.ts [--rounds 3]
 *
 * Needs root, ip, nft and arping; otherwise says what is missing and exits 0. Traffic goes
 * only to documentation addresses inside the lab's own namespaces; the lab is removed at
 * the end, also on failure.
 */
import { spawn, spawnSync } from "node:child_process";
import { readFileSync, rmSync } from "node:fs";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { vipOwners } from "../src/announce/vip-owners.ts";
import { readManifests } from "../src/cluster/manifest-files.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { compileLabScripts, type LabState, labDown, labRestart, labUp } from "../src/lab/lab-runner.ts";
import { planSnapshot } from "../src/plan/planner.ts";
import { namedTopology } from "./lab-bench-setup.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const ROUNDS = Math.min(Math.max(arg("rounds", 3), 1), 10);
const REPO = resolve(import.meta.dirname, "..");
const FIXTURE = join(REPO, "test/fixtures/lab/l2/topology.yaml");
const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function missing(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root (network namespaces, nft)";
  for (const t of ["ip", "nft", "arping", "keepalived"])
    if (spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0) return `${t} is not installed`;
  return undefined;
}

interface Event {
  t: number;
  ok: boolean;
}

function gap(events: readonly Event[]): number {
  const firstFail = events.find((e) => !e.ok);
  if (!firstFail) {
    // steady: the largest spacing between successive successes
    let worst = 0;
    for (let i = 1; i < events.length; i++) worst = Math.max(worst, events[i]!.t - events[i - 1]!.t);
    return worst;
  }
  const before = [...events].reverse().find((e) => e.ok && e.t < firstFail.t);
  const after = events.find((e) => e.ok && e.t > firstFail.t);
  return after ? after.t - (before?.t ?? firstFail.t) : Number.POSITIVE_INFINITY;
}

const median = (xs: readonly number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  const why = missing();
  if (why) {
    say(`l2-failover: skipped: ${why}`);
    return;
  }
  const {
    name: labName,
    dir,
    topology: topo,
  } = namedTopology(FIXTURE, `l2b${process.pid % 10000}`, "plb-l2bench-");
  const options = {
    repoRoot: REPO,
    agentArgs: ["--dataplane=nftables"],
    lbArgs: ["--dataplane=nftables"],
  };
  const cpu0 = process.cpuUsage();
  const load0 = loadavg();
  try {
    const state: LabState = await labUp(topo, options);
    const client = await compileLabScripts(REPO, state.stateDir);
    const snap = decodeDocuments(
      (await readManifests([state.manifestsDir], async () => "")).documents,
    ).snapshot;
    const vip = planSnapshot(snap)
      .plans.find((p) => p.service === "l2/web-cluster")!
      .vips.find((v) => v.family === "IPv4")!.address;
    const hosts = state.layout.lbHosts.map((h) => h.name);
    const holder = vipOwners(hosts, [vip]).get(vip)!;
    const holderNs = state.layout.lbHosts.find((h) => h.name === holder)!.ns;
    const clientNs = state.layout.clients[0]!.ns;
    const held = () =>
      spawnSync("ip", ["-n", holderNs, "-j", "addr", "show", "dev", "eth0"], {
        encoding: "utf8",
      }).stdout.includes(`"${vip}"`);
    const stream = () =>
      new Promise<Event[]>((res, rej) => {
        const args = ["--mode", "stream", "--target", `${vip}:80`, "--interval", "20", "--duration", "6000"];
        const child = spawn(
          "ip",
          [
            "netns",
            "exec",
            clientNs,
            process.execPath,
            ...client.command("lab-client"),
            ...args,
            "--timeout",
            "300",
          ],
          { stdio: ["ignore", "pipe", "inherit"] },
        );
        let out = "";
        child.stdout.setEncoding("utf8").on("data", (d: string) => {
          out += d;
        });
        child.on("close", (code) =>
          code === 0
            ? res((JSON.parse(out) as { events: Event[] }).events)
            : rej(new Error(`client ${code}`)),
        );
      });
    const backToHolder = async () => {
      for (const dev of ["eth0", "eth1"]) spawnSync("ip", ["-n", holderNs, "link", "set", dev, "up"]);
      await labRestart(state, "lb", holder, { repoRoot: REPO });
      const deadline = Date.now() + 20_000;
      while (!held() && Date.now() < deadline) await sleep(100);
      await sleep(1500); // the other host has released it and the clients' caches point back
    };
    const KINDS = ["steady", "graceful", "hard", "passlb", "keepalived"] as const;
    const results: Record<(typeof KINDS)[number], number[]> = {
      steady: [],
      graceful: [],
      hard: [],
      passlb: [],
      keepalived: [],
    };
    const failures: Record<(typeof KINDS)[number], number[]> = {
      steady: [],
      graceful: [],
      hard: [],
      passlb: [],
      keepalived: [],
    };
    // SIGKILL to keepalived's process group: parent and VRRP child at once (the parent
    // alone would let the child stop in order through its parent-death signal)
    const killKeepalived = () => {
      const pid = Number(
        readFileSync(join(state.stateDir, `keepalived-${holder}`, "keepalived.pid"), "utf8"),
      );
      try {
        process.kill(-pid, "SIGKILL");
      } catch {}
    };
    await sleep(2000);
    for (let r = 0; r < ROUNDS; r++) {
      for (const kind of KINDS) {
        const running = stream();
        await sleep(1500);
        const pid = state.processes.find((p) => p.role === "lb" && p.host === holder)!.pid;
        if (kind === "graceful") await labRestart(state, "lb", holder, { repoRoot: REPO, stopOnly: true });
        if (kind === "hard") {
          // links first: nothing the dying processes might still send leaves the host
          for (const dev of ["eth0", "eth1"]) spawnSync("ip", ["-n", holderNs, "link", "set", dev, "down"]);
          process.kill(pid, "SIGKILL");
          killKeepalived();
        }
        if (kind === "passlb") process.kill(pid, "SIGKILL");
        if (kind === "keepalived") killKeepalived();
        const events = await running;
        const g = gap(events);
        results[kind].push(g);
        const failed = events.filter((e) => !e.ok).length;
        failures[kind].push(failed);
        say(
          `round ${r + 1} ${kind.padEnd(8)} gap ${Number.isFinite(g) ? g : "never resumed"} ms, ${failed} of ${events.length} failed`,
        );
        if (kind === "keepalived") {
          // passlb restarts keepalived by itself; wait until it holds the VIP again
          const deadline = Date.now() + 20_000;
          while (!held() && Date.now() < deadline) await sleep(100);
          await sleep(1500);
        } else if (kind !== "steady") await backToHolder();
      }
    }
    const cpu = process.cpuUsage(cpu0);
    const base = median(results.steady);
    say("");
    say(`| case | median gap (ms) | worst (ms) | median / steady | failed connections (per round) |`);
    say(`| --- | --- | --- | --- | --- |`);
    for (const kind of KINDS)
      say(
        `| ${kind} | ${median(results[kind])} | ${Math.max(...results[kind])} | ${(median(results[kind]) / base).toFixed(1)} | ${failures[kind].join(", ")} |`,
      );
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
