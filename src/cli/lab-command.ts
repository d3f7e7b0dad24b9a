/**
 * `passlb lab up|down|status|exec|route -f topology.yaml`: the network-namespace lab
 * (docs/lab.md). Needs root, `ip` and `nft`. `up` starts the agents and the LB only when
 * this build has those commands (`passlb agent`, `passlb lb`) and says so otherwise.
 */
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import {
  defaultStateRoot,
  type LabOptions,
  labDown,
  labExec,
  labStatus,
  labUp,
  readTopologyFile,
} from "../lab/lab-runner.ts";
import type { CliIo } from "./load-input.ts";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

interface CommonOptions {
  file?: string;
  name?: string;
  stateDir?: string;
}

export function registerLabCommand(program: Command, io: CliIo, setExitCode: (code: number) => void): void {
  const lab = program
    .command("lab")
    .description("a small datacenter in network namespaces: clients, an LB host, nodes and pods (root)");
  const common = (c: Command) =>
    c
      .option("-f, --file <topology.yaml>", "the lab's topology file")
      .option("--name <lab>", "the lab's name, instead of -f (down, status, exec, route)")
      .option("--state-dir <dir>", "state, logs and manifests (default /run/passlb-lab when root)");
  const fail = (e: unknown) => {
    io.stderr(`error: ${(e as Error).message}\n`);
    setExitCode(1);
  };
  const prepare = (o: CommonOptions, extra: Partial<LabOptions> = {}) => {
    if (process.getuid?.() !== 0) throw new Error("the lab needs root (network namespaces, nft)");
    if (!o.file && !o.name) throw new Error("pass -f topology.yaml or --name LAB");
    const name = o.name ?? readTopologyFile(o.file!).topology.name;
    const options: LabOptions = {
      repoRoot: REPO_ROOT,
      stateRoot: o.stateDir ?? defaultStateRoot(REPO_ROOT),
      log: (line) => io.stderr(`passlb lab: ${line}\n`),
      ...extra,
    };
    return { name, options };
  };

  common(lab.command("up"))
    .description("build the lab, start pods, agents and the LB")
    .option("--no-agents", "do not start passlb agent in the nodes")
    .option("--no-lb", "do not start passlb lb (the LB namespace only routes)")
    .action(async (o: CommonOptions & { agents: boolean; lb: boolean }) => {
      try {
        const { options } = prepare(o, {
          agents: o.agents,
          lb: o.lb,
          agentArgs: ["--dataplane=nftables"],
          lbArgs: ["--dataplane=nftables"],
        });
        if (!o.file) throw new Error("up needs -f topology.yaml");
        const state = await labUp(o.file, options);
        io.stdout(`lab ${state.name} is up; state in ${state.stateDir}\n`);
        io.stdout(statusText(state.name, options));
      } catch (e) {
        fail(e);
      }
    });

  common(lab.command("down"))
    .description("stop everything and delete the lab's namespaces (idempotent)")
    .action(async (o: CommonOptions) => {
      try {
        const { name, options } = prepare(o);
        const r = await labDown(name, options);
        io.stdout(`lab ${name}: removed ${r.namespaces.length} namespaces, stopped ${r.stopped} processes\n`);
      } catch (e) {
        fail(e);
      }
    });

  common(lab.command("status"))
    .description("hosts, addresses and whether each process is alive")
    .action((o: CommonOptions) => {
      try {
        const { name, options } = prepare(o);
        io.stdout(statusText(name, options));
      } catch (e) {
        fail(e);
      }
    });

  common(lab.command("exec"))
    .description("run a command in a lab host: passlb lab exec -f t.yaml client-a -- curl …")
    .argument("<host>", "a host name from the topology (client, lb, node or pod)")
    .argument("<command...>", "the command and its arguments (after --)")
    .action((host: string, argv: string[], o: CommonOptions) => {
      try {
        const { name } = prepare(o);
        const r = labExec(name, host, argv);
        io.stdout(r.stdout);
        io.stderr(r.stderr);
        setExitCode(r.status);
      } catch (e) {
        fail(e);
      }
    });

  common(lab.command("route"))
    .description("route a VIP from the LB namespace to node(s) directly (no LB data plane; ECMP for several)")
    .argument("<vip>", "the VIP")
    .argument("<nodes...>", "node names")
    .action((vip: string, nodes: string[], o: CommonOptions) => {
      try {
        const { name, options } = prepare(o);
        const status = labStatus(name, options);
        const layout = status.state?.layout;
        if (!layout) throw new Error(`lab ${name} is not up`);
        const v6 = vip.includes(":");
        const hops = nodes.map((n) => {
          const node = layout.nodes.find((x) => x.name === n);
          if (!node) throw new Error(`no node ${n} in lab ${name}`);
          return v6 ? node.ipv6 : node.ipv4;
        });
        const argv =
          hops.length === 1
            ? ["route", "replace", `${vip}/${v6 ? 128 : 32}`, "via", hops[0]!]
            : ["route", "replace", `${vip}/${v6 ? 128 : 32}`, ...hops.flatMap((h) => ["nexthop", "via", h])];
        const r = spawnSync("ip", ["-n", layout.lb.ns, ...argv], { encoding: "utf8" });
        if (r.status !== 0) throw new Error(r.stderr.trim());
        io.stdout(`${vip} → ${nodes.join(", ")}\n`);
      } catch (e) {
        fail(e);
      }
    });
}

function statusText(name: string, options: LabOptions): string {
  const s = labStatus(name, options);
  if (!s.state) return `lab ${s.name}: not up (${s.namespaces.length} leftover namespaces)\n`;
  const rows: string[] = [];
  const l = s.state.layout;
  for (const h of [l.lb, ...(l.lbHosts ?? []), ...l.clients, ...l.nodes, ...l.pods]) {
    const procs = s.state.processes.filter((p) => p.host === h.name);
    const present = s.namespaces.includes(h.ns) ? "" : " (namespace missing)";
    const ps = procs.map((p) => `${p.role} ${p.pid} ${s.alive.get(p.pid) ? "alive" : "dead"}`).join(", ");
    rows.push(
      `${h.role.padEnd(6)} ${h.name.padEnd(12)} ${(h.zone ?? "").padEnd(8)} ${h.ipv4.padEnd(15)} ${h.ipv6.padEnd(22)} ${ps}${present}`,
    );
  }
  return `lab ${s.name} (manifests ${s.state.manifestsDir})\n${rows.join("\n")}\n`;
}
