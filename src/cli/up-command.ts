/**
 * `passlb up [-f DIR]`: the quickstart. Runs a folder of manifests (by default the bundled
 * examples/quickstart) on this machine — echo pods, node agents, health probes and the
 * userspace LB, all on 127.0.0.0/8 after the loopback rewrite — prints what runs and how to
 * try it, then a live view until Ctrl-C (or `--duration`, or `--once`). A second instance
 * finds the first through the control port and says so. docs/quickstart.md.
 *
 * `--dataplane nftables` (root, nft, ip) runs the same folder on the kernel data plane in
 * the network-namespace lab instead (up-lab.ts); `auto` picks userspace here and says why.
 */

import { fileURLToPath } from "node:url";
import type { Command } from "commander";
import type { KubeEnv } from "../cluster/kube-config.ts";
import { chooseDataplane, type DataplaneRequest } from "../lb-host/choose-dataplane.ts";
import {
  describeTcpPlumbing,
  parseTcpPlumbing,
  type TcpPlumbingChoice,
} from "../lb-host/userspace/tcp-plumbing.ts";
import { ControlServer, DEFAULT_CONTROL_PORT } from "../quickstart/control-server.ts";
import { renderLiveLines, renderLiveView } from "../quickstart/live-view.ts";
import { QuickstartRun } from "../quickstart/quickstart-run.ts";
import { tryLines } from "../quickstart/try-lines.ts";
import type { CliIo } from "./load-input.ts";
import { addObservabilityOptions, type ObservabilityFlags, startObservability } from "./observability.ts";
import { runUpLab, type UpLabOptions } from "./up-lab.ts";
import { runViewLoop } from "./up-view-loop.ts";

/** What only the composition root knows about the host and the process. */
export interface HostFacts {
  readonly stdoutIsTTY: boolean;
  readonly isRoot: boolean;
  readonly hasNft: () => boolean;
  /** where a kubeconfig may be found (KUBECONFIG, HOME, the in-cluster variables); none in tests */
  readonly kubeEnv?: KubeEnv;
}

export interface RunEnv extends HostFacts {
  /** fires on the first SIGINT or SIGTERM */
  readonly shutdownSignal: () => AbortSignal;
}

export const BUNDLED_EXAMPLE = fileURLToPath(new URL("../../examples/quickstart", import.meta.url));

interface UpOptions extends ObservabilityFlags {
  filename?: string;
  dataplane: string;
  duration?: string;
  once?: boolean;
  controlPort: string;
  probeInterval: string;
  refresh?: string;
  labName: string;
  tcpPlumbing: string;
}

export function registerUpCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  env: RunEnv,
): void {
  const command = program
    .command("up")
    .description(
      "run a folder of manifests on this machine — pods, node agents, health checks and the LB — with a live view",
    )
    .option("-f, --filename <dir>", "folder of manifests (default: the bundled examples/quickstart)")
    .option(
      "--dataplane <mode>",
      "auto or userspace (loopback, no root), or nftables (the kernel data plane in a network-namespace lab: root, nft, ip)",
      "auto",
    )
    .option("--duration <seconds>", "stop by itself after this many seconds (after the start)")
    .option("--once", "start, show the view once, stop")
    .option(
      "--control-port <port>",
      "127.0.0.1 port of the status endpoint and single-instance check",
      String(DEFAULT_CONTROL_PORT),
    )
    .option(
      "--probe-interval <ms>",
      "userspace: health probe interval in milliseconds (plans say GKE's 8 s)",
      "1000",
    )
    .option("--refresh <seconds>", "live view period (default 1 on a terminal, 5 otherwise)")
    .option(
      "--tcp-plumbing <kind>",
      "userspace: the LB's TCP on net (node:net sockets) or experimental-libuv (undocumented Node internals; may break on a Node upgrade)",
      "net",
    )
    .option("--lab-name <name>", "nftables: the lab's name (namespaces plb-<name>-*)", "up");
  // JSON logs at warn by default: the live view is the human output
  addObservabilityOptions(command, "127.0.0.1:9797", "warn").action(async (opts: UpOptions) => {
    setExitCode(await runUp(opts, io, env));
  });
}

/** The validated flags: the userspace quickstart here, or the lab (`--dataplane nftables`). */
type UpConfig =
  | { readonly mode: "userspace"; readonly quickstart: QuickstartConfig }
  | { readonly mode: "lab"; readonly lab: UpLabOptions };

interface QuickstartConfig {
  readonly dir: string;
  readonly port: number;
  readonly probeIntervalMs: number;
  readonly duration: number | undefined;
  readonly tcp: TcpPlumbingChoice;
  /** why the userspace proxy runs, for the first line */
  readonly reason: string;
}

/** What is wrong with the flags, and the exit code (2: bad flag, 1: this host cannot). */
interface UpRefusal {
  readonly error: string;
  readonly exitCode: 1 | 2;
}

async function runUp(opts: UpOptions, io: CliIo, env: RunEnv): Promise<number> {
  const config = upConfig(opts, env);
  if ("error" in config) {
    io.stderr(`error: ${config.error}\n`);
    return config.exitCode;
  }
  if (config.mode === "lab") return runUpLab(config.lab, io, env);
  return runQuickstart(config.quickstart, opts, io, env);
}

/** flags → UpConfig, each error naming its flag; the data plane chosen from the host's facts. */
function upConfig(opts: UpOptions, host: HostFacts): UpConfig | UpRefusal {
  const requested = opts.dataplane as DataplaneRequest;
  if (!["auto", "userspace", "nftables"].includes(requested))
    return { error: `--dataplane must be auto, userspace or nftables, not ${opts.dataplane}`, exitCode: 2 };
  const choice = chooseDataplane({
    isRoot: host.isRoot,
    hasNft: requested === "userspace" ? false : host.hasNft(),
    requested,
  });
  if (!choice.ok)
    return {
      error: `${choice.reason}: passlb up --dataplane nftables builds the network-namespace lab (docs/lab.md); without root, plain passlb up runs the same folder on the userspace proxy`,
      exitCode: 1,
    };
  const tcp = parseTcpPlumbing(opts.tcpPlumbing);
  if (tcp === undefined)
    return {
      error: `--tcp-plumbing must be net or experimental-libuv, not ${opts.tcpPlumbing}`,
      exitCode: 2,
    };
  const dir = opts.filename ?? BUNDLED_EXAMPLE;
  const port = Number(opts.controlPort);
  const probeIntervalMs = Number(opts.probeInterval);
  const duration = opts.duration === undefined ? undefined : Number(opts.duration);
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    return { error: `--control-port ${opts.controlPort}: expected a port number, 0 to 65535`, exitCode: 2 };
  if (!(probeIntervalMs >= 50))
    return {
      error: `--probe-interval ${opts.probeInterval}: expected milliseconds, at least 50`,
      exitCode: 2,
    };
  if (duration !== undefined && !(duration > 0))
    return { error: `--duration ${opts.duration}: expected a positive number of seconds`, exitCode: 2 };
  if (requested === "nftables") {
    if (!/^[a-z0-9]{1,8}$/.test(opts.labName))
      return { error: "--lab-name must be 1-8 lower-case letters or digits", exitCode: 2 };
    return { mode: "lab", lab: { ...opts, dir, port, duration, labName: opts.labName } };
  }
  // auto runs the userspace proxy here; the kernel path runs in the lab (--dataplane nftables)
  const reason =
    choice.dataplane === "nftables"
      ? "auto: passlb up runs the userspace proxy unless --dataplane nftables asks for the lab"
      : choice.reason;
  return { mode: "userspace", quickstart: { dir, port, probeIntervalMs, duration, tcp, reason } };
}

/** The userspace quickstart: observability, the run, the control port, what runs, the live view. */
async function runQuickstart(
  config: QuickstartConfig,
  opts: UpOptions,
  io: CliIo,
  env: RunEnv,
): Promise<number> {
  const obs = await startObservability(opts, {
    io,
    process: "passlb up",
    component: "up",
    dataplane: "userspace",
  });
  if (typeof obs === "string") {
    io.stderr(`error: ${obs}\n`);
    return 2;
  }
  const { dir, port, tcp } = config;
  const run = new QuickstartRun({
    dir,
    probeIntervalMs: config.probeIntervalMs,
    tcp,
    log: (l) => io.stderr(`${l}\n`),
    observer: obs.observer,
  });
  const control = await startControl(run, dir, port, io);
  if (!control) {
    await run.close();
    await obs.close();
    return 1;
  }
  const close = async () => {
    await run.close();
    await obs.close();
    await control.close();
  };
  const dashboard = await obs.serve();
  const signal = env.shutdownSignal();
  io.stdout(
    `passlb up: data plane userspace (${config.reason}); ${describeTcpPlumbing(run.tcpPlumbing, tcp)}; folder ${dir}\n`,
  );
  io.stdout(
    "  as root with nft, passlb up --dataplane nftables runs the same folder on the kernel data plane in the network-namespace lab\n",
  );
  io.stdout(
    "  addresses are rewritten to loopback: VIPs 127.0.1.x, nodes 127.0.2.x, pods 127.0.3.x, clients 127.0.4.x; ports < 1024 + 8000\n",
  );
  const started = await run.start();
  for (const n of started.notes)
    if (n.severity !== "info") io.stderr(`${n.code}: ${n.subject}: ${n.message}\n`);
  if (!started.ok) {
    for (const e of started.errors) io.stderr(`error: ${e}\n`);
    await close();
    return started.errors.some((e) => /EADDRINUSE/.test(e)) ? 1 : 2;
  }
  const tryText = printRunning(run, dir, control.port, dashboard, io);
  const tty = env.stdoutIsTTY;
  const refreshMs = (opts.refresh === undefined ? (tty ? 1 : 5) : Number(opts.refresh)) * 1000;
  const draw = () => {
    const state = run.liveState();
    // on a terminal the view is redrawn in place, with the try lines kept on top
    io.stdout(tty ? `\x1b[H\x1b[J${tryText}\n${renderLiveView(state)}` : renderLiveLines(state));
  };
  await runViewLoop({ draw, refreshMs, once: opts.once === true, duration: config.duration, signal });
  await close();
  io.stdout("\npasslb up: stopped; every listener, pod and agent is closed\n");
  return 0;
}

/** The control port (status and single instance), or undefined after saying why it could not open. */
async function startControl(
  run: QuickstartRun,
  dir: string,
  port: number,
  io: CliIo,
): Promise<ControlServer | undefined> {
  const control = await ControlServer.start(port, () => ({
    dir,
    startedAt: new Date(run.startedAt).toISOString(),
    // what a controller would write to each Service's status (ipMode Proxy: a proxying LB)
    status: run.plans.map((p) => ({
      service: p.service,
      loadBalancer: { ingress: p.vips.map((v) => ({ ip: v.address, ipMode: p.ipMode })) },
    })),
    state: run.liveState(),
  }));
  if (control.kind === "already_running")
    io.stderr(
      `passlb up is already running (folder ${control.dir}, since ${control.startedAt}); stop it with Ctrl-C there, or see http://127.0.0.1:${port}/\n`,
    );
  else if (control.kind === "port_busy")
    io.stderr(
      `error: cannot open the control port: ${control.message} (choose another with --control-port)\n`,
    );
  else return control.server;
  return undefined;
}

/** What runs, each Service's ingress, the dashboard and the try lines; returns the try lines (the live view keeps them on top). */
function printRunning(
  run: QuickstartRun,
  dir: string,
  controlPort: number,
  dashboard: string | undefined,
  io: CliIo,
): string {
  const snap = run.snapshot!;
  io.stdout(
    `running: ${snap.pods.length} pods, ${snap.nodes.length} node agents, LB for ${run.plans.length} Services; status at http://127.0.0.1:${controlPort}/\n`,
  );
  for (const p of run.plans)
    io.stdout(`  ${p.service}: ingress ${p.vips.map((v) => v.address).join(", ")} (ipMode ${p.ipMode})\n`);
  if (dashboard) io.stdout(`dashboard: ${dashboard} (metrics at ${dashboard}metrics)\n`);
  const tryText = `try:\n${tryLines(run.plans, snap.config)
    .map((l) => `  ${l}\n`)
    .join("")}`;
  io.stdout(tryText);
  io.stdout(
    `edit the files in ${dir} (scale pods, switch a Service to Cluster, delete a node): the view follows within seconds\n\n`,
  );
  return tryText;
}
