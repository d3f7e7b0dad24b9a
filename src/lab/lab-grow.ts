/**
 * Adapter: a running lab follows a change (lab-change.ts) without being rebuilt. Three
 * steps, so that the caller can rewrite the manifest folder in between:
 *   `labRemoveHosts`  stop every process in some of the removed hosts' namespaces, unlink
 *                     and unroute them, delete the namespaces;
 *   `labAddHosts`     build the new zones, clients, nodes and pods, start the new pods' echo
 *                     servers and restart those whose ports changed, wait until they serve;
 *   `labStartAgents`  start `passlb agent` on the new nodes (once the folder names them) and
 *                     wait until each has its table or health port.
 * Each returns the lab's state as it now is (also written to `<state>/state.json`). Hosts
 * that keep running are never touched. Deliberately not here: deciding the change, the
 * manifests, the live view's counters (src/quickstart/).
 */
import { writeFileSync } from "node:fs";
import { join } from "node:path";
import type { LabChange, LabChangeCommands } from "./lab-change.ts";
import type { Command } from "./lab-host-commands.ts";
import type { LabNode } from "./lab-layout.ts";
import {
  agentArgs,
  echoArgs,
  type LabProcess,
  removeNamespaces,
  startLabProcess,
  stopNamespaceProcesses,
} from "./lab-processes.ts";
import type { LabState } from "./lab-runner.ts";
import { compileLabScripts } from "./lab-scripts.ts";
import { hasListener, hasTable, readText, runBatched, waitFor } from "./lab-shell.ts";

export interface LabGrowOptions {
  readonly repoRoot: string;
  /** extra arguments for every new agent (as `labUp` got them) */
  readonly agentArgs?: readonly string[];
}

function save(state: LabState): LabState {
  writeFileSync(join(state.stateDir, "state.json"), `${JSON.stringify(state, null, 2)}\n`);
  return state;
}

/**
 * Tears down the removed hosts whose namespaces are listed (`first` or the rest), with the
 * unlinking and route removals of `commands` (run tolerantly: what is gone is gone).
 * `layout` is the layout the state has from now on.
 */
export async function labRemoveHosts(
  state: LabState,
  namespaces: readonly string[],
  commands: readonly Command[],
  layout = state.layout,
): Promise<LabState> {
  if (namespaces.length === 0 && commands.length === 0) return state;
  const gone = new Set(namespaces);
  await stopNamespaceProcesses(namespaces);
  runBatched(commands, true);
  await removeNamespaces(namespaces);
  const host = (p: LabProcess) => `${state.layout.prefix}${p.host}`;
  return save({ ...state, layout, processes: state.processes.filter((p) => !gone.has(host(p))) });
}

/** Builds the change's new hosts and (re)starts echo servers; the new layout is the state's. */
export async function labAddHosts(
  state: LabState,
  change: LabChange,
  commands: Pick<LabChangeCommands, "build">,
  options: LabGrowOptions,
): Promise<LabState> {
  const pods = [...change.add.pods, ...change.restart];
  runBatched(commands.build);
  let processes = [...state.processes];
  if (change.restart.length > 0) {
    const restarting = new Set(change.restart.map((p) => p.name));
    await stopNamespaceProcesses(change.restart.map((p) => p.ns));
    processes = processes.filter((p) => !(p.role === "echo" && restarting.has(p.host)));
  }
  const started: { p: LabProcess; from: number }[] = [];
  if (pods.length > 0) {
    const echo = await compileLabScripts(options.repoRoot, state.stateDir);
    for (const pod of pods) {
      const from = readText(join(state.stateDir, "logs", `${pod.name}.echo.log`)).length;
      const p = startLabProcess(
        state.stateDir,
        options.repoRoot,
        "echo",
        pod,
        echoArgs(echo.command("echo-server"), pod),
      );
      started.push({ p, from });
      processes.push(p);
    }
  }
  const next = save({ ...state, layout: change.layout, processes });
  await waitFor(
    "echo servers",
    () => started.every(({ p, from }) => readText(p.log).slice(from).includes(": ready,")),
    started.map((s) => s.p),
  );
  return next;
}

/** Starts an agent on each new node and waits until each has its table or health port. */
export async function labStartAgents(
  state: LabState,
  nodes: readonly LabNode[],
  options: LabGrowOptions,
): Promise<LabState> {
  if (nodes.length === 0) return state;
  const started = nodes.map((n) =>
    startLabProcess(
      state.stateDir,
      options.repoRoot,
      "agent",
      n,
      agentArgs(n, state.manifestsDir, options.agentArgs ?? []),
    ),
  );
  const next = save({ ...state, processes: [...state.processes, ...started] });
  await waitFor(
    "agents",
    () => nodes.every((n) => hasTable(n.ns, "inet passlb-agent") || hasListener(n.ns, 10256)),
    started,
  );
  return next;
}
