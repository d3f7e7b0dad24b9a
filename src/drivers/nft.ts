/**
 * The nft driver (the knftables `Interface` shape: sigs.k8s.io/knftables nftables.go).
 * `run` sends a Transaction (nft-transaction.ts) to `nft -f -` as one kernel transaction
 * (all or nothing), `check` validates it without committing (`nft -c -f -`), `dump` reads a
 * table back as JSON (`nft -j list table`, `-t` for a terse listing without set elements)
 * parsed by stateFromNftJson, `counters` reads the named counters' packets and bytes.
 * Failures are classified in ONE place (classifyNftFailure) into PasslbError codes
 * `nft_unavailable` (no binary, no permission, no nf_tables) or `nft_failed` (nft refused
 * the transaction; its stderr is in `details.stderr`).
 *
 * With `netns`, every command runs inside that network namespace (`ip netns exec`): tests
 * and benchmarks use throwaway namespaces. The fake with the same interface is fake-nft.ts.
 * Does not: render, diff or retry — the controllers own that.
 */

import { PasslbError } from "../errors.ts";
import type { NftState } from "../lb-host/nftables/render/nft-state.ts";
import { countersFromNftJson, stateFromNftJson } from "../lb-host/nftables/render/parse-nft-json.ts";
import { nftScript, type Transaction } from "./nft-transaction.ts";
import { type ProcessResult, runProcess } from "./run-process.ts";

export type NftCounters = Map<string, { packets: number; bytes: number }>;

export interface NftDriver {
  /** Commit the transaction as one kernel transaction. Throws PasslbError. */
  run(tx: Transaction): Promise<void>;
  /** Validate the transaction without committing. Throws PasslbError. */
  check(tx: Transaction): Promise<void>;
  /** The inet table as the kernel holds it; undefined when it does not exist. */
  dump(table: string, options?: { terse?: boolean }): Promise<NftState | undefined>;
  /** Packets and bytes of the inet table's named counters. Throws PasslbError. */
  counters(table: string): Promise<NftCounters>;
}

export interface NftCommandOptions {
  readonly netns?: string;
  /** the nft binary (default `nft` on PATH) */
  readonly nft?: string;
}

export function createNftDriver(options: NftCommandOptions = {}): NftDriver {
  const nft = options.nft ?? "nft";
  const run = (args: string[], input?: string): Promise<ProcessResult> =>
    options.netns
      ? runProcess("ip", ["netns", "exec", options.netns, nft, ...args], input)
      : runProcess(nft, args, input);
  const must = async (what: string, args: string[], input?: string): Promise<ProcessResult> => {
    const r = await run(args, input);
    const failure = classifyNftFailure(what, r);
    if (failure) throw failure;
    return r;
  };
  return {
    async run(tx) {
      await must("apply", ["-f", "-"], nftScript(tx));
    },
    async check(tx) {
      await must("check", ["-c", "-f", "-"], nftScript(tx));
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
export function classifyNftFailure(what: string, r: ProcessResult): PasslbError | undefined {
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
