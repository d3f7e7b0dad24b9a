/**
 * `passlb up --dataplane nftables`: the quickstart on the kernel data plane, in the
 * network-namespace lab (src/quickstart/quickstart-lab.ts, docs/quickstart.md "In the
 * lab"). Same shape as the userspace mode: the control port (single instance), what runs
 * and how to try it, the live view until the shutdown signal, `--duration` or `--once`;
 * the dashboard address relays to the LB's own dashboard inside the lab. Whatever happens
 * after the lab starts being built — an error, Ctrl-C during start — the lab is removed.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { labPrefix } from "../lab/lab-layout.ts";
import { parseBindAddress } from "../node-agent/agent-config.ts";
import { ControlServer } from "../quickstart/control-server.ts";
import { labTryLines } from "../quickstart/lab-try-lines.ts";
import { relayTcpToSocket, type TcpRelay } from "../quickstart/lb-dashboard-relay.ts";
import { renderLiveLines, renderLiveView } from "../quickstart/live-view.ts";
import { QuickstartLab } from "../quickstart/quickstart-lab.ts";
import type { CliIo } from "./load-input.ts";
import type { RunEnv } from "./up-command.ts";
import { runViewLoop } from "./up-view-loop.ts";

const REPO_ROOT = fileURLToPath(new URL("../..", import.meta.url));

export interface UpLabOptions {
  readonly dir: string;
  readonly port: number;
  readonly duration: number | undefined;
  readonly once?: boolean;
  readonly refresh?: string;
  readonly dashboardAddress: string;
  readonly labName: string;
}

export async function runUpLab(opts: UpLabOptions, io: CliIo, env: RunEnv): Promise<number> {
  if (spawnSync("ip", ["-V"]).error) {
    io.stderr("error: passlb up --dataplane nftables needs the ip command (iproute2) to build the lab\n");
    return 1;
  }
  const off = opts.dashboardAddress === "off" || opts.dashboardAddress === "";
  const bind = off ? undefined : parseBindAddress(opts.dashboardAddress);
  if (!off && !bind) {
    io.stderr(`error: --dashboard-address ${opts.dashboardAddress}: expected host:port or off\n`);
    return 2;
  }
  const lab = new QuickstartLab({
    dir: opts.dir,
    name: opts.labName,
    repoRoot: REPO_ROOT,
    log: (l) => io.stderr(`${l}\n`),
  });
  const control = await ControlServer.start(opts.port, () => ({
    dir: opts.dir,
    startedAt: new Date(lab.startedAt).toISOString(),
    dataplane: "nftables",
    lab: opts.labName,
    status: lab.plans.map((p) => ({
      service: p.service,
      loadBalancer: { ingress: p.vips.map((v) => ({ ip: v.address, ipMode: p.ipMode })) },
    })),
    state: lab.liveState(),
  }));
  if (control.kind === "already_running") {
    io.stderr(
      `passlb up is already running (folder ${control.dir}, since ${control.startedAt}); stop it with Ctrl-C there, or see http://127.0.0.1:${opts.port}/\n`,
    );
    return 1;
  }
  if (control.kind === "port_busy") {
    io.stderr(
      `error: cannot open the control port: ${control.message} (choose another with --control-port)\n`,
    );
    return 1;
  }
  // caught from here on: Ctrl-C while the lab is being built still tears it down
  const signal = env.shutdownSignal();
  let relay: TcpRelay | undefined;
  try {
    io.stdout(
      `passlb up: data plane nftables (requested), in the network-namespace lab ${labPrefix(opts.labName)}*; folder ${opts.dir}\n`,
    );
    io.stdout(
      "  building it: namespaces for clients, the LB host, nodes and pods; echo pods, passlb agent and passlb lb (this takes a while)\n",
    );
    const started = await lab.start();
    for (const n of started.notes) io.stderr(`${n.code}: ${n.subject}: ${n.message}\n`);
    if (!started.ok) {
      for (const e of started.errors) io.stderr(`error: ${e}\n`);
      // a lab already running under this name is an operational refusal, not bad input
      return started.errors.some((e) => /is running/.test(e)) ? 1 : 2;
    }
    if (signal.aborted) return 0;
    const state = lab.state!;
    const l = state.layout;
    io.stdout(
      `running: ${l.pods.length} pods, ${l.nodes.length} node agents (nftables DNAT), the LB (nftables) in ${l.lb.ns}, ${l.clients.length} client hosts; status at http://127.0.0.1:${control.server.port}/\n`,
    );
    io.stdout(
      `  addresses: nodes 198.51.100.x, pods 203.0.113.65+, clients 192.0.2.x (docs/lab.md); logs in ${state.stateDir}/logs\n`,
    );
    for (const p of lab.plans)
      io.stdout(`  ${p.service}: ingress ${p.vips.map((v) => v.address).join(", ")} (ipMode ${p.ipMode})\n`);
    if (bind && lab.lbSocket) {
      relay = await relayTcpToSocket(bind.host ?? "127.0.0.1", bind.port, lab.lbSocket).catch((e: Error) => {
        io.stderr(`passlb up: no dashboard on ${opts.dashboardAddress}: ${e.message}\n`);
        return undefined;
      });
      const host = bind.host ?? "127.0.0.1";
      if (relay)
        io.stdout(
          `dashboard: http://${host.includes(":") ? `[${host}]` : host}:${bind.port}/ (the LB's, relayed from its namespace)\n`,
        );
    }
    const compiled = join(state.stateDir, "bin", "lab-client.mjs");
    const clientScript = existsSync(compiled)
      ? compiled
      : `--import tsx ${join(REPO_ROOT, "src", "lab", "lab-client.ts")}`;
    const tryText = `try (each pod answers with its name, node and the client address it saw):\n${labTryLines(
      lab.plans,
      lab.clients,
      opts.labName,
      clientScript,
    )
      .map((x) => `  ${x}\n`)
      .join("")}`;
    io.stdout(tryText);
    io.stdout(
      `edit the files in ${opts.dir}: Services, the config, pods and nodes (added, removed, moved, readiness, labels, ports) follow within seconds\n\n`,
    );
    const tty = env.stdoutIsTTY;
    const refreshMs = (opts.refresh === undefined ? (tty ? 1 : 5) : Number(opts.refresh)) * 1000;
    const draw = () => {
      const live = lab.liveState();
      io.stdout(tty ? `\x1b[H\x1b[J${tryText}\n${renderLiveView(live)}` : renderLiveLines(live));
    };
    await runViewLoop({ draw, refreshMs, once: opts.once === true, duration: opts.duration, signal });
    return 0;
  } catch (e) {
    io.stderr(`error: ${(e as Error).message}\n`);
    return 1;
  } finally {
    await relay?.close();
    const built = lab.built;
    await lab.close();
    await control.server.close();
    io.stdout(
      built
        ? "\npasslb up: stopped; the lab's namespaces, links and processes are removed\n"
        : "\npasslb up: stopped; nothing was built\n",
    );
  }
}
