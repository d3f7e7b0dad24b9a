/**
 * Cost as the work grows (issue 17 §2, first two rows), in the network-namespace lab
 * (bench/lab/scale-topology.yaml: client → LB host → node-1 → pod), as curves: the
 * new-connection rate to ONE Service (bench/lab/scale-services.yaml, IPv6, eTP Cluster)
 *   - services axis: with 1, 1,000 and 10,000 Services in the table (`passlb lb` and the
 *     node's agent load them all; the other Services are IPv6 eTP Cluster Services with an
 *     endpoint on the same pod, each its own VIP, dispatch entry and listener chain);
 *   - nodes axis: with 10, 100 and 1,000 nodes behind the VIP, so Maglev M grows (1,021,
 *     16,381, 131,071). The lab cannot run 1,000 node namespaces: every extra Node object
 *     gets an IPv6 address of its own on node-1's eth0 (`fd00:198:51:100::1:<i>`), so every
 *     Maglev slot leads to a real node — the one agent DNATs whatever arrives — and every
 *     health check is honest: the LB probes each address's `:10256/healthz`, which node-1's
 *     agent answers on every address (`--healthz-bind-address=:10256`). The LB host holds
 *     permanent neighbour entries for those addresses (the kernel's neighbour table limit,
 *     gc_thresh3 = 1,024, counts every namespace's entries on this shared machine).
 * Before each measurement the bench waits until `passlb lb` and the agent are idle (< 0.05 s
 * CPU in a second, at most 20 s: the change's sync, the first drift check's full listing
 * and the new nodes' first probes are over), so a point measures the steady state.
 * Each point is a ratio to the smallest size of its axis measured in the same round; rounds
 * go up and down the sizes alternately; medians of per-round ratios are printed. For each
 * point the M of the measured listener's table (read from the LB's rule), the load average
 * and the CPU seconds `passlb lb` and the agent used during the measurement are printed.
 * Connection rate: wrk, `Connection: close`, `--connections` (32) over 2 threads, against an
 * HAProxy HTTP responder in the pod. The client runs with `net.ipv4.tcp_timestamps=2`
 * (lab-bench-setup.ts clientSysctls: without it, 20–30 % of SYNs meet TIME_WAIT and
 * are retransmitted, whatever the path). Bounds: ≥ 0.95× at 10,000 Services and at 1,000
 * nodes.
 *
 *   node --import tsx bench/lab-scale.bench.ts [--axis services|nodes|both] [--seconds 3] [--rounds 3] [--connections 32]
 *
 * Needs root, ip, nft; installs wrk and haproxy with apt-get when missing (and says so).
 * Traffic goes only to documentation/ULA addresses inside the lab's own namespaces.
 */
import { readFileSync, writeFileSync } from "node:fs";
import { loadavg } from "node:os";
import { join, resolve } from "node:path";
import { parseAllDocuments } from "yaml";
import type { Service } from "../src/k8s/objects.ts";
import { writeManifestFiles } from "../src/lab/lab-files.ts";
import { labManifests } from "../src/lab/lab-manifests.ts";
import { type LabState, labDown, labUp } from "../src/lab/lab-runner.ts";
import { ZONE_LABEL } from "../src/plan/node-facts.ts";
import {
  benchArg,
  benchLabOptions,
  benchMedian,
  benchPrerequisites,
  clientSysctls,
  labHostShell,
  podHttpResponderDualStack,
  shortConnectionSysctls,
  wrkConnectionRate,
} from "./lab-bench-setup.ts";

const SECONDS = Math.min(benchArg("seconds", 3), 30);
const ROUNDS = Math.min(benchArg("rounds", 3), 10);
const CONNECTIONS = Math.min(benchArg("connections", 32), 256);
const AXIS = process.argv[process.argv.indexOf("--axis") + 1] ?? "both";
const REPO = resolve(import.meta.dirname, "..");
const FIXTURES = join(REPO, "bench/lab");
const LAB = "scale";
const VIP = "fd00:10::1";
const MEASURED_CHAIN = "svc_bench.measured_tcp80_6";
const SERVICE_SIZES = [1, 1000, 10000];
const NODE_SIZES = [10, 100, 1000];
const sh = labHostShell(LAB);
const say = (line: string) => process.stdout.write(`${line}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** node-1's extra address i (1-based): fd00:198:51:100::1:<i hex> */
const extraNodeAddress = (i: number) => `fd00:198:51:100::1:${i.toString(16)}`;

function baseDocs(): unknown[] {
  return parseAllDocuments(readFileSync(join(FIXTURES, "scale-services.yaml"), "utf8")).map((d) => d.toJS());
}

/** Service number i (1-based) besides the measured one: same shape, its own VIP from the pool. */
function fillerService(i: number): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: `filler-${String(i).padStart(5, "0")}`, namespace: "bench" },
    spec: {
      type: "LoadBalancer",
      externalTrafficPolicy: "Cluster",
      ipFamilies: ["IPv6"],
      ipFamilyPolicy: "SingleStack",
      allocateLoadBalancerNodePorts: false,
      selector: { app: "scale" },
      ports: [{ name: "http", port: 80, targetPort: 8080, protocol: "TCP" }],
    },
  } as Service;
}

function extraNode(i: number): object {
  const name = `scale-node-${String(i).padStart(4, "0")}`;
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels: { [ZONE_LABEL]: "zone-a", "kubernetes.io/hostname": name } },
    spec: {},
    status: {
      addresses: [
        { type: "InternalIP", address: extraNodeAddress(i) },
        { type: "Hostname", address: name },
      ],
      conditions: [{ type: "Ready", status: "True" }],
    },
  };
}

/** Rewrites the folder the LB and the agent watch: `services` Services, `nodes` nodes. */
function writePoint(state: LabState, services: number, nodes: number): void {
  const docs = baseDocs();
  const measured = docs.filter((d) => (d as { kind?: string }).kind === "Service") as Service[];
  const svcs = [...measured, ...Array.from({ length: services - 1 }, (_, i) => fillerService(i + 1))];
  const gen = labManifests(state.layout, svcs);
  const config = docs.filter((d) => (d as { kind?: string }).kind !== "Service");
  writeManifestFiles(state.manifestsDir, [
    ["services.yaml", [...config, ...svcs]],
    ["nodes.yaml", [...gen.nodes, ...Array.from({ length: nodes - 1 }, (_, i) => extraNode(i + 1))]],
    ["pods.yaml", gen.pods],
    ["endpointslices.yaml", gen.endpointSlices],
  ]);
}

function mapSize(host: string, table: string, map: string, kind: "map" | "set" = "map"): number {
  const out = sh.exec(host, ["nft", "-j", "list", kind, "inet", table, map]);
  const j = JSON.parse(out) as { nftables: { map?: { elem?: unknown[] }; set?: { elem?: unknown[] } }[] };
  const o = j.nftables.find((x) => x[kind]);
  return o?.[kind]?.elem?.length ?? 0;
}

/** Waits until the LB dispatches `services` VIPs over `nodes` next hops and the agent has
 * `services` listeners, none of them without endpoints; returns the seconds it took. */
async function converge(services: number, nodes: number): Promise<number> {
  const t0 = Date.now();
  let seen = "";
  while (Date.now() - t0 < 300_000) {
    try {
      const d = mapSize("lb", "passlb", "dispatch6");
      const n = mapSize("lb", "passlb", "nexthops6");
      const a = mapSize("node-1", "passlb-agent", "listeners6");
      // the agent may read the new Services before the new EndpointSlices (four files):
      // converged only when no listener is left without endpoints
      const e = mapSize("node-1", "passlb-agent", "no-endpoints6", "set");
      seen = `dispatch6 ${d}, nexthops6 ${n}, agent listeners6 ${a}, no-endpoints6 ${e}`;
      if (d === services && n === nodes && a === services && e === 0) return (Date.now() - t0) / 1000;
    } catch (e) {
      seen = String(e);
    }
    await sleep(500);
  }
  throw new Error(`no convergence on ${services} Services × ${nodes} nodes in 300 s (${seen})`);
}

function tableSize(): number {
  const out = sh.exec("lb", ["nft", "list", "chain", "inet", "passlb", MEASURED_CHAIN]);
  return Number(/ mod (\d+) /.exec(out)?.[1] ?? "0");
}

/** CPU seconds (user + system) of a process so far. */
function cpuSeconds(pid: number): number {
  const f = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1]!.split(" ");
  return (Number(f[11]) + Number(f[12])) / 100;
}

/** Waits until the processes used less than 0.05 s CPU in the last second (the sync after a
 * change, the first drift check's full listing, the first probes are over), at most 20 s
 * (the prober of 1,000 nodes keeps `passlb lb` above that: its steady state);
 * returns the seconds waited. */
async function quiet(pids: readonly number[]): Promise<number> {
  const t0 = Date.now();
  let last = pids.map(cpuSeconds);
  while (Date.now() - t0 < 20_000) {
    await sleep(1000);
    const now = pids.map(cpuSeconds);
    if (now.every((c, i) => c - last[i]! < 0.05)) break;
    last = now;
  }
  return (Date.now() - t0) / 1000;
}

interface Point {
  readonly label: string;
  readonly services: number;
  readonly nodes: number;
}

async function main(): Promise<void> {
  if (!benchPrerequisites("lab-scale", { ip: "iproute2", nft: "nftables", wrk: "wrk", haproxy: "haproxy" }))
    return;
  const options = benchLabOptions(REPO, ["--healthz-bind-address=:10256"]);
  try {
    const state = await labUp(join(FIXTURES, "scale-topology.yaml"), options);
    for (const host of ["client", "lb", "node-1", "server"])
      sh.exec(host, ["sh", "-c", shortConnectionSysctls()]);
    sh.exec("client", ["sh", "-c", clientSysctls()]);
    const logs = join(state.stateDir, "logs");
    const podHttp = join(state.stateDir, "pod-http.cfg");
    writeFileSync(podHttp, podHttpResponderDualStack());
    sh.background("server", ["haproxy", "-db", "-f", podHttp], logs);
    await sh.waitListening("server", 8080);
    // node-1's extra addresses, and the LB host's permanent neighbour entries for them
    const maxNodes = Math.max(...NODE_SIZES);
    const mac = (
      JSON.parse(sh.exec("node-1", ["ip", "-j", "link", "show", "eth0"])) as { address: string }[]
    )[0]!.address;
    const extra = Array.from({ length: maxNodes - 1 }, (_, i) => extraNodeAddress(i + 1));
    sh.exec("node-1", ["ip", "-batch", "-"], extra.map((a) => `addr add ${a}/128 dev eth0 nodad\n`).join(""));
    sh.exec(
      "lb",
      ["ip", "-batch", "-"],
      extra.map((a) => `neigh replace ${a} lladdr ${mac} dev plbnodes nud permanent\n`).join(""),
    );
    const pid = (role: string) => state.processes.find((p) => p.role === role)!.pid;
    const axes: { name: string; points: Point[]; bound: number }[] = [];
    if (AXIS !== "nodes")
      axes.push({
        name: "Services in the table",
        points: SERVICE_SIZES.map((s) => ({ label: `${s} Services`, services: s, nodes: 1 })),
        bound: 0.95,
      });
    if (AXIS !== "services")
      axes.push({
        name: "nodes behind one VIP",
        points: NODE_SIZES.map((n) => ({ label: `${n} nodes`, services: 1, nodes: n })),
        bound: 0.95,
      });
    say(
      `lab-scale: ${ROUNDS} rounds, wrk ${CONNECTIONS} connections ${SECONDS} s, Connection: close, client tcp_timestamps=2, IPv6 VIP ${VIP}`,
    );
    for (const axis of axes) {
      const rates = new Map<string, number[]>(axis.points.map((p) => [p.label, []]));
      const info = new Map<string, string>();
      for (let r = 0; r < ROUNDS; r++) {
        const order = r % 2 === 0 ? axis.points : [...axis.points].reverse();
        for (const p of order) {
          writePoint(state, p.services, p.nodes);
          const took = await converge(p.services, p.nodes);
          const settled = await quiet([pid("lb"), pid("agent")]);
          const m = tableSize();
          const load = loadavg()[0]!.toFixed(1);
          const cpu0 = [cpuSeconds(pid("lb")), cpuSeconds(pid("agent"))];
          const w = wrkConnectionRate(sh.exec, "client", `http://[${VIP}]:80/`, {
            threads: 2,
            connections: CONNECTIONS,
            seconds: SECONDS,
          });
          const cpu = [cpuSeconds(pid("lb")) - cpu0[0]!, cpuSeconds(pid("agent")) - cpu0[1]!];
          rates.get(p.label)!.push(w.rate);
          info.set(p.label, `M ${m}`);
          say(
            `  round ${r + 1} ${p.label}: ${w.rate.toFixed(0)} conn/s (M ${m}, converged in ${took.toFixed(1)} s, quiet after ${settled.toFixed(1)} s more, load ${load}, passlb lb ${cpu[0]!.toFixed(2)} s / agent ${cpu[1]!.toFixed(2)} s CPU${w.errors ? `, socket errors: ${w.errors}` : ""})`,
          );
        }
      }
      const base = rates.get(axis.points[0]!.label)!;
      const ratio = (xs: number[]) => benchMedian(xs.map((x, i) => x / base[i]!));
      say("");
      say(`${axis.name}:`);
      say(`| point | Maglev M | connections/s | × ${axis.points[0]!.label} |`);
      say("| --- | ---: | ---: | ---: |");
      for (const p of axis.points) {
        const xs = rates.get(p.label)!;
        say(
          `| ${p.label} | ${info.get(p.label)?.slice(2)} | ${benchMedian(xs).toFixed(0)} | ${ratio(xs).toFixed(2)} |`,
        );
      }
      const last = axis.points[axis.points.length - 1]!;
      say(
        `${axis.name}: ${last.label} / ${axis.points[0]!.label} ${ratio(rates.get(last.label)!).toFixed(2)} (bound ≥ ${axis.bound}; medians of per-round ratios)`,
      );
      say("");
    }
  } finally {
    if (process.env.KEEP_LAB !== "1") await labDown(LAB, options);
  }
}

await main();
