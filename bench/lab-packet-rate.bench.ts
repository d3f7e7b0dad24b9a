import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { readManifests } from "../src/cluster/manifest-files.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { labDown, labUp } from "../src/lab/lab-runner.ts";
import { planSnapshot } from "../src/plan/planner.ts";
import {
  benchArg,
  benchLabOptions,
  benchMedian,
  benchPrerequisites,
  labHostShell,
  xdpForwarded,
} from "./lab-bench-setup.ts";
import { XDP_BENCH_PACKAGES, xdpBenchReady, xdpBenchSetup } from "./xdp-bench-setup.ts";

const SECONDS = Math.min(benchArg("seconds", 3), 30);
const ROUNDS = Math.min(benchArg("rounds", 3), 10);
const REPO = resolve(import.meta.dirname, "..");
const LAB = "scalepkt";
const PORT = 9999;
const FLOWS = 1024;
const MAX_PACKETS = 2 ** 26;
const sh = labHostShell(LAB);
const say = (line: string) => process.stdout.write(`${line}\n`);

/** An nft counter that counts and drops the generator's packets at a device's ingress. */
function countAt(host: string, device: string): void {
  sh.exec(
    host,
    ["nft", "-f", "-"],
    [
      "table netdev plbpktcount {",
      `  chain in { type filter hook ingress device "${device}" priority -500; udp dport ${PORT} counter drop; }`,
      "}",
    ].join("\n"),
  );
}

function counted(host: string): number {
  const out = sh.exec(host, ["nft", "-j", "list", "table", "netdev", "plbpktcount"]);
  sh.exec(host, ["nft", "delete", "table", "netdev", "plbpktcount"]);
  const rule = (
    JSON.parse(out) as { nftables: { rule?: { expr: { counter?: { packets: number } }[] } }[] }
  ).nftables.find((o) => o.rule)?.rule;
  return rule?.expr.find((e) => e.counter)?.counter?.packets ?? 0;
}

/** The kernel's ksoftirqd threads (one per CPU). */
const KSOFTIRQD = readdirSync("/proc")
  .filter((d) => /^\d+$/.test(d))
  .filter((d) => {
    try {
      return /^ksoftirqd\/\d+$/.test(readFileSync(`/proc/${d}/comm`, "utf8").trim());
    } catch {
      return false;
    }
  });

/** CPU seconds (user + system) the ksoftirqd threads used so far. */
function ksoftirqdSeconds(): number {
  let sum = 0;
  for (const pid of KSOFTIRQD) {
    const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
    sum += (Number(f[11]) + Number(f[12])) / 100;
  }
  return sum;
}

interface Run {
  readonly pps: number;
  /** CPU nanoseconds per counted packet (trafgen + ksoftirqd) */
  readonly nsPerPacket: number;
}

/** One trafgen run with `config`, counted at `where`'s ingress `device`. */
function generate(config: string, where: { host: string; device: string }, timeFile: string): Run {
  countAt(where.host, where.device);
  const soft0 = ksoftirqdSeconds();
  // timeout stops trafgen with SIGINT (its normal stop) and exits 124: not a failure here
  sh.exec("client", [
    "sh",
    "-c",
    `/usr/bin/time -o ${timeFile} -f '%e %U %S' timeout -s INT ${SECONDS} trafgen --dev eth0 --conf ${config} --cpus 1 --no-sock-mem --notouch-irq -n ${MAX_PACKETS} >/dev/null 2>&1; true`,
  ]);
  const soft = ksoftirqdSeconds() - soft0;
  const packets = counted(where.host);
  const [elapsed, user, system] = readFileSync(timeFile, "utf8")
    .trim()
    .split("\n")
    .pop()!
    .split(" ")
    .map(Number);
  return {
    pps: packets / elapsed!,
    nsPerPacket: packets > 0 ? ((user! + system! + soft) * 1e9) / packets : 0,
  };
}

async function main(): Promise<void> {
  if (!benchPrerequisites("lab-packet-rate", XDP_BENCH_PACKAGES)) return;
  const fast = await xdpBenchSetup("plb-xdpbench-");
  const pin = fast.pin;
  // the XDP fast path in front of the nftables table
  const options = { ...benchLabOptions(REPO), lbArgs: ["--dataplane=xdp", ...fast.lbArgs] };
  try {
    const state = await labUp(join(REPO, "bench/lab/packet-rate-topology.yaml"), options);
    const read = await readManifests([state.manifestsDir], async () => "");
    const vip = planSnapshot(decodeDocuments(read.documents).snapshot).plans[0]?.vips[0]?.address;
    if (!vip) throw new Error("the bench Service got no VIP");
    const pod = state.layout.pods[0]!;
    const client = state.layout.clients[0]!;
    const linkMac = (host: string, dev: string) =>
      (JSON.parse(sh.exec(host, ["ip", "-j", "link", "show", dev])) as { address: string }[])[0]!.address;
    const gatewayMac = linkMac("lb", "plbclients");
    const clientMac = linkMac("client", "eth0");
    const config = (target: string) => {
      const file = join(state.stateDir, `trafgen-${target}.cfg`);
      writeFileSync(
        file,
        [
          "{",
          `  eth(da=${gatewayMac}, sa=${clientMac}),`,
          `  ipv4(sa=${client.ipv4}, da=${target}, ttl=64),`,
          `  udp(sp=dinc(10000, ${10000 + FLOWS - 1}), dp=${PORT}),`,
          "  fill(0x2a, 64),",
          "}",
          "",
        ].join("\n"),
      );
      return file;
    };
    const xdp = await xdpBenchReady(state, sh.exec, {
      repoRoot: REPO,
      pin,
      node: "node-1",
      clients: ["client"],
    });
    const atPod = { host: pod.name, device: "eth0" };
    const atNode = { host: "node-1", device: "eth0" };
    const atLb = { host: "lb", device: "plbc0" };
    const runs = [
      { name: "plain routing, counted at the pod", config: config(pod.ipv4), where: atPod, xdp: false },
      { name: "passlb VIP, counted at the pod", config: config(vip), where: atPod, xdp: false },
      { name: "plain routing, counted at the node", config: config(pod.ipv4), where: atNode, xdp: false },
      { name: "passlb VIP, counted at the node", config: config(vip), where: atNode, xdp: false },
      {
        name: "generator only, counted at the LB host's ingress",
        config: config(vip),
        where: atLb,
        xdp: false,
      },
      { name: "passlb XDP, counted at the pod", config: config(vip), where: atPod, xdp: true },
      { name: "passlb XDP, counted at the node", config: config(vip), where: atNode, xdp: true },
    ];
    // the LB and the agent have just started: let them settle (first probes, first syncs)
    await new Promise((r) => setTimeout(r, 5000));
    const results = new Map<string, Run[]>(runs.map((r) => [r.name, []]));
    say(
      `lab-packet-rate: ${ROUNDS} rounds × ${runs.length} runs × ${SECONDS} s, UDP 64-byte payloads, ${FLOWS} flows (source ports), one trafgen process`,
    );
    const timeFile = join(state.stateDir, "trafgen.time");
    for (let r = 0; r < ROUNDS; r++) {
      // the pairs that are compared (plain and VIP at one counting point) run back to back,
      // their order swapped every round; the pairs and the generator-only run rotate
      const groups = [[runs[0]!, runs[1]!, runs[5]!], [runs[2]!, runs[3]!, runs[6]!], [runs[4]!]].map((g) =>
        r % 2 === 0 ? g : [...g].reverse(),
      );
      const order = groups.flatMap((_, i) => groups[(i + r) % groups.length]!);
      const load = loadavg()[0]!.toFixed(1);
      for (const run of order) {
        xdp(run.xdp);
        const before = run.xdp ? xdpForwarded(pin) : 0;
        const x = generate(run.config, run.where, timeFile);
        if (run.xdp) say(`  (XDP forwarded ${xdpForwarded(pin) - before} packets itself in this run)`);
        results.get(run.name)!.push(x);
        say(
          `  round ${r + 1} (load ${load}) ${run.name}: ${x.pps.toFixed(0)} packets/s, ${x.nsPerPacket.toFixed(0)} ns CPU/packet`,
        );
      }
    }
    const of = (i: number) => results.get(runs[i]!.name)!;
    const ratio = (a: Run[], b: Run[], f: (x: Run) => number) =>
      benchMedian(a.map((x, i) => f(x) / f(b[i]!)));
    const lbShare = (i: number) => benchMedian(of(i).map((x, k) => x.nsPerPacket - of(4)[k]!.nsPerPacket));
    say("");
    say("| run | packets/s | × plain (same counting point) | CPU ns/packet (whole path) |");
    say("| --- | ---: | ---: | ---: |");
    for (const [i, run] of runs.entries()) {
      const base = i === 1 || i === 5 ? of(0) : i === 3 || i === 6 ? of(2) : of(i);
      say(
        `| ${run.name} | ${benchMedian(of(i).map((x) => x.pps)).toFixed(0)} | ${ratio(of(i), base, (x) => x.pps).toFixed(2)} | ${benchMedian(of(i).map((x) => x.nsPerPacket)).toFixed(0)} |`,
      );
    }
    say("");
    say("medians of per-round values and of per-round ratios");
    say(
      `passlb / plain packet rate at the pod ${ratio(of(1), of(0), (x) => x.pps).toFixed(2)} (bound ≥ 0.9)`,
    );
    say(
      `passlb / plain packet rate through the LB host (counted at the node) ${ratio(of(3), of(2), (x) => x.pps).toFixed(2)}`,
    );
    say(
      `LB host CPU per packet (counted at the node − generator only): plain routing ${lbShare(2).toFixed(0)} ns, passlb ${lbShare(3).toFixed(0)} ns, passlb XDP ${lbShare(6).toFixed(0)} ns`,
    );
    const lbRatio = (i: number) =>
      benchMedian(
        of(i).map(
          (x, k) => (x.nsPerPacket - of(4)[k]!.nsPerPacket) / (of(2)[k]!.nsPerPacket - of(4)[k]!.nsPerPacket),
        ),
      );
    say(
      `LB host CPU per packet × plain routing (per-round ratios): nftables ${lbRatio(3).toFixed(2)}, XDP ${lbRatio(6).toFixed(2)}`,
    );
    say(
      `passlb XDP / plain packet rate at the pod ${ratio(of(5), of(0), (x) => x.pps).toFixed(2)}, through the LB host ${ratio(of(6), of(2), (x) => x.pps).toFixed(2)}; XDP / nftables through the LB host ${ratio(of(6), of(3), (x) => x.pps).toFixed(2)}`,
    );
    xdp(true);
    say(progRun(pin, state.stateDir, gatewayMac, clientMac, client.ipv4, vip));
  } finally {
    if (process.env.KEEP_LAB !== "1") await labDown(LAB, options);
    fast.undo();
  }
}

/** `bpftool prog run` over one 64-byte-payload UDP packet to the VIP and one to another
 * address, in the LB host's namespace (the ingress ifindex is plbc0's). A test run keeps the
 * program's writes between repeats, so the TTL falls by one per repeat: 60 repeats from TTL
 * 64 are all forwarded; the median of 200 such runs is the figure. */
function progRun(pin: string, dir: string, dst: string, src: string, client: string, vip: string): string {
  const mac = (m: string) => m.split(":").map((h) => Number.parseInt(h, 16));
  const packet = (to: string) => {
    const ip = Buffer.alloc(20);
    ip[0] = 0x45;
    ip.writeUInt16BE(20 + 8 + 64, 2);
    ip[8] = 64;
    ip[9] = 17;
    Buffer.from(client.split(".").map(Number)).copy(ip, 12);
    Buffer.from(to.split(".").map(Number)).copy(ip, 16);
    const udp = Buffer.alloc(8 + 64, 0x2a);
    udp.writeUInt16BE(10000, 0);
    udp.writeUInt16BE(PORT, 2);
    udp.writeUInt16BE(8 + 64, 4);
    udp.writeUInt16BE(0, 6);
    return Buffer.concat([Buffer.from([...mac(dst), ...mac(src), 0x08, 0x00]), ip, udp]);
  };
  const ifindex = (
    JSON.parse(sh.exec("lb", ["ip", "-j", "link", "show", "plbc0"])) as { ifindex: number }[]
  )[0]!.ifindex;
  const lines: string[] = [];
  for (const [what, to] of [
    ["VIP packet (forwarded)", vip],
    ["not a VIP (passed)", "198.51.100.250"],
  ] as const) {
    const data = join(dir, "progrun.bin");
    const ctx = join(dir, "progrun.ctx");
    const p = packet(to);
    writeFileSync(data, p);
    const c = Buffer.alloc(24);
    c.writeUInt32LE(p.length, 4);
    c.writeUInt32LE(ifindex, 12);
    writeFileSync(ctx, c);
    const ns: number[] = [];
    let action = "";
    for (let i = 0; i < 200; i++) {
      const out = sh.exec("lb", [
        "bpftool",
        "prog",
        "run",
        "pinned",
        `${pin}/prog/passlb_xdp`,
        "data_in",
        data,
        "ctx_in",
        ctx,
        "repeat",
        "60",
      ]);
      const m = /Return value: (\d+), duration[^:]*: (\d+)ns/.exec(out);
      if (m) {
        action = m[1]!;
        ns.push(Number(m[2]));
      }
    }
    lines.push(
      `bpftool prog run, ${what}: XDP action ${action}, median ${benchMedian(ns)} ns per packet (200 runs × 60 repeats)`,
    );
  }
  return lines.join("\n");
}

await main();
