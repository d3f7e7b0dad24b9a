/**
 * Routed-network benchmark (issue 21): throughput and connection rate through encapsulation
 * against plain routing, in one lab run (bench/lab/encap-topology.yaml: the client, the LB
 * host, a router, node-r behind it and node-s on the LB host's segment, one pod each).
 * Paths, measured back to back in every round:
 *   - plain routing: the client talks to pod-r's address; LB host, router and node-r only
 *     route (no NAT, no tunnel, no load balancer) — the baseline;
 *   - passlb encap: the client talks to Service `rt`'s VIP; `passlb lb --forward encap`
 *     wraps the packet in VXLAN-GPE to node-r, whose agent (`--decap vxlan-gpe`) unwraps and
 *     DNATs it to pod-r; the reply goes node-r → router → client (direct server return);
 *   - passlb route (same segment): Service `seg`'s VIP, policy-routed to node-s — for
 *     comparison with today's mode.
 * Throughput: one iperf3 TCP stream client → pod (the encapsulated direction), `-t SECONDS`.
 * Connection rate: the lab client's `count` mode (a TCP connection per greeting, 16 at a
 * time), connections per second; the client is a Node process, the same for every path.
 * Target: passlb encap ≥ 0.8 × plain routing for both. Medians of the per-round values and
 * of the per-round ratios are printed.
 *
 * Two packet regimes, each a full set of rounds:
 *   - `gso`: as the lab is — the client's veth sends 64 KB TSO/GSO super-packets, and plain
 *     routing carries them unsegmented through every hop (no wire anywhere), while the
 *     router segments the VXLAN packets it forwards (measured: 2,313 packets out of the LB
 *     host became 74,910 on the router's egress for 100 MB): a lab artefact that flatters
 *     plain routing;
 *   - `wire`: `ethtool -K eth0 tso off gso off` in the client (Debian: ethtool), so every
 *     path carries MSS-sized packets, as on a real link — the per-packet cost of the LB
 *     host, the tunnel and the node is what differs.
 *
 *   node --import tsx bench/lab-encap.bench.ts [--seconds 5] [--rounds 3] [--connections 3000]
 *
 * Needs root, ip, nft and iperf3 (Debian: iperf3); says what is missing and exits 0 otherwise.
 * Traffic goes only to documentation addresses inside the lab's own namespaces.
 */
import { spawn, spawnSync } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { join, resolve } from "node:path";
import { readManifests } from "../src/cluster/manifest-files.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { compileLabScripts, labDown, labUp } from "../src/lab/lab-runner.ts";
import { planSnapshot } from "../src/plan/planner.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = Math.min(arg("seconds", 5), 30);
const ROUNDS = Math.min(arg("rounds", 3), 10);
const CONNECTIONS = Math.min(arg("connections", 3000), 20_000);
const REPO = resolve(import.meta.dirname, "..");
const TOPOLOGY = join(REPO, "bench/lab/encap-topology.yaml");
const LAB = "benchenc";

const say = (line: string) => process.stdout.write(`${line}\n`);
const ns = (host: string) => `plb-${LAB}-${host}`;

function prerequisites(): boolean {
  if (process.getuid?.() !== 0) {
    say("lab-encap: skipped: needs root (network namespaces, nft)");
    return false;
  }
  for (const t of ["ip", "nft", "iperf3", "ethtool"])
    if (spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0) {
      say(`lab-encap: skipped: ${t} is not installed (apt-get install iproute2 nftables iperf3 ethtool)`);
      return false;
    }
  return true;
}

function exec(host: string, argv: readonly string[]): string {
  const r = spawnSync("ip", ["netns", "exec", ns(host), ...argv], { encoding: "utf8", maxBuffer: 1 << 26 });
  if (r.status !== 0) throw new Error(`${host}: ${argv.join(" ")}: ${r.stderr}`);
  return r.stdout;
}

function background(host: string, argv: readonly string[], logDir: string): void {
  const fd = openSync(join(logDir, `${host}.${argv[0]}.log`), "a");
  spawn("ip", ["netns", "exec", ns(host), ...argv], { detached: true, stdio: ["ignore", fd, fd] }).unref();
  closeSync(fd);
}

async function waitListening(host: string, port: number): Promise<void> {
  for (let i = 0; i < 100; i++) {
    if (exec(host, ["ss", "-Hltn", `sport = :${port}`]).trim() !== "") return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${host}: nothing listens on ${port}`);
}

function iperf(target: string): number {
  const out = exec("client", ["iperf3", "-c", target, "-p", "5201", "-t", String(SECONDS), "-J"]);
  const j = JSON.parse(out) as { end: { sum_received: { bits_per_second: number } } };
  return j.end.sum_received.bits_per_second / 1e9;
}

function connectionRate(client: readonly string[], target: string): { rate: number; failed: number } {
  const out = exec("client", [
    ...client,
    "--target",
    target,
    "--count",
    String(CONNECTIONS),
    "--concurrency",
    "16",
  ]);
  const r = JSON.parse(out) as { ok: number; failed: number; ms: number };
  return { rate: (r.ok * 1000) / r.ms, failed: r.failed };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  if (!prerequisites()) return;
  const options = {
    repoRoot: REPO,
    agents: true,
    lb: true,
    agentArgs: ["--dataplane=nftables", "--decap=vxlan-gpe"],
    lbArgs: ["--dataplane=nftables", "--forward=encap", "--encap=vxlan-gpe", "--direct=198.51.100.0/26"],
  };
  try {
    const state = await labUp(TOPOLOGY, options);
    const read = await readManifests([state.manifestsDir], async () => "");
    const plans = planSnapshot(decodeDocuments(read.documents).snapshot).plans;
    const vip = (service: string) => plans.find((p) => p.service === service)?.vips[0]?.address;
    const rt = vip("bench/rt");
    const seg = vip("bench/seg");
    if (!rt || !seg) throw new Error("the bench Services got no VIP");
    const podR = state.layout.pods.find((p) => p.name === "pod-r")!;
    const logs = join(state.stateDir, "logs");
    for (const pod of ["pod-r", "pod-s"]) background(pod, ["iperf3", "-s", "-p", "5201"], logs);
    for (const pod of ["pod-r", "pod-s"]) await waitListening(pod, 5201);
    const scripts = await compileLabScripts(REPO, state.stateDir);
    const client = [process.execPath, ...scripts.command("lab-client")];
    const variants = [
      { name: "plain routing (to pod-r)", target: podR.ipv4, echo: 9000 },
      { name: "passlb encap (VXLAN-GPE, DSR)", target: rt, echo: 80 },
      { name: "passlb route (same segment)", target: seg, echo: 80 },
    ];
    // the agents and the LB have just started and probe: let them settle
    await new Promise((r) => setTimeout(r, 5000));
    for (const regime of ["gso", "wire"] as const) {
      const on = regime === "gso" ? "on" : "off";
      exec("client", ["ethtool", "-K", "eth0", "tso", on, "gso", on]);
      const gbps = new Map<string, number[]>(variants.map((v) => [v.name, []]));
      const rate = new Map<string, number[]>(variants.map((v) => [v.name, []]));
      say(
        `lab-encap (${regime}): ${ROUNDS} rounds × (iperf3 ${SECONDS} s, ${CONNECTIONS} connections, 16 at a time)`,
      );
      for (let r = 0; r < ROUNDS; r++)
        for (const v of variants) {
          const g = iperf(v.target);
          const c = connectionRate(client, `${v.target}:${v.echo}`);
          gbps.get(v.name)!.push(g);
          rate.get(v.name)!.push(c.rate);
          say(
            `  round ${r + 1} ${v.name}: ${g.toFixed(2)} Gbit/s, ${c.rate.toFixed(0)} conn/s${c.failed ? ` (${c.failed} failed)` : ""}`,
          );
        }
      const ratio = (a: number[], b: number[]) => median(a.map((x, i) => x / b[i]!));
      const plain = { g: gbps.get(variants[0]!.name)!, r: rate.get(variants[0]!.name)! };
      say("");
      say(`${regime}:`);
      say("| path | throughput (Gbit/s) | × plain | connections/s | × plain |");
      say("| --- | ---: | ---: | ---: | ---: |");
      for (const v of variants) {
        const g = gbps.get(v.name)!;
        const c = rate.get(v.name)!;
        say(
          `| ${v.name} | ${median(g).toFixed(2)} | ${ratio(g, plain.g).toFixed(2)} | ${median(c).toFixed(0)} | ${ratio(c, plain.r).toFixed(2)} |`,
        );
      }
      const encap = { g: gbps.get(variants[1]!.name)!, r: rate.get(variants[1]!.name)! };
      say("");
      say(`${regime}: medians of per-round values and of per-round ratios`);
      say(`${regime}: passlb encap / plain throughput ${ratio(encap.g, plain.g).toFixed(2)} (target ≥ 0.8)`);
      say(
        `${regime}: passlb encap / plain connection rate ${ratio(encap.r, plain.r).toFixed(2)} (target ≥ 0.8)`,
      );
      say("");
    }
  } finally {
    if (process.env.KEEP_LAB !== "1") await labDown(LAB, options);
  }
}

await main();
