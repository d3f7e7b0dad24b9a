/**
 * `passlb plan --provider azure`: the `--azure-*` flags and the run step that prints what
 * cloud-provider-azure (AKS) would build for each LoadBalancer Service
 * (src/providers/azure/azure-plan.ts; docs/providers-azure.md). The plan command owns
 * `-f`, `-o` and `--explain` and calls `runAzure` with the decoded snapshot.
 * Exit codes: 0, 1 when any Service is refused (has `error`), 2 for bad flags.
 */
import { type Command, InvalidArgumentError } from "commander";
import { stringify } from "yaml";
import type { Snapshot } from "../k8s/snapshot.ts";
import {
  AZURE_DEFAULTS,
  type AzureOptions,
  type AzureProbeMode,
  type AzureSku,
} from "../providers/azure/azure-model.ts";
import { planAzure } from "../providers/azure/azure-plan.ts";
import { renderAzureText } from "../providers/azure/azure-text.ts";
import type { CliIo } from "./load-input.ts";

/** The flags as commander hands them over (all optional: defaults come from AZURE_DEFAULTS). */
export interface AzureFlags {
  readonly azureSku?: string;
  readonly azureProbeMode?: string;
  readonly azureSharedProbePort?: string | number;
  readonly azureSharedProbePath?: string;
  readonly azureSubscriptionId?: string;
  readonly azureResourceGroup?: string;
  readonly azureClusterName?: string;
  readonly azureLoadBalancerName?: string;
  readonly azureDisableOutboundSnat?: boolean;
}

const SKUS: Record<string, AzureSku> = { standard: "Standard", basic: "Basic" };
const MODES: Record<string, AzureProbeMode> = { servicenodeport: "servicenodeport", shared: "shared" };

function parseSku(v: string): AzureSku {
  const sku = SKUS[v.toLowerCase()];
  if (sku === undefined) throw new InvalidArgumentError("must be Standard or Basic");
  return sku;
}

function parseMode(v: string): AzureProbeMode {
  const mode = MODES[v.toLowerCase()];
  if (mode === undefined) throw new InvalidArgumentError("must be servicenodeport or shared");
  return mode;
}

function parsePort(v: string): number {
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 65535)
    throw new InvalidArgumentError("must be a port number from 1 to 65535");
  return Number(v);
}

export function addAzureOptions(cmd: Command): Command {
  return cmd
    .option("--azure-sku <sku>", "Azure: load balancer SKU, Standard or Basic (default Standard)", parseSku)
    .option(
      "--azure-probe-mode <mode>",
      "Azure: cloud config clusterServiceLoadBalancerHealthProbeMode, servicenodeport or shared (default servicenodeport)",
      parseMode,
    )
    .option("--azure-shared-probe-port <port>", "Azure: shared probe port (default 10256)", parsePort)
    .option("--azure-shared-probe-path <path>", "Azure: shared probe request path (default /healthz)")
    .option(
      "--azure-subscription-id <id>",
      `Azure: subscription in resource ids (default ${AZURE_DEFAULTS.subscriptionId})`,
    )
    .option(
      "--azure-resource-group <name>",
      `Azure: load balancer resource group (default ${AZURE_DEFAULTS.resourceGroup})`,
    )
    .option(
      "--azure-cluster-name <name>",
      `Azure: cluster name: backend pool and LB name (default ${AZURE_DEFAULTS.clusterName})`,
    )
    .option("--azure-load-balancer-name <name>", "Azure: LB name (default <cluster> or <cluster>-internal)")
    .option("--azure-disable-outbound-snat", "Azure: cloud config disableOutboundSNAT (Standard only)");
}

/** Flags → options; a message naming the flag when one is invalid (for callers that bypass commander's parsers). */
export function azureOptionsFrom(flags: AzureFlags): AzureOptions | string {
  const checked = <T>(flag: string, read: () => T): T => {
    try {
      return read();
    } catch (e) {
      if (e instanceof InvalidArgumentError) throw new InvalidArgumentError(`${flag}: ${e.message}`);
      throw e;
    }
  };
  try {
    const { azureSku: sku, azureProbeMode: mode, azureSharedProbePort: port } = flags;
    return {
      ...AZURE_DEFAULTS,
      ...(sku === undefined ? {} : { sku: checked("--azure-sku", () => parseSku(sku)) }),
      ...(mode === undefined ? {} : { probeMode: checked("--azure-probe-mode", () => parseMode(mode)) }),
      ...(port === undefined
        ? {}
        : { sharedProbePort: checked("--azure-shared-probe-port", () => parsePort(String(port))) }),
      ...(flags.azureSharedProbePath === undefined ? {} : { sharedProbePath: flags.azureSharedProbePath }),
      ...(flags.azureSubscriptionId === undefined ? {} : { subscriptionId: flags.azureSubscriptionId }),
      ...(flags.azureResourceGroup === undefined ? {} : { resourceGroup: flags.azureResourceGroup }),
      ...(flags.azureClusterName === undefined ? {} : { clusterName: flags.azureClusterName }),
      ...(flags.azureLoadBalancerName === undefined ? {} : { loadBalancerName: flags.azureLoadBalancerName }),
      ...(flags.azureDisableOutboundSnat === true ? { disableOutboundSnat: true } : {}),
    };
  } catch (e) {
    if (e instanceof InvalidArgumentError) return e.message;
    throw e;
  }
}

export function runAzure(
  snapshot: Snapshot,
  flags: AzureFlags,
  view: { output: "text" | "json" | "yaml"; explain: boolean },
  io: CliIo,
): number {
  const options = azureOptionsFrom(flags);
  if (typeof options === "string") {
    io.stderr(`error: ${options}\n`);
    return 2;
  }
  const plans = planAzure(snapshot, options);
  if (view.output === "json") io.stdout(`${JSON.stringify(plans, null, 2)}\n`);
  else if (view.output === "yaml") io.stdout(stringify(plans));
  else io.stdout(renderAzureText(plans, { explain: view.explain }));
  return plans.some((p) => "error" in p) ? 1 : 0;
}
