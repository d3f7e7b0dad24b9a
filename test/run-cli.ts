/**
 * Runs the passlb command in-process with captured output, for scenario tests.
 */
import { buildProgram } from "../src/cli/program.ts";

export interface CliRun {
  readonly exitCode: number;
  readonly stdout: string;
  readonly stderr: string;
}

export async function runCli(args: readonly string[], stdin = ""): Promise<CliRun> {
  let stdout = "";
  let stderr = "";
  let exitCode = 0;
  const program = buildProgram(
    {
      stdout: (t) => {
        stdout += t;
      },
      stderr: (t) => {
        stderr += t;
      },
      readStdin: async () => stdin,
    },
    (code) => {
      exitCode = code;
    },
  );
  try {
    await program.parseAsync(["node", "passlb", ...args]);
  } catch (e) {
    const code = (e as { exitCode?: number }).exitCode;
    if (code === undefined) throw e;
    exitCode = code === 0 ? 0 : 2;
  }
  return { exitCode, stdout, stderr };
}
