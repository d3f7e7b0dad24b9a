/**
 * The `passlb` command tree. Each subcommand lives in its own file and receives its I/O
 * as arguments, so tests run the real command in-process.
 */
import { Command } from "commander";
import { registerAgentCommand } from "./agent-command.ts";
import { registerControllerCommand } from "./controller-command.ts";
import { registerEndpointSlicesCommand } from "./endpointslices-command.ts";
import { registerImportCommand } from "./import-command.ts";
import { registerLabCommand } from "./lab-command.ts";
import { registerLbCommand } from "./lb-command.ts";
import type { CliIo } from "./load-input.ts";
import { registerPlanCommand } from "./plan-command.ts";
import { registerProbeCommand } from "./probe-command.ts";
import { type HostFacts, registerUpCommand } from "./up-command.ts";

/** A signal that fires when the process is asked to stop (SIGINT/SIGTERM in main.ts);
 * long-running commands call it once. Tests pass their own. */
export type ShutdownSignal = () => AbortSignal;

const NEVER: ShutdownSignal = () => new AbortController().signal;

/** What tests get unless they say otherwise: not a terminal, not root, no nft. */
const PLAIN_HOST: HostFacts = { stdoutIsTTY: false, isRoot: false, hasNft: () => false };

export function buildProgram(
  io: CliIo,
  setExitCode: (code: number) => void,
  shutdownSignal: ShutdownSignal = NEVER,
  host: HostFacts = PLAIN_HOST,
): Command {
  const program = new Command("passlb")
    .description("Cloud-grade passthrough load balancing for Kubernetes type: LoadBalancer Services")
    .version("0.1.0")
    .exitOverride()
    .configureOutput({ writeOut: io.stdout, writeErr: io.stderr });
  registerPlanCommand(program, io, setExitCode);
  registerEndpointSlicesCommand(program, io, setExitCode);
  registerImportCommand(program, io, setExitCode, { kubeEnv: host.kubeEnv ?? {} });
  registerAgentCommand(program, io, setExitCode, shutdownSignal);
  registerProbeCommand(program, io, setExitCode, shutdownSignal);
  registerUpCommand(program, io, setExitCode, { shutdownSignal, ...host });
  registerLbCommand(program, io, setExitCode, { shutdownSignal, ...host });
  registerLabCommand(program, io, setExitCode);
  registerControllerCommand(program, io, setExitCode, {
    shutdownSignal,
    host: { kubeEnv: host.kubeEnv ?? {} },
  });
  return program;
}
