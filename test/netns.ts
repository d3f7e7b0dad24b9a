/**
 * Throwaway network namespaces for tests and benchmarks that need the kernel: named `plb`
 * + a purpose + the pid and a counter, so a cleanup can find leftovers; always removed.
 */
import { execFileSync, spawnSync } from "node:child_process";

let counter = 0;

/** Why kernel tests cannot run here, or undefined when they can (root with nft and ip). */
export function kernelSkipReason(): string | undefined {
  if (process.getuid?.() !== 0) return "needs root and nft: not running as root";
  for (const [tool, flag] of [
    ["nft", "--version"],
    ["ip", "-V"],
  ] as const) {
    const r = spawnSync(tool, [flag], { stdio: "ignore" });
    if (r.error || r.status !== 0) return `needs root and nft: ${tool} is not installed`;
  }
  return undefined;
}

export function createNetns(purpose: string): string {
  const name = `plb${purpose}${process.pid}n${++counter}`;
  execFileSync("ip", ["netns", "add", name]);
  return name;
}

export function deleteNetns(name: string): void {
  spawnSync("ip", ["netns", "del", name], { stdio: "ignore" });
}

/** Runs `fn` with a fresh namespace and removes it afterwards, also on failure. */
export async function withNetns<T>(purpose: string, fn: (ns: string) => Promise<T>): Promise<T> {
  const ns = createNetns(purpose);
  try {
    return await fn(ns);
  } finally {
    deleteNetns(ns);
  }
}
