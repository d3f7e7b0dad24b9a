/**
 * Adapter: builds, inspects and removes a lab (docs/lab.md). `up` creates the namespaces
 * and links of `labLayout`, writes the manifest folder, starts an echo server in every pod,
 * an agent in every node and the LB in the LB namespace (each `ip netns exec … node …`,
 * detached, logging to the state directory), and waits until they are ready. `down`
 * needs no state: it finds every namespace named `plb-<lab>-*`, stops the processes inside
 * each (`ip netns pids`: only what runs in the lab's own namespaces), and deletes them —
 * idempotent, and complete after a crash. Nothing is created outside those namespaces
 * except the state directory.
 */
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { labBgpLbArgs } from "./lab-bgp.ts";
import { defaultStateRoot, readTopologyFile, writeLabManifests } from "./lab-files.ts";
import { startLabRouter } from "./lab-frr.ts";
import { procSysScript } from "./lab-host-commands.ts";
import { type LabHost, type LabLayout, labPrefix } from "./lab-layout.ts";
import { type LabLbHost, labPeers } from "./lab-lb-hosts.ts";
import { agentArgs, echoArgs, type LabProcess, removeNamespaces, startLabProcess } from "./lab-processes.ts";
import { compileLabScripts } from "./lab-scripts.ts";
import {
  alive,
  hasAnyTable,
  hasListener,
  hasTable,
  listNamespaces,
  readText,
  run,
  runBatched,
  signal,
  sleep,
  waitFor,
} from "./lab-shell.ts";

// The runner's public API stays importable from here (bench/, test/e2e/, src/cli/).
export { defaultStateRoot, readTopologyFile, writeLabManifests } from "./lab-files.ts";
export type { LabProcess } from "./lab-processes.ts";
export { compileLabScripts, type LabScript } from "./lab-scripts.ts";

export interface LabOptions {
  /** the passlb checkout (bin/passlb.js, src/lab/*.ts, node_modules/tsx) */
  readonly repoRoot: string;
  /** where state, logs and manifests go; default /run/passlb-lab (root) or .passlb/lab */
  readonly stateRoot?: string;
  /** start `passlb agent` in every node (default true) */
  readonly agents?: boolean;
  /** start `passlb lb` in the LB namespace (default true) */
  readonly lb?: boolean;
  /** extra arguments for every agent / the LB */
  readonly agentArgs?: readonly string[];
  readonly lbArgs?: readonly string[];
  readonly log?: (line: string) => void;
}

export interface LabState {
  readonly name: string;
  readonly stateDir: string;
  readonly manifestsDir: string;
  readonly layout: LabLayout;
  readonly processes: readonly LabProcess[];
}

export async function labUp(topologyPath: string, options: LabOptions): Promise<LabState> {
  const log = options.log ?? (() => {});
  const { topology, baseDir } = readTopologyFile(topologyPath);
  await labDown(topology.name, options); // a leftover from a crash would clash
  const stateDir = join(options.stateRoot ?? defaultStateRoot(options.repoRoot), topology.name);
  const manifestsDir = join(stateDir, "manifests");
  mkdirSync(join(stateDir, "logs"), { recursive: true });
  const layout = await writeLabManifests(topology, baseDir, manifestsDir);
  const hostCount = layout.pods.length + layout.nodes.length + layout.clients.length + layout.lbHosts.length;
  log(`creating ${hostCount + 1} namespaces`);
  runBatched(layout.commands);
  // bridged frames in the LB namespace must not pass through its IP hooks
  // (the settings exist only where br_netfilter is loaded: a failure is fine)
  for (const family of ["iptables", "ip6tables"])
    run(
      [
        "ip",
        "netns",
        "exec",
        layout.lb.ns,
        "sh",
        "-c",
        procSysScript([`net.bridge.bridge-nf-call-${family}=0`]),
      ],
      true,
    );
  // a BGP lab's router: FRR in the `lb` namespace (lab-frr.ts), up before the LB hosts peer
  await startLabRouter(stateDir, layout);
  const processes: LabProcess[] = [];
  const state = (): LabState => ({ name: topology.name, stateDir, manifestsDir, layout, processes });
  const save = () => writeFileSync(join(stateDir, "state.json"), `${JSON.stringify(state(), null, 2)}\n`);
  const start = (role: LabProcess["role"], host: LabHost, args: readonly string[]) => {
    const p = startLabProcess(stateDir, options.repoRoot, role, host, args);
    processes.push(p);
    save();
    return p.log;
  };
  const echo = await compileLabScripts(options.repoRoot, stateDir);
  const echoLogs = layout.pods.map((p) => start("echo", p, echoArgs(echo.command("echo-server"), p)));
  await waitFor("echo servers", () => echoLogs.every((l) => readText(l).includes(": ready,")), processes);
  log(`${layout.pods.length} echo servers ready`);
  if (options.agents ?? true) {
    for (const n of layout.nodes)
      start(
        "agent",
        n,
        agentArgs(n, manifestsDir, [...routedArgs(layout).agent, ...(options.agentArgs ?? [])]),
      );
    await waitFor(
      "agents",
      () => layout.nodes.every((n) => hasTable(n.ns, "inet passlb-agent") || hasListener(n.ns, 10256)),
      processes,
    );
    log(`${layout.nodes.length} agents running`);
  }
  if ((options.lb ?? true) && layout.lbHosts.length > 0) {
    // several LB hosts: each holds the VIPs it wins on the client segment (docs/vip-announce.md)
    for (const h of layout.lbHosts)
      start("lb", h, [
        "bin/passlb.js",
        "lb",
        "-f",
        manifestsDir,
        ...(layout.bgp
          ? labBgpLbArgs(h, layout.bgp, join(stateDir, `bird-${h.name}`))
          : labAnnounceArgs(layout, h, stateDir)),
        ...(options.lbArgs ?? []),
      ]);
    await waitFor("the LB hosts", () => layout.lbHosts.every((h) => hasAnyTable(h.ns)), processes);
    log(`${layout.lbHosts.length} LB hosts running`);
  } else if (options.lb ?? true) {
    start("lb", layout.lb, [
      "bin/passlb.js",
      "lb",
      "-f",
      manifestsDir,
      ...routedArgs(layout).lb,
      ...(options.lbArgs ?? []),
    ]);
    await waitFor("the LB", () => hasAnyTable(layout.lb.ns), processes);
    log("LB running");
  }
  save();
  return state();
}

/**
 * Stops one of the lab's processes (SIGTERM, then SIGKILL after 3 s) and, unless `stopOnly`,
 * starts it again with the same arguments (and environment, unless `env` replaces it).
 * Returns the process as it is now.
 */
export async function labRestart(
  state: LabState,
  role: LabProcess["role"],
  host: string,
  options: {
    stopOnly?: boolean;
    repoRoot: string;
    signal?: "SIGTERM" | "SIGKILL";
    /** the restarted process's added environment (default: the old one's) */
    env?: Readonly<Record<string, string>>;
  },
): Promise<LabProcess> {
  const index = state.processes.findIndex((p) => p.role === role && p.host === host);
  const old = state.processes[index];
  if (!old) throw new Error(`lab ${state.name}: no ${role} process in ${host}`);
  signal(old.pid, options.signal ?? "SIGTERM");
  const deadline = Date.now() + 3000;
  while (alive(old.pid) && Date.now() < deadline) await sleep(20);
  if (alive(old.pid)) signal(old.pid, "SIGKILL");
  if (options.stopOnly) return old;
  const ns = `${state.layout.prefix}${host}`;
  const env = options.env ?? old.env;
  const child = startLabProcess(state.stateDir, options.repoRoot, role, { name: host, ns }, old.args, env);
  const next: LabProcess = { ...child, role: old.role, host: old.host };
  (state.processes as LabProcess[])[index] = next;
  writeFileSync(join(state.stateDir, "state.json"), `${JSON.stringify(state, null, 2)}\n`);
  return next;
}

export interface DownReport {
  readonly namespaces: readonly string[];
  readonly stopped: number;
}

export async function labDown(name: string, options: LabOptions): Promise<DownReport> {
  const prefix = labPrefix(name);
  const namespaces = listNamespaces().filter((n) => n.startsWith(prefix));
  const stopped = await removeNamespaces(namespaces);
  rmSync(join(options.stateRoot ?? defaultStateRoot(options.repoRoot), name), {
    recursive: true,
    force: true,
  });
  return { namespaces, stopped };
}

export interface StatusReport {
  readonly name: string;
  readonly state: LabState | undefined;
  readonly namespaces: readonly string[];
  readonly alive: ReadonlyMap<number, boolean>;
}

export function labStatus(name: string, options: LabOptions): StatusReport {
  const file = join(options.stateRoot ?? defaultStateRoot(options.repoRoot), name, "state.json");
  const state = existsSync(file) ? (JSON.parse(readFileSync(file, "utf8")) as LabState) : undefined;
  const namespaces = listNamespaces().filter((n) => n.startsWith(labPrefix(name)));
  const aliveMap = new Map<number, boolean>();
  for (const p of state?.processes ?? []) aliveMap.set(p.pid, alive(p.pid));
  return { name, state, namespaces, alive: aliveMap };
}

/** Runs a command in a lab host's namespace; stdout and stderr are returned. */
export function labExec(
  name: string,
  host: string,
  argv: readonly string[],
  input?: string,
): { status: number; stdout: string; stderr: string } {
  const r = spawnSync("ip", ["netns", "exec", `${labPrefix(name)}${host}`, ...argv], {
    encoding: "utf8",
    maxBuffer: 64 * 1024 * 1024,
    ...(input === undefined ? {} : { input }),
  });
  return { status: r.status ?? 1, stdout: r.stdout ?? "", stderr: r.stderr ?? r.error?.message ?? "" };
}

/**
 * A lab with routed zones (docs/lab.md "Routed zones"): the LB encapsulates (VXLAN-GPE, the
 * one kind every kernel here has) to every node outside the node segment's /26 and /64, and
 * every agent decapsulates. Given first, so flags of the caller's (another `--encap`) win.
 */
export function routedArgs(layout: LabLayout): { lb: string[]; agent: string[] } {
  if (!layout.router) return { lb: [], agent: [] };
  return {
    lb: ["--forward=encap", "--encap=vxlan-gpe", "--direct=198.51.100.0/26", "--direct=fd00:198:51:100::/64"],
    agent: ["--decap=vxlan-gpe"],
  };
}

/**
 * The announcement flags of one LB host of a multi-LB lab: hold VIPs on its client-segment
 * interface, with every LB host as a peer (both families), keepalived's files in the lab's
 * state directory, and claim NAT (an agent may run there too).
 */
export function labAnnounceArgs(layout: LabLayout, host: LabLbHost, stateDir: string): string[] {
  return [
    "--dataplane=nftables",
    "--announce=l2",
    `--interface=${host.segmentInterface}`,
    `--host-name=${host.name}`,
    `--peers=${labPeers(layout.lbHosts)}`,
    // keepalived's files, one directory per LB host (they share the machine's file system)
    `--state-dir=${join(stateDir, `keepalived-${host.name}`)}`,
    "--claim-nat",
  ];
}
