/**
 * `passlb lb --manifests DIR --dataplane nftables|auto`: the LB host. Reads the manifests
 * (polled for changes), plans, applies health, and programs the kernel through the
 * LbController (nftables table `inet <table>` + policy routes), until the shutdown signal.
 * On exit the kernel state is left in place: traffic keeps flowing while the process is
 * down and the next process adopts the table without a flush.
 *
 * Wiring only: the controller, applier, routes and watcher are built here from flags.
 * Health: until the prober lands, every member is `unknown` (forwarding); the prober plugs
 * in as one HealthSource. Exit codes: 0 stopped cleanly (or `--once` synced), 1 the sync
 * failed, 2 bad flags or unreadable input at start.
 */
import type { Command } from "commander";
import { readManifests } from "../cluster/manifest-files.ts";
import { manifestSignature, watchManifests } from "../cluster/watch-manifests.ts";
import { LbController, type LbEvent } from "../dataplane/lb-controller.ts";
import { createNftApplier } from "../dataplane/nft-applier.ts";
import { createPolicyRoutes } from "../dataplane/policy-routes.ts";
import { kernelTableSize } from "../dataplane/render/kernel-table-size.ts";
import { PasslbError } from "../errors.ts";
import { decodeDocuments, formatProblem } from "../k8s/decode.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { CliIo } from "./load-input.ts";

const collect = (value: string, previous: string[]) => [...previous, value];

interface LbFlags {
  manifests: string[];
  dataplane: string;
  table: string;
  seed: string;
  maxTableSize: string;
  routes: boolean;
  once?: boolean;
  pollMs: string;
  driftCheckMs: string;
}

export function registerLbCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  shutdownSignal: () => AbortSignal,
): void {
  program
    .command("lb")
    .description("run the load balancer host: program the kernel (nftables) from the manifests and health")
    .option("-f, --manifests <path>", "manifest file or directory (watched); repeatable", collect, [])
    .option("--dataplane <mode>", "nftables, or auto (nftables when usable)", "auto")
    .option("--table <name>", "the nftables table (family inet) passlb owns", "passlb")
    .option("--seed <n>", "Maglev and jhash seed; the same on every LB host", "1")
    .option("--max-table-size <m>", "largest Maglev table in the kernel (a listed prime)", "4093")
    .option("--no-routes", "do not install policy routes (someone else routes marked packets)")
    .option("--once", "sync once and exit")
    .option("--poll-ms <ms>", "how often to look for manifest changes", "1000")
    .option("--drift-check-ms <ms>", "how often to compare the kernel table with what was applied", "5000")
    .action(async (flags: LbFlags) => setExitCode(await runLb(flags, io, shutdownSignal)));
}

async function runLb(flags: LbFlags, io: CliIo, shutdownSignal: () => AbortSignal): Promise<number> {
  const seed = Number(flags.seed);
  const maxSize = Number(flags.maxTableSize);
  const pollMs = Number(flags.pollMs);
  const driftMs = Number(flags.driftCheckMs);
  if (flags.manifests.length === 0) return usage(io, "pass --manifests DIR (repeatable)");
  if (!["nftables", "auto"].includes(flags.dataplane))
    return usage(io, `--dataplane must be nftables or auto (got "${flags.dataplane}")`);
  if (!Number.isInteger(seed) || seed < 0 || seed > 0xffffffff)
    return usage(io, "--seed must be 0..4294967295");
  if (!/^[A-Za-z_][A-Za-z0-9_-]{0,63}$/.test(flags.table))
    return usage(io, "--table must be an nft identifier");
  let sizeFor: (n: number) => number;
  try {
    sizeFor = kernelTableSize(maxSize);
  } catch (e) {
    return usage(io, `--max-table-size: ${(e as Error).message}`);
  }
  if (!(pollMs >= 50) || !(driftMs >= 0)) return usage(io, "--poll-ms must be ≥ 50 and --drift-check-ms ≥ 0");

  const nft = createNftApplier();
  try {
    await nft.dump(flags.table, { terse: true });
  } catch (e) {
    const message = e instanceof PasslbError ? e.message : String(e);
    io.stderr(
      `error: the nftables data plane is not usable here (${message}); run as root with nft ≥ 1.0, or use the userspace proxy\n`,
    );
    return 1;
  }
  const log = (e: LbEvent) => io.stderr(`passlb lb: ${describe(e)}\n`);
  const controller = new LbController({
    table: flags.table,
    seed,
    nft,
    ...(flags.routes ? { routes: createPolicyRoutes() } : {}),
    timers: {
      setTimeout: (fn, ms) => setTimeout(fn, ms),
      clearTimeout: (h) => clearTimeout(h as NodeJS.Timeout),
    },
    now: () => performance.now(),
    sizeFor,
    debounceMs: 5,
    driftCheckMs: flags.once ? 0 : driftMs,
    onEvent: log,
  });
  const load = async (): Promise<{ snapshot: Snapshot; degraded: boolean } | undefined> => {
    try {
      const read = await readManifests(flags.manifests, io.readStdin);
      const decoded = decodeDocuments(read.documents);
      const problems = [...read.problems.map(formatProblem), ...decoded.problems.map(formatProblem)];
      for (const p of problems) io.stderr(`passlb lb: input problem: ${p}\n`);
      return { snapshot: decoded.snapshot, degraded: problems.length > 0 };
    } catch (e) {
      io.stderr(`passlb lb: ${(e as Error).message}\n`);
      return undefined;
    }
  };
  const first = await load();
  if (!first) return 2;
  await controller.start();
  controller.setSnapshot(first.snapshot, first.degraded, !flags.once);
  if (flags.once) {
    const outcome = await controller.syncOnce();
    await controller.stop();
    if (outcome.kind !== "ok") {
      io.stderr(`passlb lb: sync failed: ${(outcome.cause as Error).message}\n`);
      return 1;
    }
    io.stderr(`passlb lb: ${outcome.mode} sync, ${outcome.bytes} bytes\n`);
    return 0;
  }
  const signal = shutdownSignal();
  watchManifests(flags.manifests, {
    intervalMs: pollMs,
    signal,
    initial: await manifestSignature(flags.manifests),
    onChange: () => {
      void load().then((next) => {
        if (next) controller.setSnapshot(next.snapshot, next.degraded);
      });
    },
  });
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
  await controller.stop();
  io.stderr("passlb lb: stopped; the kernel keeps forwarding with the last table\n");
  return 0;
}

function usage(io: CliIo, message: string): number {
  io.stderr(`error: ${message}\n`);
  return 2;
}

function describe(e: LbEvent): string {
  switch (e.kind) {
    case "synced":
      return `${e.mode} sync, ${e.bytes} bytes, ${e.ms.toFixed(1)} ms`;
    case "sync_failed":
      return `sync failed (retry in ${e.retryInMs} ms): ${(e.error as Error).message ?? String(e.error)}`;
    case "adopted":
      return `adopted the existing table (${e.sets} sets/maps, ${e.chains} chains) without a flush`;
    case "drift":
      return `kernel table drifted (${e.what}); full sync`;
    case "routes_failed":
      return `policy routes not fully installed (retrying): ${(e.error as Error).message}`;
    case "kept_last_good":
      return `${e.service}: kept its last good data plane (${e.reason})`;
  }
}
