/**
 * Routed-network benchmark (issue 21): throughput and connection rate through encapsulation
 * against plain routing, in one lab run (bench/lab/encap-topology.yaml: the client, the LB
 * host, a router, node-r behind it and node-s on the LB host's segment, one pod each).
 * Paths, measured back to back in every round (throughput of all, then connection rate of
 * all, in an order rotated per round):
 *   - plain routing: the client talks to pod-r's address; LB host, router and node-r only
 *     route (no NAT, no tunnel, no load balancer) — the baseline;
 *   - passlb encap: the client talks to Service `rt`'s VIP; `passlb lb --forward encap`
 *     wraps the packet in VXLAN-GPE to node-r, whose agent (`--decap vxlan-gpe`) unwraps and
 *     DNATs it to pod-r; the reply goes node-r → router → client (direct server return);
 *   - passlb route (same segment): Service `seg`'s VIP, policy-routed to node-s — for
 *     comparison with today's mode.
 * Throughput: one iperf3 TCP stream client → pod (the encapsulated direction), `-t SECONDS`.
 * Connection rate: wrk with `Connection: close` (a new TCP connection per request, as
 * bench/lab-throughput.bench.ts) against an HAProxy HTTP responder in each pod.
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
 * With `--xdp 1`, `passlb lb --dataplane xdp` on the LB host's client port, and two more paths
 * measured in the same rounds with the program attached (detached for the others): passlb
 * encap with XDP in front — the program parses the packet, finds the routed node without
 * its XDP flag and hands the packet to nftables (`pass_node`), which encapsulates it as
 * before — and passlb route with XDP, which forwards to node-s itself. The cost of the
 * hand-over is the first against passlb encap (docs/dataplane-xdp.md "What the stack
 * (nftables) handles"). In this mode the client's TX checksum offload is off for every path
 * (docs/dataplane-xdp.md "veth").
 *
 *   node --import tsx bench/lab-encap.bench.ts [--seconds 5] [--rounds 3] [--connections 32] [--xdp 1]
 *
 * Needs root, ip, nft, iperf3, wrk, haproxy and ethtool (Debian packages of those names); says
 * what is missing and exits 0 otherwise.
 * Traffic goes only to documentation addresses inside the lab's own namespaces.
 */
import { spawnSync } from "node:child_process";
import { writeFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { readManifests } from "../src/cluster/manifest-files.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { labDown, labUp } from "../src/lab/lab-runner.ts";
import { planSnapshot } from "../src/plan/planner.ts";
import {
  clientSysctls,
  labHostShell,
  podHttpResponder,
  shortConnectionSysctls,
  xdpReasonTotals,
} from "./lab-bench-setup.ts";
import { xdpBenchReady, xdpBenchSetup } from "./xdp-bench-setup.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = Math.min(arg("seconds", 5), 30);
const ROUNDS = Math.min(arg("rounds", 3), 10);
const CONNECTIONS = Math.min(arg("connections", 32), 256);
const XDP = arg("xdp", 0) === 1;
const REPO = resolve(import.meta.dirname, "..");
const TOPOLOGY = join(REPO, "bench/lab/encap-topology.yaml");
const LAB = "benchenc";

const say = (line: string) => process.stdout.write(`${line}\n`);
const { ns, exec, background, waitListening } = labHostShell(LAB);

function prerequisites(): boolean {
  if (process.getuid?.() !== 0) {
    say("lab-encap: skipped: needs root (network namespaces, nft)");
    return false;
  }
  for (const t of ["ip", "nft", "iperf3", "wrk", "haproxy", "ethtool"])
    if (spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0) {
      say(
        `lab-encap: skipped: ${t} is not installed (apt-get install iproute2 nftables iperf3 wrk haproxy ethtool)`,
      );
      return false;
    }
  return true;
}

function iperf(target: string): number {
  // two paths end at pod-r's one iperf3 server: right after a test it may still answer
  // "the server is busy running a test"; try again shortly
  for (let attempt = 1; ; attempt++) {
    const r = spawnSync(
      "ip",
      ["netns", "exec", ns("client"), "iperf3", "-c", target, "-p", "5201", "-t", String(SECONDS), "-J"],
      {
        encoding: "utf8",
        maxBuffer: 1 << 26,
      },
    );
    const j = JSON.parse(r.stdout || "{}") as {
      error?: string;
      end?: { sum_received?: { bits_per_second: number } };
    };
    const bps = j.end?.sum_received?.bits_per_second;
    if (bps !== undefined && !j.error) return bps / 1e9;
    if (attempt >= 5) throw new Error(`iperf3 to ${target}: ${j.error ?? r.stderr}`);
    spawnSync("sleep", ["0.5"]);
  }
}

function wrk(target: string, port: number): { rate: number; errors: string } {
  const out = exec("client", [
    "wrk",
    "-t2",
    `-c${CONNECTIONS}`,
    `-d${SECONDS}s`,
    "-H",
    "Connection: close",
    `http://${target}:${port}/`,
  ]);
  const rate = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? "0");
  const errors = /Socket errors: (.*)/.exec(out)?.[1] ?? "";
  return { rate, errors };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

async function main(): Promise<void> {
  if (!prerequisites()) return;
  const xdp = XDP ? await xdpBenchSetup("plb-encapxdp-") : undefined;
  const options = {
    repoRoot: REPO,
    agents: true,
    lb: true,
    agentArgs: ["--dataplane=nftables", "--decap=vxlan-gpe"],
    lbArgs: [
      `--dataplane=${xdp ? "xdp" : "nftables"}`,
      "--forward=encap",
      "--encap=vxlan-gpe",
      "--direct=198.51.100.0/26",
      ...(xdp?.lbArgs ?? []),
    ],
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
    // many short connections: let TIME_WAIT and its conntrack entries go quickly
    for (const host of ["client", "lb", "router", "node-r", "node-s", "pod-r", "pod-s"])
      exec(host, ["sh", "-c", shortConnectionSysctls()]);
    exec("client", ["sh", "-c", clientSysctls()]);
    const podHttp = join(state.stateDir, "pod-http.cfg");
    writeFileSync(podHttp, podHttpResponder());
    for (const pod of ["pod-r", "pod-s"]) {
      background(pod, ["iperf3", "-s", "-p", "5201"], logs);
      background(pod, ["haproxy", "-db", "-f", podHttp], logs);
    }
    for (const pod of ["pod-r", "pod-s"]) {
      await waitListening(pod, 5201);
      await waitListening(pod, 8080);
    }
    const variants: { name: string; target: string; http: number; xdp?: boolean }[] = [
      { name: "plain routing (to pod-r)", target: podR.ipv4, http: 8080 },
      { name: "passlb encap (VXLAN-GPE, DSR)", target: rt, http: 80 },
      { name: "passlb route (same segment)", target: seg, http: 80 },
    ];
    if (xdp)
      variants.push(
        { name: "passlb encap, XDP in front (hands over)", target: rt, http: 80, xdp: true },
        { name: "passlb route, XDP", target: seg, http: 80, xdp: true },
      );
    // the agents and the LB have just started and probe: let them settle
    await new Promise((r) => setTimeout(r, 5000));
    const attach = xdp
      ? await xdpBenchReady(state, exec, {
          repoRoot: REPO,
          pin: xdp.pin,
          node: "node-s",
          clients: ["client"],
        })
      : () => undefined;
    const measured = (v: (typeof variants)[number], run: () => string) => {
      attach(v.xdp === true);
      const before = xdp && v.xdp ? xdpReasonTotals(xdp.pin) : undefined;
      const text = run();
      if (!before || !xdp) return text;
      const after = xdpReasonTotals(xdp.pin);
      const d = (k: string) => (after[k] ?? 0) - (before[k] ?? 0);
      return `${text} [XDP forwarded ${d("fwd_redirect") + d("fwd_tx")}, handed over ${d("pass_node")}]`;
    };
    for (const regime of ["gso", "wire"] as const) {
      const on = regime === "gso" ? "on" : "off";
      exec("client", ["ethtool", "-K", "eth0", "tso", on, "gso", on]);
      const gbps = new Map<string, number[]>(variants.map((v) => [v.name, []]));
      const rate = new Map<string, number[]>(variants.map((v) => [v.name, []]));
      say(
        `lab-encap (${regime}): ${ROUNDS} rounds × (iperf3 ${SECONDS} s, wrk ${CONNECTIONS} connections ${SECONDS} s, Connection: close)`,
      );
      for (let r = 0; r < ROUNDS; r++) {
        // throughput first, then connection rate, each in an order rotated per round, so
        // no path always follows the heaviest iperf3 run
        const order = variants.map((_, i) => variants[(i + r) % variants.length]!);
        const line = new Map<string, string>();
        for (const v of order) {
          const text = measured(v, () => {
            const g = iperf(v.target);
            gbps.get(v.name)!.push(g);
            return `${g.toFixed(2)} Gbit/s`;
          });
          line.set(v.name, text);
        }
        for (const v of order) {
          const text = measured(v, () => {
            const c = wrk(v.target, v.http);
            rate.get(v.name)!.push(c.rate);
            return `${c.rate.toFixed(0)} conn/s${c.errors ? ` (socket errors: ${c.errors})` : ""}`;
          });
          line.set(v.name, `${line.get(v.name)}, ${text}`);
        }
        for (const v of variants) say(`  round ${r + 1} ${v.name}: ${line.get(v.name)}`);
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
      if (xdp) {
        const handed = { g: gbps.get(variants[3]!.name)!, r: rate.get(variants[3]!.name)! };
        say(
          `${regime}: encap with XDP in front / encap without: throughput ${ratio(handed.g, encap.g).toFixed(2)}, connection rate ${ratio(handed.r, encap.r).toFixed(2)}`,
        );
      }
      say("");
    }
  } finally {
    if (process.env.KEEP_LAB !== "1") await labDown(LAB, options);
    xdp?.undo();
  }
}

await main();
