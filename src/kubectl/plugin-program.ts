/**
 * The `kubectl passlb` command tree (a kubectl plugin: `kubectl-passlb` on PATH). Like
 * `passlb`'s program it receives its I/O and its kubectl as arguments, so tests run it
 * in-process; src/cli/main.ts builds it when the executable is called `kubectl-passlb`.
 * Operational failures (kubectl missing, no access, CRD absent) end the command with the
 * error's message and code, exit 1.
 */
import { Command, CommanderError } from "commander";
import type { CliIo } from "../cli/load-input.ts";
import { PasslbError } from "../errors.ts";
import type { KubectlRunner } from "./kubectl-runner.ts";
import { registerPlanPluginCommand } from "./plan-plugin-command.ts";
import { registerStatusCommand } from "./status-command.ts";

/** Builds the runner once the global flags are known. */
export type KubectlFactory = (globalArgs: readonly string[]) => KubectlRunner;

export function buildKubectlProgram(
  io: CliIo,
  setExitCode: (code: number) => void,
  kubectlFor: KubectlFactory,
): Command {
  const program = new Command("kubectl passlb")
    .description("passlb's plans and status for the cluster kubectl points at")
    .version("0.1.0")
    .option("--context <name>", "the kubeconfig context kubectl should use")
    .option("--kubeconfig <path>", "the kubeconfig file kubectl should use")
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });
  const kubectl = (): KubectlRunner => {
    const g = program.opts<{ context?: string; kubeconfig?: string }>();
    const globalArgs = [
      ...(g.kubeconfig ? [`--kubeconfig=${g.kubeconfig}`] : []),
      ...(g.context ? [`--context=${g.context}`] : []),
    ];
    return kubectlFor(globalArgs);
  };
  registerPlanPluginCommand(program, io, setExitCode, kubectl);
  registerStatusCommand(program, io, setExitCode, kubectl);
  return program;
}

/** Runs the program: a PasslbError becomes its message and exit code 1; help and version
 * exit 0, usage errors 2 (commander has printed them). */
export async function runKubectlProgram(
  program: Command,
  argv: readonly string[],
  io: CliIo,
  setExitCode: (code: number) => void,
): Promise<void> {
  try {
    await program.parseAsync([...argv]);
  } catch (e) {
    if (e instanceof PasslbError) {
      io.stderr(`error: ${e.message} [${e.code}]\n`);
      setExitCode(1);
      return;
    }
    if (e instanceof CommanderError) return setExitCode(e.exitCode === 0 ? 0 : 2);
    throw e;
  }
}
