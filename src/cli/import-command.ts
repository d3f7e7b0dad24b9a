/**
 * `passlb import -f DIR|FILE|- [--kubeconfig F] [-o yaml|json]`: converts MetalLB, Cilium,
 * kube-vip, PureLB and OpenELB pools into LoadBalancerIPPools, and MetalLB's BGPPeers (with
 * their BFDProfiles and BGPAdvertisements) into LoadBalancerBGPPeers (standard output); reports
 * per Service what passlb will honour and keep, which foreign controllers still run and the
 * cut-over order (standard error). Exit 0 on success, 2 on invalid input (every problem
 * named; nothing on standard output), 3 when a BGP setting cannot be carried over (named;
 * nothing written unless --allow-lossy). The decision is src/migrate/import-result.ts.
 */
import type { Command } from "commander";
import type { KubeEnv } from "../cluster/kube-config.ts";
import { readManifests } from "../cluster/manifest-files.ts";
import { PasslbError } from "../errors.ts";
import { formatProblem } from "../k8s/decode.ts";
import type { Document } from "../k8s/documents.ts";
import { lostFields } from "../migrate/bgp-field-report.ts";
import { importObjects } from "../migrate/import-result.ts";
import { renderPools, renderReport } from "../migrate/import-text.ts";
import type { CliIo } from "./load-input.ts";

interface ImportFlags {
  filename: string[];
  allowLossy?: boolean;
  kubeconfig?: string;
  output: string;
}

export function registerImportCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  deps: { kubeEnv: KubeEnv },
): void {
  program
    .command("import")
    .description(
      "convert MetalLB, Cilium LB-IPAM, kube-vip, PureLB and OpenELB pools to LoadBalancerIPPools (MetalLB BGP peers to LoadBalancerBGPPeers), and report what each Service keeps",
    )
    .option(
      "-f, --filename <path>",
      "manifest file, directory (recursive) or - for stdin; repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option("--kubeconfig <file>", "read the same kinds from a live cluster")
    .option("-o, --output <format>", "yaml or json", "yaml")
    .option(
      "--allow-lossy",
      "write the objects even when some BGP settings cannot be carried over (they are named in the report)",
    )
    .action(async (opts: ImportFlags) => {
      if (opts.output !== "yaml" && opts.output !== "json") {
        io.stderr(`error: --output must be yaml or json (got "${opts.output}")\n`);
        return setExitCode(2);
      }
      if (opts.filename.length === 0 && opts.kubeconfig === undefined) {
        io.stderr("error: nothing to read: pass -f FILE|DIR|- (repeatable) or --kubeconfig FILE\n");
        return setExitCode(2);
      }
      const documents: Document[] = [];
      const problems: string[] = [];
      if (opts.filename.length > 0) {
        try {
          const read = await readManifests(opts.filename, io.readStdin);
          documents.push(...read.documents);
          problems.push(...read.problems.map(formatProblem));
        } catch (e) {
          if (!(e instanceof PasslbError)) throw e;
          problems.push(e.message);
        }
      }
      if (opts.kubeconfig !== undefined) {
        // @kubernetes/client-node is loaded only when a cluster is read
        const { findKubeConfig } = await import("../cluster/kube-config.ts");
        const { readClusterForImport } = await import("../cluster/import-source.ts");
        try {
          const found = findKubeConfig({ kubeconfig: opts.kubeconfig }, deps.kubeEnv);
          if (!found) problems.push(`${opts.kubeconfig}: no Kubernetes configuration`);
          else {
            const live = await readClusterForImport(found.config);
            documents.push(...live.documents);
            problems.push(...live.problems);
          }
        } catch (e) {
          if (!(e instanceof PasslbError)) throw e;
          problems.push(e.message);
        }
      }
      if (problems.length > 0) {
        io.stderr(
          `error: the input has ${problems.length} problem${problems.length === 1 ? "" : "s"}; nothing written:\n`,
        );
        for (const p of problems) io.stderr(`  ${p}\n`);
        return setExitCode(2);
      }
      const result = importObjects(documents);
      io.stderr(renderReport(result));
      if (result.problems.length > 0) return setExitCode(2);
      const lost = lostFields(result.bgpFields);
      if (lost.length > 0 && !opts.allowLossy) {
        io.stderr(
          `error: ${lost.length} BGP setting${lost.length === 1 ? "" : "s"} would be lost (named above); nothing written. --allow-lossy writes the objects without them\n`,
        );
        return setExitCode(3);
      }
      io.stdout(renderPools(result, opts.output));
      setExitCode(0);
    });
}
