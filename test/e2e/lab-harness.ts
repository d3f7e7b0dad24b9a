/**
 * What the end-to-end tests share: whether they can run (root, ip, nft), a lab built from
 * a fixture topology under a name of the test's own (removed in `t.after`, also when the
 * test fails), the VIPs the planner gave each Service, routing a VIP from the LB
 * namespace to chosen nodes, the node agents' DNAT rules, and the lab client.
 *
 * Agents: the lab runs `passlb agent --dataplane=nftables` in every node, which programs
 * the DNAT rules from the lab's manifest folder; the harness only waits for it to apply.
 */
import { spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import type { TestContext } from "node:test";
import { parse, stringify } from "yaml";
import { readManifests } from "../../src/cluster/manifest-files.ts";
import { decodeDocuments } from "../../src/k8s/decode.ts";
import type { Snapshot } from "../../src/k8s/snapshot.ts";
import {
  compileLabScripts,
  type LabProcess,
  type LabState,
  labDown,
  labRestart,
  labUp,
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

  constructor(state: LabState, topology: Topology, baseDir: string, clientCommand: string[]) {
    this.state = state;
    this.topology = topology;
    this.#baseDir = baseDir;
    this.#clientCommand = clientCommand;
  }

  host(name: string) {
    const l = this.state.layout;
    const h = [
      l.lb,
      ...(l.router ? [l.router] : []),
      ...(l.lbHosts ?? []),
      ...l.clients,
      ...l.nodes,
      ...l.pods,
    ].find((x) => x.name === name);
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

  /** Waits for every node's agent to bring its DNAT rules up to date with the manifest folder. */
  async syncAgents(): Promise<void> {
    await sleep(1500); // the agents' folder watch debounces, then applies
  }

  /** Rewrites the topology (pods' readiness, termination, …) and the manifests. */
  async update(change: (t: Topology) => Topology): Promise<void> {
    await this.write(change);
    await this.syncAgents();
  }

  /** As update, without waiting for the agents (a churn driver writes many times a second). */
  async write(change: (t: Topology) => Topology): Promise<void> {
    const next = change(structuredClone(this.topology));
    Object.assign(this, { topology: next });
    await writeLabManifests(next, this.#baseDir, this.state.manifestsDir);
  }

  /** Restarts (or only stops) the LB, a node's agent or a pod's echo server; SIGTERM first
   * unless told SIGKILL; `env` is added to the restarted process's environment. */
  restart(
    role: LabProcess["role"],
    host: string,
    stopOnly = false,
    signal: "SIGTERM" | "SIGKILL" = "SIGTERM",
    env?: Readonly<Record<string, string>>,
  ): Promise<LabProcess> {
    return labRestart(this.state, role, host, { repoRoot: REPO_ROOT, stopOnly, signal, ...(env && { env }) });
  }

  /** Runs a command in a lab host's namespace (`ip netns exec`); throws with its stderr. */
  exec(host: string, argv: readonly string[]): string {
    const r = spawnSync("ip", ["netns", "exec", this.host(host).ns, ...argv], { encoding: "utf8" });
    if (r.status !== 0) throw new Error(`${argv.join(" ")} in ${host}: ${r.stderr}`);
    return r.stdout;
  }

  /** Takes the link between the LB host's bridge and a node down (or up again). */
  link(node: string, up: boolean): void {
    const n = this.state.layout.nodes.find((x) => x.name === node);
    const r = spawnSync("ip", [
      "-n",
      n?.uplinkNs ?? this.state.layout.lb.ns,
      "link",
      "set",
      n?.veth ?? "",
      up ? "up" : "down",
    ]);
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
  options: { prefix: string; lb?: boolean; lbArgs?: readonly string[]; agentArgs?: readonly string[] },
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
  const labOptions = {
    repoRoot: REPO_ROOT,
    agents: true,
    lb: options.lb ?? false,
    agentArgs: ["--dataplane=nftables", "--sync-period=5", ...(options.agentArgs ?? [])],
    lbArgs: ["--dataplane=nftables", ...(options.lbArgs ?? [])],
  };
  let state: LabState | undefined;
  t.after(async () => {
    // PASSLB_KEEP_LAB=1 leaves the lab up for a look (then: passlb lab down -f …)
    if (process.env.PASSLB_KEEP_LAB === "1") return;
    // PASSLB_LAB_LOGS=<dir> keeps the processes' logs (<dir>/<lab>/…) after the lab is removed
    const keep = process.env.PASSLB_LAB_LOGS;
    if (keep && state) cpSync(join(state.stateDir, "logs"), join(keep, raw.name), { recursive: true });
    await labDown(raw.name, labOptions);
    rmSync(dir, { recursive: true, force: true });
  });
  state = await labUp(path, labOptions);
  const scripts = await compileLabScripts(REPO_ROOT, state.stateDir);
  const lab = new Lab(state, read.topology, dir, [process.execPath, ...scripts.command("lab-client")]);
  await lab.syncAgents();
  return lab;
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
