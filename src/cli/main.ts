/**
 * The composition root: the `passlb` executable. The only module that reads process.argv,
 * process.env or the standard streams, or sets the exit code. Called as `kubectl-passlb`
 * (bin/kubectl-passlb, the kubectl plugin) it runs the plugin's program instead.
 */
import { execFileSync } from "node:child_process";
import { basename } from "node:path";
import { CommanderError } from "commander";
import { execKubectl } from "../kubectl/kubectl-runner.ts";
import { buildKubectlProgram, runKubectlProgram } from "../kubectl/plugin-program.ts";
import type { CliIo } from "./load-input.ts";
import { buildProgram } from "./program.ts";

/** Fires on the first SIGINT or SIGTERM; installed only by commands that run until stopped. */
function shutdownSignal(): AbortSignal {
  const controller = new AbortController();
  const stop = () => controller.abort();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  return controller.signal;
}

async function main(): Promise<void> {
  const io: CliIo = {
    stdout: (t) => process.stdout.write(t),
    stderr: (t) => process.stderr.write(t),
    readStdin: async () => {
      const chunks: Buffer[] = [];
      for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
      return Buffer.concat(chunks).toString("utf8");
    },
  };
  const setExitCode = (code: number) => {
    process.exitCode = code;
  };
  if (basename(process.argv[1] ?? "").startsWith("kubectl-passlb")) {
    const plugin = buildKubectlProgram(io, setExitCode, (globalArgs) =>
      execKubectl({ env: process.env, globalArgs }),
    );
    try {
      await runKubectlProgram(plugin, process.argv, io, setExitCode);
    } catch (e) {
      process.stderr.write(`kubectl-passlb: internal error: ${(e as Error).stack ?? String(e)}\n`);
      process.exitCode = 70;
    }
    return;
  }
  const program = buildProgram(io, setExitCode, shutdownSignal, {
    stdoutIsTTY: process.stdout.isTTY === true,
    isRoot: process.getuid?.() === 0,
    kubeEnv: {
      KUBECONFIG: process.env.KUBECONFIG,
      HOME: process.env.HOME,
      KUBERNETES_SERVICE_HOST: process.env.KUBERNETES_SERVICE_HOST,
      KUBERNETES_SERVICE_PORT: process.env.KUBERNETES_SERVICE_PORT,
    },
    hasNft: () => {
      try {
        execFileSync("nft", ["--version"], { stdio: "ignore", timeout: 2000 });
        return true;
      } catch {
        return false;
      }
    },
  });
  try {
    await program.parseAsync(process.argv);
  } catch (e) {
    if (e instanceof CommanderError) {
      // help and version exit 0; usage errors exit 2 like other input problems
      process.exitCode = e.exitCode === 0 ? 0 : 2;
      return;
    }
    process.stderr.write(`passlb: internal error: ${(e as Error).stack ?? String(e)}\n`);
    process.exitCode = 70;
  }
}

await main();
