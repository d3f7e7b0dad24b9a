/**
 * The `passlb` command tree. Each subcommand lives in its own file and receives its I/O
 * as arguments, so tests run the real command in-process.
 */
import { Command } from "commander";
import { registerAgentCommand } from "./agent-command.ts";
import { registerEndpointSlicesCommand } from "./endpointslices-command.ts";
import { registerLabCommand } from "./lab-command.ts";
import type { CliIo } from "./load-input.ts";
import { registerPlanCommand } from "./plan-command.ts";
import { registerProbeCommand } from "./probe-command.ts";

/** A signal that fires when the process is asked to stop (SIGINT/SIGTERM in main.ts);
 * long-running commands call it once. Tests pass their own. */
export type ShutdownSignal = () => AbortSignal;

const NEVER: ShutdownSignal = () => new AbortController().signal;

export function buildProgram(
  io: CliIo,
  setExitCode: (code: number) => void,
  shutdownSignal: ShutdownSignal = NEVER,
): Command {
  const program = new Command("passlb")
    .description("Cloud-grade passthrough load balancing for Kubernetes type: LoadBalancer Services")
    .version("0.1.0")
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });
  registerPlanCommand(program, io, setExitCode);
  registerEndpointSlicesCommand(program, io, setExitCode);
  registerAgentCommand(program, io, setExitCode, shutdownSignal);
  registerProbeCommand(program, io, setExitCode, shutdownSignal);
  registerLabCommand(program, io, setExitCode);
  return program;
}
