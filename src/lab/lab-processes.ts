/**
 * The lab's processes (docs/lab.md "What up does"): how an echo server, an agent or the LB
 * is started inside a host's namespace (`ip netns exec NS node …`, detached, appending to
 * `<state>/logs/<host>.<role>.log`), the arguments each gets, and stopping everything that
 * runs in some namespaces before they are deleted. No policy about when: lab-runner.ts
 * (the first build) and lab-grow.ts (a running lab changing) decide.
 */
import { spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
import { join } from "node:path";
import type { LabHost, LabNode, LabPod } from "./lab-layout.ts";
import { alive, namespacePids, run, signal, sleep } from "./lab-shell.ts";

export interface LabProcess {
  readonly role: "echo" | "agent" | "lb";
  readonly host: string;
  readonly pid: number;
  readonly log: string;
  /** what runs after `ip netns exec NS node` */
  readonly args: readonly string[];
  /** environment added to the lab's own (a test's LD_PRELOAD, say); kept across restarts */
  readonly env?: Readonly<Record<string, string>>;
}

export function startLabProcess(
  stateDir: string,
  repoRoot: string,
  role: LabProcess["role"],
  host: Pick<LabHost, "name" | "ns">,
  args: readonly string[],
  env?: Readonly<Record<string, string>>,
): LabProcess {
  const logPath = join(stateDir, "logs", `${host.name}.${role}.log`);
  const fd = openSync(logPath, "a");
  const child = spawn("ip", ["netns", "exec", host.ns, process.execPath, ...args], {
    cwd: repoRoot,
    detached: true,
    stdio: ["ignore", fd, fd],
    ...(env && { env: { ...process.env, ...env } }),
  });
  closeSync(fd);
  child.unref();
  // a spawn that fails also emits 'error' later: the throw below reports it, this keeps it
  // from being an unhandled event that ends the process
  child.on("error", () => {});
  if (child.pid === undefined) throw new Error(`could not start ${role} in ${host.ns}`);
  return { role, host: host.name, pid: child.pid, log: logPath, args, ...(env && { env }) };
}

/** an echo server on the pod's ports; `script` is how to run echo-server (lab-scripts.ts) */
export function echoArgs(script: readonly string[], p: LabPod): string[] {
  const ports = (protocol: string) =>
    p.spec.ports
      .filter((x) => x.protocol === protocol)
      .map((x) => x.port)
      .join(",");
  return [
    ...script,
    `--name=${p.name}`,
    `--node=${p.node}`,
    `--tcp=${ports("TCP")}`,
    `--udp=${ports("UDP")}`,
  ];
}

export function agentArgs(n: LabNode, manifestsDir: string, extra: readonly string[]): string[] {
  return ["bin/passlb.js", "agent", `--node=${n.name}`, `--manifests=${manifestsDir}`, ...extra];
}

/** SIGTERM to every process in the namespaces, SIGKILL to what is left after 3 s; the count. */
export async function stopNamespaceProcesses(namespaces: readonly string[]): Promise<number> {
  const pids = new Set<number>();
  for (const ns of namespaces) for (const pid of namespacePids(ns)) pids.add(pid);
  for (const pid of pids) signal(pid, "SIGTERM");
  const deadline = Date.now() + 3000;
  while ([...pids].some(alive) && Date.now() < deadline) await sleep(50);
  for (const pid of pids) if (alive(pid)) signal(pid, "SIGKILL");
  return pids.size;
}

/** Stops every process in the namespaces, then deletes them (idempotent). */
export async function removeNamespaces(namespaces: readonly string[]): Promise<number> {
  const stopped = await stopNamespaceProcesses(namespaces);
  for (const ns of namespaces) run(["ip", "netns", "del", ns], true);
  return stopped;
}
