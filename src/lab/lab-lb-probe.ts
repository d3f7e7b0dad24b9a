/**
 * Probes whether this build's `passlb lb` runs the nftables data plane here (docs/lab.md
 * "What up does", step 6), in a throwaway namespace it removes again.
 */
import { spawn, spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { hasAnyTable, signal, sleep, tail } from "./lab-shell.ts";

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
