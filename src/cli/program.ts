/**
 * The `passlb` command tree. Each subcommand lives in its own file and receives its I/O
 * as arguments, so tests run the real command in-process.
 */
import { Command } from "commander";
import { registerEndpointSlicesCommand } from "./endpointslices-command.ts";
import { registerLbCommand } from "./lb-command.ts";
import type { CliIo } from "./load-input.ts";
import { registerPlanCommand } from "./plan-command.ts";

const NEVER_STOP = () => new AbortController().signal;

export function buildProgram(
  io: CliIo,
  setExitCode: (code: number) => void,
  /** fires on shutdown (SIGINT/SIGTERM, installed by main.ts) for commands that run until stopped */
  shutdownSignal: () => AbortSignal = NEVER_STOP,
): Command {
  const program = new Command("passlb")
    .description("Cloud-grade passthrough load balancing for Kubernetes type: LoadBalancer Services")
    .version("0.1.0")
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });
  registerPlanCommand(program, io, setExitCode);
  registerEndpointSlicesCommand(program, io, setExitCode);
  registerLbCommand(program, io, setExitCode, shutdownSignal);
  return program;
}
