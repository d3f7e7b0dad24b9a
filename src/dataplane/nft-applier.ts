/**
 * Adapter: runs `nft` for the LB data plane. `apply` sends one script as one transaction
 * on stdin (`nft -f -`: all or nothing), `check` asks nft to validate it without
 * committing (`nft -c -f -`), `dump` reads the table back as JSON (`nft -j list table`,
 * `-t` for a terse listing without set elements) and parses it with stateFromNftJson.
 * Failures are classified in ONE place (classifyNftFailure) into PasslbError codes
 * `nft_unavailable` (no binary, no permission, no nf_tables) or `nft_failed` (nft refused
 * the transaction; its stderr is in `details.stderr`).
 *
 * With `netns`, every command runs inside that network namespace (`ip netns exec`): tests
 * and benchmarks use throwaway namespaces. Does not: render, diff or retry — the controller
 * owns that.
 */
import { spawn } from "node:child_process";
import { PasslbError } from "../errors.ts";
import type { NftState } from "./render/nft-state.ts";
import { countersFromNftJson, stateFromNftJson } from "./render/parse-nft-json.ts";

export interface NftApplier {
  /** Commit the script as one transaction. Throws PasslbError. */
  apply(script: string): Promise<void>;
  /** Validate the script without committing. Throws PasslbError. */
  check(script: string): Promise<void>;
  /** The table as the kernel holds it; undefined when it does not exist. */
  dump(table: string, options?: { terse?: boolean }): Promise<NftState | undefined>;
  /** Packets and bytes of the table's named counters. Throws PasslbError. */
  counters(table: string): Promise<Map<string, { packets: number; bytes: number }>>;
}

export interface NftCommandOptions {
  readonly netns?: string;
  readonly nft?: string;
}

interface RunResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
  readonly spawnError?: NodeJS.ErrnoException;
}

export function createNftApplier(options: NftCommandOptions = {}): NftApplier {
  const nft = options.nft ?? "nft";
  const run = (args: string[], input?: string): Promise<RunResult> => {
    const [cmd, argv] = options.netns ? ["ip", ["netns", "exec", options.netns, nft, ...args]] : [nft, args];
    return new Promise((resolve) => {
      const child = spawn(cmd, argv, { stdio: ["pipe", "pipe", "pipe"] });
      const out: Buffer[] = [];
      const err: Buffer[] = [];
      let spawnError: NodeJS.ErrnoException | undefined;
      child.stdout.on("data", (b: Buffer) => out.push(b));
      child.stderr.on("data", (b: Buffer) => err.push(b));
      child.on("error", (e) => {
        spawnError = e;
      });
      child.on("close", (code) => {
        const r = {
          code,
          stdout: Buffer.concat(out).toString("utf8"),
          stderr: Buffer.concat(err).toString("utf8"),
        };
        resolve(spawnError ? { ...r, spawnError } : r);
      });
      child.stdin.on("error", () => {}); // EPIPE when nft exits early; the exit code tells
      child.stdin.end(input ?? "");
    });
  };
  const must = async (what: string, args: string[], input?: string): Promise<RunResult> => {
    const r = await run(args, input);
    const failure = classifyNftFailure(what, r);
    if (failure) throw failure;
    return r;
  };
  return {
    async apply(script) {
      await must("apply", ["-f", "-"], script);
    },
    async check(script) {
      await must("check", ["-c", "-f", "-"], script);
    },
    async dump(table, dumpOptions = {}) {
      const args = ["-j", ...(dumpOptions.terse ? ["-t"] : []), "list", "table", "inet", table];
      const r = await run(args);
      if (r.code !== 0 && !r.spawnError && /No such file or directory/.test(r.stderr)) return undefined;
      const failure = classifyNftFailure("dump", r);
      if (failure) throw failure;
      return stateFromNftJson(JSON.parse(r.stdout), table);
    },
    async counters(table) {
      const r = await must("counters", ["-j", "list", "counters", "table", "inet", table]);
      return countersFromNftJson(JSON.parse(r.stdout), table);
    },
  };
}

/** The one parser of nft failures: undefined when the run succeeded. */
export function classifyNftFailure(what: string, r: RunResult): PasslbError | undefined {
  if (r.spawnError) {
    return new PasslbError("nft_unavailable", `nft ${what}: cannot run nft: ${r.spawnError.message}`, {
      cause: r.spawnError,
      details: { errno: r.spawnError.code },
    });
  }
  if (r.code === 0) return undefined;
  const stderr = r.stderr.trim();
  const unavailable =
    /Operation not permitted|Permission denied|Protocol not supported|not supported by the kernel|Cannot open network namespace|command not found|executable file not found|No such file or directory.*nft/i.test(
      stderr,
    ) && !/^.*Error: Could not process rule: No such file or directory/m.test(stderr);
  const firstError = stderr.split("\n").find((l) => l.includes("Error")) ?? stderr.split("\n")[0] ?? "";
  return new PasslbError(
    unavailable ? "nft_unavailable" : "nft_failed",
    `nft ${what} failed (exit ${r.code}): ${firstError}`,
    { details: { stderr: stderr.slice(0, 4000), exitCode: r.code } },
  );
}
