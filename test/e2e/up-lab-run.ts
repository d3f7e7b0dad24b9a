/**
 * The part every `passlb up --dataplane nftables` end-to-end test shares: a copy of a
 * manifests folder (the test edits it), the command started under a lab name of the
 * test's own with its output collected, and the lab, the process and the copy removed in
 * `t.after` — also when the test fails. Plus the host checks the tests end with.
 */
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { cpSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { TestContext } from "node:test";
import { labPrefix } from "../../src/lab/lab-layout.ts";
import { defaultStateRoot, labDown } from "../../src/lab/lab-runner.ts";
import { until } from "../userspace/clients.ts";
import { REPO_ROOT } from "./lab-harness.ts";

export interface UpLabRun {
  /** the lab's name and namespace prefix */
  readonly name: string;
  readonly prefix: string;
  readonly stateDir: string;
  /** the copy of the folder the lab runs */
  readonly dir: string;
  readonly child: ChildProcess;
  /** everything the command printed so far (stdout and stderr) */
  readonly out: string;
  /** the command's exit code */
  readonly exited: Promise<number | null>;
  readonly controlPort: number;
  readonly dashboardPort: number;
}

/** the lab's namespaces (`ip netns list` entries with the prefix) */
export const namespaces = (prefix: string): string[] =>
  (spawnSync("ip", ["netns", "list"], { encoding: "utf8" }).stdout ?? "")
    .split("\n")
    .map((l) => l.split(" ")[0] ?? "")
    .filter((n) => n.startsWith(prefix));

export const alive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** links in the caller's namespace */
export const hostLinks = (): number =>
  spawnSync("ip", ["-o", "link"], { encoding: "utf8" }).stdout.split("\n").length;

/**
 * Starts `passlb up --dataplane nftables` on a copy of `source` and waits (up to
 * `readyMs`) for the lab to be up. `ports` spreads the control and dashboard ports of
 * concurrent test files.
 */
export async function startUpLab(
  t: TestContext,
  o: { name: string; source: string; durationS: number; ports: number; readyMs: number },
): Promise<UpLabRun> {
  const dir = mkdtempSync(join(tmpdir(), "plb-uplab-"));
  cpSync(o.source, dir, { recursive: true });
  let child: ChildProcess | undefined;
  t.after(async () => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill("SIGKILL");
    await labDown(o.name, { repoRoot: REPO_ROOT });
    rmSync(dir, { recursive: true, force: true });
  });
  const controlPort = o.ports + (process.pid % 500);
  const dashboardPort = controlPort + 1000;
  child = spawn(
    process.execPath,
    [
      join(REPO_ROOT, "bin", "passlb.js"),
      "up",
      "--dataplane",
      "nftables",
      "-f",
      dir,
      "--lab-name",
      o.name,
      "--duration",
      String(o.durationS),
      "--refresh",
      "1",
      "--control-port",
      String(controlPort),
      "--dashboard-address",
      `127.0.0.1:${dashboardPort}`,
    ],
    { stdio: ["ignore", "pipe", "pipe"] },
  );
  let out = "";
  child.stdout!.on("data", (d) => (out += d));
  child.stderr!.on("data", (d) => (out += d));
  const started = child;
  const exited = new Promise<number | null>((resolve) => started.once("exit", (code) => resolve(code)));
  await until(() => out.includes("edit the files in"), o.readyMs, `the lab to come up: ${out}`);
  return {
    name: o.name,
    prefix: labPrefix(o.name),
    stateDir: join(defaultStateRoot(REPO_ROOT), o.name),
    dir,
    child: started,
    get out() {
      return out;
    },
    exited,
    controlPort,
    dashboardPort,
  };
}
