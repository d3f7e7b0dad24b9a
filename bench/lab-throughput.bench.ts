/**
 * Lab throughput and connection-rate benchmark (issue 6 §6), in the network-namespace lab
 * (bench/lab/topology.yaml: client → LB host → node → pod), every figure measured in the
 * same run, rounds interleaved; medians of the per-round figures and of the per-round
 * ratios are reported:
 *   - plain routing: the client talks to the pod's address; the LB host and the node only
 *     route (no NAT, no proxy): the physical limit here;
 *   - passlb: the client talks to the Service's VIP; when this build has `passlb lb` the LB
 *     host runs it, else the LB host routes the VIP to the node; the node runs passlb's
 *     agent DNAT (inet passlb-agent) to the pod — the report says which;
 *   - passlb XDP: the same VIP with the LB host on `--dataplane xdp` (the XDP program on its
 *     client ports; detached for the other paths, which then run exactly as without it;
 *     docs/dataplane-xdp.md). Without clang or bpftool this path is left out and said so.
 *     Every path runs with the clients' TX checksum offload off (a frame XDP redirects on veth
 *     loses CHECKSUM_PARTIAL: docs/dataplane-xdp.md "veth"), so the paths stay comparable;
 *   - HAProxy in TCP mode in the LB namespace, proxying to the pod.
 * Throughput: one iperf3 TCP stream (`-t SECONDS`). Connection rate: wrk with
 * `Connection: close` (a new TCP connection per request) against an HAProxy HTTP responder
 * in the pod, from one client, then from all four clients at once (each `--connections`);
 * the clients use timestamps without random offsets (lab-bench-setup.ts clientSysctls).
 * Targets (issue 17): passlb ≥ 0.9 × plain throughput and ≥ 2 × HAProxy's; connection rate
 * ≥ 0.95 × plain and ≥ 1.2 × HAProxy's; (issue 27) the XDP path ≥ 1.0 × plain, both.
 *
 *   node --import tsx bench/lab-throughput.bench.ts [--seconds 5] [--rounds 3] [--connections 32]
 *
 * Needs root, ip and nft; installs iperf3, wrk and haproxy with apt-get when they are
 * missing and it can (and says so), otherwise names what is missing and exits 0. Traffic
 * goes only to documentation addresses inside the lab's own namespaces.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { readManifests } from "../src/cluster/manifest-files.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { labDown, labRestart, labUp } from "../src/lab/lab-runner.ts";
import { buildXdpObject } from "../src/lb-host/xdp/xdp-object.ts";
import { planSnapshot } from "../src/plan/planner.ts";
import {
  clientSysctls,
  labHostShell,
  podHttpResponder,
  shortConnectionSysctls,
  xdpForwarded,
} from "./lab-bench-setup.ts";

const arg = (name: string, fallback: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : fallback;
};
const SECONDS = Math.min(arg("seconds", 5), 30);
const ROUNDS = Math.min(arg("rounds", 3), 10);
const CONNECTIONS = Math.min(arg("connections", 32), 256);
const REPO = resolve(import.meta.dirname, "..");
const TOPOLOGY = join(REPO, "bench/lab/topology.yaml");
const HAPROXY_VIP = "203.0.113.14";

function say(line: string) {
  process.stdout.write(`${line}\n`);
}

function missingTools(): string[] {
  return ["iperf3", "wrk", "haproxy"].filter((t) => spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0);
}

function prerequisites(): boolean {
  if (process.getuid?.() !== 0) {
    say("lab-throughput: skipped: needs root (network namespaces, nft)");
    return false;
  }
  for (const t of ["ip", "nft"])
    if (spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0) {
      say(`lab-throughput: skipped: ${t} is not installed (apt-get install iproute2 nftables)`);
      return false;
    }
  let missing = missingTools();
  if (missing.length > 0 && spawnSync("sh", ["-c", "command -v apt-get"]).status === 0) {
    say(`lab-throughput: installing ${missing.join(", ")} from Debian's packages (apt-get)`);
    spawnSync("apt-get", ["install", "-y", "-qq", "--no-install-recommends", ...missing], {
      stdio: "inherit",
      env: { ...process.env, DEBIAN_FRONTEND: "noninteractive" },
    });
    missing = missingTools();
  }
  if (missing.length > 0) {
    say(`lab-throughput: skipped: missing ${missing.join(", ")} (apt-get install ${missing.join(" ")})`);
    return false;
  }
  return true;
}

const { ns, exec, background, waitListening } = labHostShell("bench");

function iperf(target: string): number {
  const out = exec("client", ["iperf3", "-c", target, "-p", "5201", "-t", String(SECONDS), "-J"]);
  const j = JSON.parse(out) as { end: { sum_received: { bits_per_second: number } } };
  return j.end.sum_received.bits_per_second / 1e9;
}

function wrkArgs(target: string, port: number): string[] {
  return [
    "wrk",
    "-t2",
    `-c${CONNECTIONS}`,
    `-d${SECONDS}s`,
    "-H",
    "Connection: close",
    `http://${target}:${port}/`,
  ];
}

function wrkResult(out: string): { rate: number; errors: string } {
  const rate = Number(/Requests\/sec:\s+([\d.]+)/.exec(out)?.[1] ?? "0");
  const errors = /Socket errors: (.*)/.exec(out)?.[1] ?? "";
  return { rate, errors };
}

/** wrk in every client namespace at once; the rates add up, the errors are listed per client. */
async function wrk(
  clients: readonly string[],
  target: string,
  port: number,
): Promise<{ rate: number; errors: string }> {
  const runs = clients.map(
    (c) =>
      new Promise<{ rate: number; errors: string }>((done, fail) => {
        const child = spawn("ip", ["netns", "exec", ns(c), ...wrkArgs(target, port)], {
          stdio: ["ignore", "pipe", "pipe"],
        });
        let out = "";
        child.stdout.on("data", (d: Buffer) => {
          out += d.toString();
        });
        child.on("error", fail);
        child.on("close", (code) =>
          code === 0 ? done(wrkResult(out)) : fail(new Error(`${c}: wrk exited ${code}`)),
        );
      }),
  );
  const results = await Promise.all(runs);
  return {
    rate: results.reduce((a, r) => a + r.rate, 0),
    errors: results
      .map((r, i) => (r.errors ? `${clients[i]}: ${r.errors}` : ""))
      .filter(Boolean)
      .join("; "),
  };
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const CLIENT_PORTS = ["plbc0", "plbc1", "plbc2", "plbc3"]; // the LB's ends (src/lab/lab-layout.ts)

/** the XDP path's setup, when clang, bpftool and ethtool are there: a bpffs, the object */
async function xdpSetup(): Promise<{ dir: string; pin: string; object: string } | undefined> {
  for (const t of ["clang", "bpftool", "ethtool"])
    if (spawnSync("sh", ["-c", `command -v ${t}`]).status !== 0) {
      say(`lab-throughput: the XDP path is left out: ${t} is not installed`);
      return undefined;
    }
  const dir = mkdtempSync(join(tmpdir(), "plb-xdptput-"));
  mkdirSync(join(dir, "bpffs"));
  if (spawnSync("mount", ["-t", "bpf", "bpf", join(dir, "bpffs")]).status !== 0)
    throw new Error("cannot mount a bpffs");
  const object = join(dir, "passlb-xdp.o");
  await buildXdpObject(object);
  return { dir, pin: join(dir, "bpffs", "passlb"), object };
}

async function main(): Promise<void> {
  if (!prerequisites()) return;
  const xdpBuild = await xdpSetup();
  const options = {
    repoRoot: REPO,
    agents: true,
    lb: true,
    agentArgs: ["--dataplane=nftables"],
    // no drift check with XDP, so the benchmark may detach the program for the other paths
    lbArgs: xdpBuild
      ? [
          "--dataplane=xdp",
          ...CLIENT_PORTS.map((p) => `--xdp-interface=${p}`),
          `--xdp-pin-dir=${xdpBuild.pin}`,
          `--xdp-object=${xdpBuild.object}`,
          "--drift-check-ms=0",
          "--counters-ms=0",
        ]
      : ["--dataplane=nftables"],
  };
  try {
    const state = await labUp(TOPOLOGY, options);
    const read = await readManifests([state.manifestsDir], async () => "");
    const snapshot = decodeDocuments(read.documents).snapshot;
    const vip = planSnapshot(snapshot).plans[0]?.vips[0]?.address;
    if (!vip) throw new Error("the bench Service got no VIP");
    const pod = state.layout.pods[0]!;
    // Many short connections: let TIME_WAIT and its conntrack entries go quickly.
    const clients = state.layout.clients.map((c) => c.name);
    for (const host of [...clients, "lb", "node-1", "server"])
      exec(host, ["sh", "-c", shortConnectionSysctls()]);
    for (const host of clients) exec(host, ["sh", "-c", clientSysctls()]);
    // The pod: iperf3 and an HTTP responder.
    const podHttp = join(state.stateDir, "pod-http.cfg");
    writeFileSync(podHttp, podHttpResponder());
    const logs = join(state.stateDir, "logs");
    background("server", ["iperf3", "-s", "-p", "5201"], logs);
    background("server", ["haproxy", "-db", "-f", podHttp], logs);
    // HAProxy in TCP mode in the LB namespace.
    exec("lb", ["ip", "addr", "add", `${HAPROXY_VIP}/32`, "dev", "lo"]);
    const lbCfg = join(state.stateDir, "lb-haproxy.cfg");
    writeFileSync(
      lbCfg,
      [
        "global",
        "  maxconn 8000",
        "defaults",
        "  mode tcp",
        "  timeout client 10s",
        "  timeout server 10s",
        "  timeout connect 5s",
        "frontend http",
        `  bind ${HAPROXY_VIP}:80`,
        "  default_backend http",
        "backend http",
        `  server pod ${pod.ipv4}:8080`,
        "frontend iperf",
        `  bind ${HAPROXY_VIP}:5201`,
        "  default_backend iperf",
        "backend iperf",
        `  server pod ${pod.ipv4}:5201`,
        "",
      ].join("\n"),
    );
    background("lb", ["haproxy", "-db", "-f", lbCfg], logs);
    await waitListening("server", 5201);
    await waitListening("server", 8080);
    await waitListening("lb", 80);
    const xdp = xdpBuild ? await xdpPath(state, xdpBuild.pin, clients) : () => {};

    const passlbName = "passlb (passlb lb + agent DNAT)";
    const variants = [
      { name: "plain routing", target: pod.ipv4, port: 8080, xdp: false },
      { name: passlbName, target: vip, port: 80, xdp: false },
      { name: "HAProxy (TCP mode, LB host)", target: HAPROXY_VIP, port: 80, xdp: false },
      ...(xdpBuild
        ? [{ name: "passlb XDP (lb --dataplane xdp + agent DNAT)", target: vip, port: 80, xdp: true }]
        : []),
    ];
    const gbps = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    const rate = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    const manyRate = new Map<string, number[]>(variants.map((v) => [v.name, []]));
    // The agents and the LB have just started (tsx compiles on start): let them settle.
    await new Promise((r) => setTimeout(r, 5000));
    say(
      `lab-throughput: ${ROUNDS} rounds × ${SECONDS} s, wrk ${CONNECTIONS} connections (Connection: close) from one client, then from each of ${clients.length} clients at once`,
    );
    for (let r = 0; r < ROUNDS; r++)
      for (const v of variants) {
        xdp(v.xdp);
        const before = v.xdp && xdpBuild ? xdpForwarded(xdpBuild.pin) : 0;
        const g = iperf(v.target);
        const w = await wrk(clients.slice(0, 1), v.target, v.port);
        const many = await wrk(clients, v.target, v.port);
        gbps.get(v.name)!.push(g);
        rate.get(v.name)!.push(w.rate);
        manyRate.get(v.name)!.push(many.rate);
        const errors = [w.errors, many.errors].filter(Boolean).join("; ");
        if (v.xdp && xdpBuild) say(`  (XDP forwarded ${xdpForwarded(xdpBuild.pin) - before} packets itself)`);
        say(
          `  round ${r + 1} ${v.name}: ${g.toFixed(2)} Gbit/s, ${w.rate.toFixed(0)} conn/s one client, ${many.rate.toFixed(0)} conn/s ${clients.length} clients${errors ? ` (socket errors: ${errors})` : ""}`,
        );
      }
    // Load from other work on the machine drifts between rounds, so ratios are taken per
    // round (the three paths measured back to back) and their median reported.
    const ratio = (a: number[], b: number[]) => median(a.map((x, i) => x / b[i]!));
    const [plain, passlb, haproxy, fast] = variants.map((v) => ({
      g: gbps.get(v.name)!,
      r: rate.get(v.name)!,
      m: manyRate.get(v.name)!,
    }));
    say("");
    say(
      `| path | throughput (Gbit/s) | × plain | connections/s, one client | × plain | connections/s, ${clients.length} clients | × plain |`,
    );
    say("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for (const [i, v] of variants.entries()) {
      const m = [plain, passlb, haproxy, fast][i]!;
      say(
        `| ${v.name} | ${median(m.g).toFixed(2)} | ${ratio(m.g, plain!.g).toFixed(2)} | ${median(m.r).toFixed(0)} | ${ratio(m.r, plain!.r).toFixed(2)} | ${median(m.m).toFixed(0)} | ${ratio(m.m, plain!.m).toFixed(2)} |`,
      );
    }
    say("");
    say("medians of per-round values and of per-round ratios");
    say(`passlb / plain throughput ${ratio(passlb!.g, plain!.g).toFixed(2)} (target ≥ 0.9)`);
    say(
      `passlb / plain connection rate, one client ${ratio(passlb!.r, plain!.r).toFixed(2)} (target ≥ 0.95)`,
    );
    say(
      `passlb / plain connection rate, ${clients.length} clients ${ratio(passlb!.m, plain!.m).toFixed(2)} (target ≥ 0.95)`,
    );
    say(
      `passlb / HAProxy connection rate, one client ${ratio(passlb!.r, haproxy!.r).toFixed(2)} (target ≥ 1.2)`,
    );
    say(
      `passlb / HAProxy connection rate, ${clients.length} clients ${ratio(passlb!.m, haproxy!.m).toFixed(2)} (target ≥ 1.2)`,
    );
    say(`passlb / HAProxy throughput ${ratio(passlb!.g, haproxy!.g).toFixed(2)} (target ≥ 2)`);
    if (fast)
      say(
        `passlb XDP / plain: throughput ${ratio(fast.g, plain!.g).toFixed(2)}, connection rate one client ${ratio(fast.r, plain!.r).toFixed(2)}, ${clients.length} clients ${ratio(fast.m, plain!.m).toFixed(2)} (target ≥ 1.0 each)`,
      );
  } finally {
    if (process.env.KEEP_LAB !== "1") await labDown("bench", options);
    if (xdpBuild) {
      spawnSync("umount", [join(xdpBuild.dir, "bpffs")]);
      rmSync(xdpBuild.dir, { recursive: true, force: true });
    }
  }
}

/** Readies the XDP path (docs/dataplane-xdp.md "veth"): the node's address resolved and a
 * restart so the LB writes its next hop, the clients' TX checksums computed in software, the
 * pass-through program on the node's veth end. Returns a switch for the LB's program. */
async function xdpPath(
  state: Awaited<ReturnType<typeof labUp>>,
  pin: string,
  clients: readonly string[],
): Promise<(on: boolean) => void> {
  const node = state.layout.nodes[0]!;
  exec("lb", ["arping", "-c", "1", "-w", "2", "-I", "plbnodes", node.ipv4]);
  await new Promise((r) => setTimeout(r, 2000));
  await labRestart(state, "lb", "lb", { repoRoot: REPO });
  await new Promise((r) => setTimeout(r, 3000));
  for (const c of clients) exec(c, ["ethtool", "-K", "eth0", "tx", "off"]);
  exec("node-1", ["ip", "link", "set", "dev", "eth0", "xdpdrv", "pinned", `${pin}/prog/passlb_xdp_pass`]);
  return (on: boolean) => {
    for (const port of CLIENT_PORTS)
      exec(
        "lb",
        on
          ? ["ip", "-force", "link", "set", "dev", port, "xdpdrv", "pinned", `${pin}/prog/passlb_xdp`]
          : ["ip", "link", "set", "dev", port, "xdpdrv", "off"],
      );
    if (on) {
      const id = exec("lb", ["ip", "-j", "link", "show", "dev", CLIENT_PORTS[0]!]);
      if (!id.includes('"xdp"')) throw new Error("the XDP program is not attached to plbc0");
    }
  };
}

await main();
