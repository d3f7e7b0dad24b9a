/**
 * `passlb plan -f …`: decode the manifests and print what passlb would build per
 * LoadBalancer Service. Exit 0 clean, 1 when a Service has error-level issues, 2 on
 * invalid input.
 */
import type { Command } from "commander";
import { type CliIo, loadSnapshot } from "./load-input.ts";

const collect = (value: string, previous: string[]) => [...previous, value];

export function registerPlanCommand(program: Command, io: CliIo, setExitCode: (code: number) => void): void {
  program
    .command("plan")
    .description("show what passlb would build for each LoadBalancer Service, and why")
    .option(
      "-f, --filename <path>",
      "manifest file, directory (recursive) or - for stdin; repeatable",
      collect,
      [],
    )
    .option("-o, --output <format>", "text, json or yaml", "text")
    .option("--explain", "say in plain words why each backend is in or out")
    .action(async (opts: { filename: string[]; output: string; explain?: boolean }) => {
      const snapshot = await loadSnapshot(opts.filename, io);
      if (!snapshot) return setExitCode(2);
      io.stdout(`${snapshot.services.length} services\n`);
    });
}
