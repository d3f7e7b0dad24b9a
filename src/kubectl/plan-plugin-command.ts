/**
 * `kubectl passlb plan [svc]`: `passlb plan` against the live cluster. The objects come from
 * kubectl (cluster-snapshot.ts), the pools from the cluster's LoadBalancerIPPools, and from
 * there it is the same decode, plan and provider views as `passlb plan -f` (printPlans).
 * VIPs already in Service status are kept, as the controller keeps them.
 */
import type { Command } from "commander";
import type { CliIo } from "../cli/load-input.ts";
import { type PlanPrintFlags, parseOutputFormat, printPlans } from "../cli/plan-command.ts";
import { addAzureOptions } from "../cli/provider-azure.ts";
import { addGkeOptions } from "../cli/provider-gke.ts";
import { objectKey } from "../k8s/snapshot.ts";
import { readClusterSnapshot } from "./cluster-snapshot.ts";
import type { KubectlRunner } from "./kubectl-runner.ts";
import { pickServices } from "./service-pick.ts";

type Flags = PlanPrintFlags & {
  namespace?: string;
  output: string;
  defaultClass?: boolean;
  acceptClass: string[];
};

export function registerPlanPluginCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  kubectl: () => KubectlRunner,
): void {
  const command = program
    .command("plan")
    .description(
      "what passlb — or GKE, or AKS — would build for the cluster's LoadBalancer Services, and why",
    )
    .argument("[service]", "one Service (NAME or NAMESPACE/NAME); all when left out")
    .option("-n, --namespace <ns>", "only Services in this namespace")
    .option("-o, --output <format>", "text, json or yaml", "text")
    .option(
      "--explain",
      "say in plain words why each backend is in or out (for a provider: the decision path)",
    )
    .option("--provider <name>", "whose load balancer to plan: passlb, gke or azure", "passlb")
    .option("--default-class", "passlb also owns LoadBalancer Services without a loadBalancerClass")
    .option(
      "--accept-class <class>",
      "passlb also owns Services of this foreign loadBalancerClass; repeatable (docs/migrate.md)",
      (v: string, p: string[]) => [...p, v],
      [],
    );
  addGkeOptions(command);
  addAzureOptions(command);
  command.action(async (service: string | undefined, opts: Flags) => {
    const format = parseOutputFormat(opts.output);
    if (!format) {
      io.stderr(`error: --output must be text, json or yaml (got "${opts.output}")\n`);
      return setExitCode(2);
    }
    if (!["passlb", "gke", "azure"].includes(opts.provider)) {
      io.stderr(`error: --provider must be passlb, gke or azure (got "${opts.provider}")\n`);
      return setExitCode(2);
    }
    const { snapshot, warnings } = await readClusterSnapshot(kubectl(), {
      defaultClass: opts.defaultClass ?? false,
      acceptClasses: opts.acceptClass,
    });
    for (const w of warnings) io.stderr(`warning: ${w}\n`);
    const pick = pickServices(
      snapshot.services.map((s) => objectKey(s.metadata)),
      service,
      opts.namespace,
    );
    if (!pick.ok) {
      io.stderr(`error: ${pick.error}\n`);
      return setExitCode(1);
    }
    setExitCode(printPlans(snapshot, opts, format, io, pick.matches));
  });
}
