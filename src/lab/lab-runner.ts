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
import { spawn, spawnSync } from "node:child_process";
import {
  closeSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { stringify } from "yaml";
import { readManifests } from "../cluster/manifest-files.ts";
import { decodeDocuments } from "../k8s/decode.ts";
import { type LabHost, type LabLayout, labLayout, labPrefix, procSysScript } from "./lab-layout.ts";
import { labManifests } from "./lab-manifests.ts";
import { parseTopology, type Topology } from "./topology.ts";

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

export interface LabProcess {
  readonly role: "echo" | "agent" | "lb";
  readonly host: string;
  readonly pid: number;
  readonly log: string;
  /** what runs after `ip netns exec NS node` */
  readonly args: readonly string[];
}

export interface LabState {
  readonly name: string;
  readonly stateDir: string;
  readonly manifestsDir: string;
  readonly layout: LabLayout;
  readonly processes: readonly LabProcess[];
}

const READY_TIMEOUT_MS = 30_000;

export function defaultStateRoot(repoRoot: string): string {
  return process.getuid?.() === 0 ? "/run/passlb-lab" : join(repoRoot, ".passlb", "lab");
}

export function readTopologyFile(path: string): { topology: Topology; baseDir: string } {
  const read = parseTopology(readFileSync(path, "utf8"));
  if (!read.ok) throw new Error(`${path}: ${read.problems.join("; ")}`);
  return { topology: read.topology, baseDir: dirname(resolve(path)) };
}

/** Writes (or rewrites) the manifest folder the agents and the LB watch. */
export async function writeLabManifests(
  topology: Topology,
  baseDir: string,
  manifestsDir: string,
): Promise<LabLayout> {
  const layout = labLayout(topology);
  const paths = topology.services.map((p) => resolve(baseDir, p));
  const read = await readManifests(paths, async () => "");
  const keep = read.documents.filter((d) => {
    const kind = (d.value as { kind?: unknown } | null)?.kind;
    return kind === "Service" || kind === "PasslbConfig" || kind === "Namespace";
  });
  const decoded = decodeDocuments(keep);
  if (decoded.problems.length > 0 || read.problems.length > 0)
    throw new Error(
      `the services manifests have problems: ${JSON.stringify([...read.problems, ...decoded.problems])}`,
    );
  const generated = labManifests(layout, decoded.snapshot.services);
  mkdirSync(manifestsDir, { recursive: true });
  const yamlOf = (objs: readonly unknown[]) => objs.map((o) => stringify(o)).join("---\n");
  // Write to temporary names, then rename: a watcher never reads half a file.
  const files: [string, readonly unknown[]][] = [
    ["services.yaml", keep.map((d) => d.value)],
    ["nodes.yaml", generated.nodes],
    ["pods.yaml", generated.pods],
    ["endpointslices.yaml", generated.endpointSlices],
  ];
  for (const [file, objs] of files) {
    const tmp = join(manifestsDir, `.${file}.tmp`);
    writeFileSync(tmp, yamlOf(objs));
    spawnSync("mv", ["-f", tmp, join(manifestsDir, file)]);
  }
  return layout;
}

export async function labUp(topologyPath: string, options: LabOptions): Promise<LabState> {
  const log = options.log ?? (() => {});
  const { topology, baseDir } = readTopologyFile(topologyPath);
  await labDown(topology.name, options); // a leftover from a crash would clash
  const stateDir = join(options.stateRoot ?? defaultStateRoot(options.repoRoot), topology.name);
  const manifestsDir = join(stateDir, "manifests");
  mkdirSync(join(stateDir, "logs"), { recursive: true });
  const layout = await writeLabManifests(topology, baseDir, manifestsDir);
  log(`creating ${layout.pods.length + layout.nodes.length + layout.clients.length + 1} namespaces`);
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
  const processes: LabProcess[] = [];
  const state = (): LabState => ({ name: topology.name, stateDir, manifestsDir, layout, processes });
  const save = () => writeFileSync(join(stateDir, "state.json"), `${JSON.stringify(state(), null, 2)}\n`);
  const start = (role: LabProcess["role"], host: LabHost, args: readonly string[]) => {
    const logPath = join(stateDir, "logs", `${host.name}.${role}.log`);
    const fd = openSync(logPath, "a");
    const child = spawn("ip", ["netns", "exec", host.ns, process.execPath, ...args], {
      cwd: options.repoRoot,
      detached: true,
      stdio: ["ignore", fd, fd],
    });
    closeSync(fd);
    child.unref();
    if (child.pid === undefined) throw new Error(`could not start ${role} in ${host.ns}`);
    processes.push({ role, host: host.name, pid: child.pid, log: logPath, args });
    save();
    return logPath;
  };
  const echo = await compileLabScripts(options.repoRoot, stateDir);
  const echoLogs = layout.pods.map((p) => {
    const tcp = p.spec.ports.filter((x) => x.protocol === "TCP").map((x) => x.port);
    const udp = p.spec.ports.filter((x) => x.protocol === "UDP").map((x) => x.port);
    return start("echo", p, [
      ...echo.command("echo-server"),
      `--name=${p.name}`,
      `--node=${p.node}`,
      `--tcp=${tcp.join(",")}`,
      `--udp=${udp.join(",")}`,
    ]);
  });
  await waitFor("echo servers", () => echoLogs.every((l) => readText(l).includes(": ready,")), processes);
  log(`${layout.pods.length} echo servers ready`);
  if (options.agents ?? true) {
    for (const n of layout.nodes)
      start("agent", n, [
        "bin/passlb.js",
        "agent",
        `--node=${n.name}`,
        `--manifests=${manifestsDir}`,
        ...(options.agentArgs ?? []),
      ]);
    await waitFor(
      "agents",
      () => layout.nodes.every((n) => hasTable(n.ns, "inet passlb-agent") || hasListener(n.ns, 10256)),
      processes,
    );
    log(`${layout.nodes.length} agents running`);
  }
  if (options.lb ?? true) {
    start("lb", layout.lb, ["bin/passlb.js", "lb", "-f", manifestsDir, ...(options.lbArgs ?? [])]);
    await waitFor("the LB", () => hasAnyTable(layout.lb.ns), processes);
    log("LB running");
  }
  save();
  return state();
}

/**
 * Whether this build's `passlb lb` runs the nftables data plane: starts it in a throwaway
 * namespace on an empty manifest folder and waits (at most 10 s) until it either programs
 * a table (yes) or exits (no: its message is the reason). Returns the reason, or undefined.
 */
export async function nftablesLbUnavailable(repoRoot: string): Promise<string | undefined> {
  const ns = `plbprobe${process.pid}`;
  const dir = mkdtempSync(join(tmpdir(), "plb-lbprobe-"));
  spawnSync("ip", ["netns", "del", ns]);
  if (spawnSync("ip", ["netns", "add", ns]).status !== 0) return "cannot create a network namespace";
  let stderr = "";
  const child = spawn(
    "ip",
    ["netns", "exec", ns, process.execPath, "bin/passlb.js", "lb", "--dataplane=nftables", "-f", dir],
    { cwd: repoRoot, stdio: ["ignore", "ignore", "pipe"] },
  );
  child.stderr.setEncoding("utf8").on("data", (d: string) => {
    stderr += d;
  });
  let exited = false;
  child.on("exit", () => {
    exited = true;
  });
  try {
    const deadline = Date.now() + 10_000;
    while (Date.now() < deadline) {
      if (exited) return `passlb lb --dataplane nftables exits here: ${tail(stderr) || "no message"}`;
      if (hasAnyTable(ns)) return undefined;
      await sleep(100);
    }
    return "passlb lb --dataplane nftables programmed no table within 10 s";
  } finally {
    if (!exited && child.pid !== undefined) signal(child.pid, "SIGKILL");
    spawnSync("ip", ["netns", "del", ns]);
    rmSync(dir, { recursive: true, force: true });
  }
}

export type LabScript = "echo-server" | "lab-client";

/**
 * The lab's own scripts (src/lab/echo-server.ts, lab-client.ts) as plain JavaScript in the
 * state directory: a dozen pods start in well under a second instead of paying tsx's
 * start-up each. They import only Node's built-ins, so a bare transform (esbuild, which
 * tsx already brings) is enough; without esbuild they run through tsx.
 */
export async function compileLabScripts(
  repoRoot: string,
  stateDir: string,
): Promise<{ command: (script: LabScript) => string[] }> {
  const outDir = join(stateDir, "bin");
  mkdirSync(outDir, { recursive: true });
  let transform: ((code: string) => string) | undefined;
  try {
    const esbuild = await import("esbuild");
    transform = (code) => esbuild.transformSync(code, { loader: "ts", format: "esm", target: "node20" }).code;
  } catch {
    transform = undefined;
  }
  const scripts: LabScript[] = ["echo-server", "lab-client"];
  if (transform)
    for (const s of scripts)
      writeFileSync(
        join(outDir, `${s}.mjs`),
        transform(readFileSync(join(repoRoot, "src", "lab", `${s}.ts`), "utf8")),
      );
  return {
    command: (script) =>
      transform
        ? [join(outDir, `${script}.mjs`)]
        : ["--import", "tsx", join(repoRoot, "src", "lab", `${script}.ts`)],
  };
}

/**
 * Stops one of the lab's processes (SIGTERM, then SIGKILL after 3 s) and, unless `stopOnly`,
 * starts it again with the same arguments. Returns the process as it is now.
 */
export async function labRestart(
  state: LabState,
  role: LabProcess["role"],
  host: string,
  options: { stopOnly?: boolean; repoRoot: string },
): Promise<LabProcess> {
  const index = state.processes.findIndex((p) => p.role === role && p.host === host);
  const old = state.processes[index];
  if (!old) throw new Error(`lab ${state.name}: no ${role} process in ${host}`);
  signal(old.pid, "SIGTERM");
  const deadline = Date.now() + 3000;
  while (alive(old.pid) && Date.now() < deadline) await sleep(20);
  if (alive(old.pid)) signal(old.pid, "SIGKILL");
  if (options.stopOnly) return old;
  const ns = `${state.layout.prefix}${host}`;
  const fd = openSync(old.log, "a");
  const child = spawn("ip", ["netns", "exec", ns, process.execPath, ...old.args], {
    cwd: options.repoRoot,
    detached: true,
    stdio: ["ignore", fd, fd],
  });
  closeSync(fd);
  child.unref();
  if (child.pid === undefined) throw new Error(`could not restart ${role} in ${host}`);
  const next: LabProcess = { ...old, pid: child.pid };
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
  const pids = new Set<number>();
  for (const ns of namespaces) for (const pid of namespacePids(ns)) pids.add(pid);
  for (const pid of pids) signal(pid, "SIGTERM");
  const deadline = Date.now() + 3000;
  while ([...pids].some(alive) && Date.now() < deadline) await sleep(50);
  for (const pid of pids) if (alive(pid)) signal(pid, "SIGKILL");
  for (const ns of namespaces) run(["ip", "netns", "del", ns], true);
  rmSync(join(options.stateRoot ?? defaultStateRoot(options.repoRoot), name), {
    recursive: true,
    force: true,
  });
  return { namespaces, stopped: pids.size };
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

function run(argv: readonly string[], tolerate = false): void {
  const [cmd, ...args] = argv;
  const r = spawnSync(cmd!, args, { encoding: "utf8" });
  if (!tolerate && r.status !== 0)
    throw new Error(`lab: ${argv.join(" ")} failed: ${(r.stderr || r.error?.message || "").trim()}`);
}

/** Runs consecutive `ip -n NS …` commands for one namespace as one `ip -batch`. */
function runBatched(commands: readonly (readonly string[])[]): void {
  let i = 0;
  while (i < commands.length) {
    const first = commands[i]!;
    const ns = first[0] === "ip" && first[1] === "-n" ? first[2] : undefined;
    let j = i + 1;
    if (ns !== undefined)
      while (
        j < commands.length &&
        commands[j]![0] === "ip" &&
        commands[j]![1] === "-n" &&
        commands[j]![2] === ns
      )
        j++;
    if (j - i === 1) run(first);
    else {
      const lines = commands.slice(i, j).map((c) => c.slice(3).join(" "));
      const r = spawnSync("ip", ["-n", ns!, "-batch", "-"], {
        input: `${lines.join("\n")}\n`,
        encoding: "utf8",
      });
      if (r.status !== 0) throw new Error(`lab: ip -n ${ns} -batch failed: ${(r.stderr || "").trim()}`);
    }
    i = j;
  }
}

function listNamespaces(): string[] {
  const r = spawnSync("ip", ["netns", "list"], { encoding: "utf8" });
  return (r.stdout ?? "")
    .split("\n")
    .map((l) => l.split(" ")[0] ?? "")
    .filter((n) => n !== "");
}

function namespacePids(ns: string): number[] {
  const r = spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" });
  return (r.stdout ?? "")
    .split("\n")
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 1);
}

function hasTable(ns: string, table: string): boolean {
  return spawnSync("ip", ["netns", "exec", ns, "nft", "list", "table", ...table.split(" ")]).status === 0;
}

function hasAnyTable(ns: string): boolean {
  const r = spawnSync("ip", ["netns", "exec", ns, "nft", "list", "tables"], { encoding: "utf8" });
  return (r.stdout ?? "").trim() !== "";
}

function hasListener(ns: string, port: number): boolean {
  const r = spawnSync("ip", ["netns", "exec", ns, "ss", "-Hltn", `sport = :${port}`], { encoding: "utf8" });
  return (r.stdout ?? "").trim() !== "";
}

async function waitFor(what: string, ready: () => boolean, processes: readonly LabProcess[]): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!ready()) {
    const dead = processes.find((p) => !alive(p.pid));
    if (dead) throw new Error(`lab: ${dead.role} in ${dead.host} exited: ${tail(readText(dead.log))}`);
    if (Date.now() > deadline) throw new Error(`lab: ${what} not ready after ${READY_TIMEOUT_MS} ms`);
    await sleep(100);
  }
}

function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

const tail = (text: string) => text.trim().split("\n").slice(-5).join(" | ");

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
