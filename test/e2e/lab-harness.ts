/**
 * What the end-to-end tests share: whether they can run (root, ip, nft), a lab built from
 * a fixture topology under a name of the test's own (removed in `t.after`, also when the
 * test fails), the VIPs the planner gave each Service, routing a VIP from the LB
 * namespace to chosen nodes, the node agents' DNAT rules, and the lab client.
 *
 * Agents: when this build's `passlb agent` programs the DNAT rules itself (it has
 * `--dataplane`), the lab runs it in every node and the harness waits for its table;
 * otherwise the harness drives the same AgentDataplane (renderer + nft adapter) for each
 * node from the lab's manifest folder, so the packet path under test is the same.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import type { TestContext } from "node:test";
import { parse, stringify } from "yaml";
import { buildProgram } from "../../src/cli/program.ts";
import { readManifests } from "../../src/cluster/manifest-files.ts";
import { AgentDataplane } from "../../src/dataplane/agent-dataplane.ts";
import { agentNft } from "../../src/dataplane/agent-nft.ts";
import { decodeDocuments } from "../../src/k8s/decode.ts";
import type { Snapshot } from "../../src/k8s/snapshot.ts";
import {
  compileLabScripts,
  type LabProcess,
  type LabState,
  labDown,
  labRestart,
  labUp,
  nftablesLbUnavailable,
  writeLabManifests,
} from "../../src/lab/lab-runner.ts";
import { parseTopology, type Topology } from "../../src/lab/topology.ts";
import { planSnapshot } from "../../src/plan/planner.ts";

export const REPO_ROOT = resolve(import.meta.dirname, "../..");

export function labUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root and nft: not running as root";
  for (const cmd of ["nft", "ip"])
    if (spawnSync(cmd, ["--version"]).error) return `needs root and nft: ${cmd} is not installed`;
  const probe = `plbprobe${process.pid}`;
  if (spawnSync("ip", ["netns", "add", probe]).status !== 0)
    return "needs network namespaces: ip netns add failed";
  spawnSync("ip", ["netns", "del", probe]);
  return undefined;
}

/** Whether this build's `passlb agent` programs DNAT itself. */
export function agentHasDataplane(): boolean {
  const agent = commands().find((c) => c.name() === "agent");
  return agent?.options.find((o) => o.long === "--dataplane")?.description.includes("nftables") ?? false;
}

function commands() {
  const program = buildProgram({ stdout: () => {}, stderr: () => {}, readStdin: async () => "" }, () => {});
  return program.commands;
}

/** Why the LB-path tests cannot run in this build, if they cannot. */
export async function lbUnavailable(): Promise<string | undefined> {
  if (!agentHasDataplane()) return "this build's `passlb agent` has no --dataplane nftables (node DNAT)";
  return nftablesLbUnavailable(REPO_ROOT);
}

/** Whether `passlb lb` probes node health: it then has an option about it (`--no-probe`). */
export function lbProbesHealth(): boolean {
  const lb = commands().find((c) => c.name() === "lb");
  return lb?.options.some((o) => /health|probe/.test(o.long ?? "")) ?? false;
}

export interface ClientResult {
  readonly ok: number;
  readonly failed: number;
  readonly byPod: Record<string, number>;
  readonly byNode: Record<string, number>;
  readonly clients: Record<string, number>;
  readonly errors: Record<string, number>;
}

export class Lab {
  readonly state: LabState;
  readonly topology: Topology;
  readonly #baseDir: string;
  readonly #clientCommand: string[];
  readonly #agents: Map<string, AgentDataplane> | undefined;

  constructor(
    state: LabState,
    topology: Topology,
    baseDir: string,
    clientCommand: string[],
    agents: Map<string, AgentDataplane> | undefined,
  ) {
    this.state = state;
    this.topology = topology;
    this.#baseDir = baseDir;
    this.#clientCommand = clientCommand;
    this.#agents = agents;
  }

  host(name: string) {
    const l = this.state.layout;
    const h = [l.lb, ...(l.lbHosts ?? []), ...l.clients, ...l.nodes, ...l.pods].find((x) => x.name === name);
    if (!h) throw new Error(`no host ${name}`);
    return h;
  }

  async snapshot(): Promise<Snapshot> {
    const read = await readManifests([this.state.manifestsDir], async () => "");
    return decodeDocuments(read.documents).snapshot;
  }

  /** The VIP of a Service (`namespace/name`) for a family, as the planner assigns it. */
  async vip(service: string, family: "IPv4" | "IPv6" = "IPv4"): Promise<string> {
    const plan = planSnapshot(await this.snapshot()).plans.find((p) => p.service === service);
    const vip = plan?.vips.find((v) => v.family === family)?.address;
    if (!vip) throw new Error(`${service} has no ${family} VIP`);
    return vip;
  }

  /** Routes a VIP from the LB namespace to these nodes (ECMP when several). */
  route(vip: string, nodes: readonly string[]): void {
    const v6 = vip.includes(":");
    const hops = nodes.map((n) => (v6 ? this.host(n).ipv6 : this.host(n).ipv4));
    const argv =
      hops.length === 1
        ? ["route", "replace", `${vip}/${v6 ? 128 : 32}`, "via", hops[0]!]
        : ["route", "replace", `${vip}/${v6 ? 128 : 32}`, ...hops.flatMap((h) => ["nexthop", "via", h])];
    const r = spawnSync("ip", ["-n", this.state.layout.lb.ns, ...argv], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`route ${vip}: ${r.stderr}`);
  }

  /** Brings every node's DNAT rules up to date with the manifest folder. */
  async syncAgents(): Promise<void> {
    if (this.#agents) {
      const snap = await this.snapshot();
      for (const a of this.#agents.values()) await a.update(snap);
      return;
    }
    await sleep(1500); // real agents: the folder watch debounces, then applies
  }

  /** Rewrites the topology (pods' readiness, termination, …) and the manifests. */
  async update(change: (t: Topology) => Topology): Promise<void> {
    const next = change(structuredClone(this.topology));
    Object.assign(this, { topology: next });
    await writeLabManifests(next, this.#baseDir, this.state.manifestsDir);
    await this.syncAgents();
  }

  /** Restarts (or only stops) the LB or a node's agent. */
  restart(role: LabProcess["role"], host: string, stopOnly = false): Promise<LabProcess> {
    return labRestart(this.state, role, host, { repoRoot: REPO_ROOT, stopOnly });
  }

  /** Takes the link between the LB host's bridge and a node down (or up again). */
  link(node: string, up: boolean): void {
    const i = this.state.layout.nodes.findIndex((n) => n.name === node);
    const r = spawnSync("ip", ["-n", this.state.layout.lb.ns, "link", "set", `plbn${i}`, up ? "up" : "down"]);
    if (r.status !== 0) throw new Error(`link ${node}: ${r.stderr}`);
  }

  /** Runs the lab client in a host; resolves with its JSON report. */
  client(host: string, args: readonly string[]): Promise<ClientResult & Record<string, unknown>> {
    return new Promise((resolvePromise, reject) => {
      const child = spawn("ip", ["netns", "exec", this.host(host).ns, ...this.#clientCommand, ...args], {
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      let err = "";
      child.stdout.setEncoding("utf8").on("data", (d: string) => {
        out += d;
      });
      child.stderr.setEncoding("utf8").on("data", (d: string) => {
        err += d;
      });
      child.on("close", (code) => {
        if (code !== 0) return reject(new Error(`lab client failed (${code}): ${err}`));
        resolvePromise(JSON.parse(out));
      });
    });
  }
}

/**
 * Builds the lab of a fixture topology under the name `<prefix><pid>` and removes it when
 * the test ends. The topology is copied with absolute service paths.
 */
export async function startLab(
  t: TestContext,
  fixture: string,
  options: { prefix: string; lb?: boolean },
): Promise<Lab> {
  const fixturePath = resolve(REPO_ROOT, fixture);
  const raw = parse(readFileSync(fixturePath, "utf8")) as { name: string; services: string[] };
  raw.name = `${options.prefix}${process.pid % 100000}`.slice(0, 8);
  raw.services = raw.services.map((s) => resolve(dirname(fixturePath), s));
  const dir = mkdtempSync(join(tmpdir(), "plb-e2e-"));
  const path = join(dir, "topology.yaml");
  writeFileSync(path, stringify(raw));
  const read = parseTopology(readFileSync(path, "utf8"));
  if (!read.ok) throw new Error(read.problems.join("; "));
  const realAgents = agentHasDataplane();
  const labOptions = {
    repoRoot: REPO_ROOT,
    agents: realAgents,
    lb: options.lb ?? false,
    agentArgs: realAgents ? ["--dataplane=nftables", "--sync-period=5"] : [],
    lbArgs: ["--dataplane=nftables"],
  };
  t.after(async () => {
    // PASSLB_KEEP_LAB=1 leaves the lab up for a look (then: passlb lab down -f …)
    if (process.env.PASSLB_KEEP_LAB === "1") return;
    await labDown(raw.name, labOptions);
    rmSync(dir, { recursive: true, force: true });
  });
  const state = await labUp(path, labOptions);
  const scripts = await compileLabScripts(REPO_ROOT, state.stateDir);
  let agents: Map<string, AgentDataplane> | undefined;
  if (!realAgents) {
    agents = new Map();
    for (const n of state.layout.nodes)
      agents.set(
        n.name,
        new AgentDataplane({
          node: n.name,
          nft: agentNft(["ip", "netns", "exec", n.ns, "nft"]),
          log: () => {},
        }),
      );
  }
  const lab = new Lab(
    state,
    read.topology,
    dir,
    [process.execPath, ...scripts.command("lab-client")],
    agents,
  );
  await lab.syncAgents();
  return lab;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
