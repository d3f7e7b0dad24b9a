/**
 * The lab's shell helpers (docs/lab.md): run `ip`/`nft`/`ss` synchronously, batch `ip -n`
 * commands per namespace, list namespaces and their processes, wait for readiness, signal
 * processes. Every command is scoped to a namespace the lab names; nothing here creates
 * anything in the caller's namespace. No policy: lab-runner.ts decides what to run.
 */
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** a process the lab started, as far as waiting for it is concerned */
export interface Watched {
  readonly role: string;
  readonly host: string;
  readonly pid: number;
  readonly log: string;
}

export const READY_TIMEOUT_MS = 30_000;

export function run(argv: readonly string[], tolerate = false): void {
  const [cmd, ...args] = argv;
  const r = spawnSync(cmd!, args, { encoding: "utf8" });
  if (!tolerate && r.status !== 0)
    throw new Error(`lab: ${argv.join(" ")} failed: ${(r.stderr || r.error?.message || "").trim()}`);
}

/**
 * Runs consecutive `ip -n NS …` commands for one namespace as one `ip -batch`; `tolerate`:
 * failures (something already gone) do not stop the rest.
 */
export function runBatched(commands: readonly (readonly string[])[], tolerate = false): void {
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
    if (j - i === 1) run(first, tolerate);
    else {
      const lines = commands.slice(i, j).map((c) => c.slice(3).join(" "));
      const r = spawnSync("ip", ["-n", ns!, ...(tolerate ? ["-force"] : []), "-batch", "-"], {
        input: `${lines.join("\n")}\n`,
        encoding: "utf8",
      });
      if (r.status !== 0 && !tolerate)
        throw new Error(`lab: ip -n ${ns} -batch failed: ${(r.stderr || "").trim()}`);
    }
    i = j;
  }
}

export function listNamespaces(): string[] {
  const r = spawnSync("ip", ["netns", "list"], { encoding: "utf8" });
  return (r.stdout ?? "")
    .split("\n")
    .map((l) => l.split(" ")[0] ?? "")
    .filter((n) => n !== "");
}

export function namespacePids(ns: string): number[] {
  const r = spawnSync("ip", ["netns", "pids", ns], { encoding: "utf8" });
  return (r.stdout ?? "")
    .split("\n")
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 1);
}

export function hasTable(ns: string, table: string): boolean {
  return spawnSync("ip", ["netns", "exec", ns, "nft", "list", "table", ...table.split(" ")]).status === 0;
}

export function hasAnyTable(ns: string): boolean {
  const r = spawnSync("ip", ["netns", "exec", ns, "nft", "list", "tables"], { encoding: "utf8" });
  return (r.stdout ?? "").trim() !== "";
}

export function hasListener(ns: string, port: number): boolean {
  const r = spawnSync("ip", ["netns", "exec", ns, "ss", "-Hltn", `sport = :${port}`], { encoding: "utf8" });
  return (r.stdout ?? "").trim() !== "";
}

export async function waitFor(
  what: string,
  ready: () => boolean,
  processes: readonly Watched[],
): Promise<void> {
  const deadline = Date.now() + READY_TIMEOUT_MS;
  while (!ready()) {
    const dead = processes.find((p) => !alive(p.pid));
    if (dead) throw new Error(`lab: ${dead.role} in ${dead.host} exited: ${tail(readText(dead.log))}`);
    if (Date.now() > deadline) throw new Error(`lab: ${what} not ready after ${READY_TIMEOUT_MS} ms`);
    await sleep(100);
  }
}

export function readText(path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch {
    return "";
  }
}

export const tail = (text: string) => text.trim().split("\n").slice(-5).join(" | ");

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

export function signal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch {
    // already gone
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
