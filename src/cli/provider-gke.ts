/**
 * The `--provider gke` half of `passlb plan`: the --gke-* flags, their parsing into
 * GkeOptions, and the output (text, json, yaml). Exit code 0, 1 when a Service has an
 * error-level finding, 2 for a bad flag. The planning itself is src/providers/gke/gke-plan.ts.
 */
import type { Command } from "commander";
import { stringify } from "yaml";
import type { Snapshot } from "../k8s/snapshot.ts";
import { type GkeFlagName, gkeFlags, isGkeFlagName, parseFlagBool } from "../providers/gke/gke-flags.ts";
import { planGke } from "../providers/gke/gke-plan.ts";
import { renderGkeText } from "../providers/gke/gke-text.ts";
import type { SubnetIpv6 } from "../providers/gke/gke-types.ts";
import { parseGkeVersion } from "../providers/gke/gke-version.ts";
import type { CliIo } from "./load-input.ts";

export const DEFAULT_GKE_VERSION = "1.37.1-gke.1000000";

export interface GkeCliOptions {
  readonly gkeVersion?: string;
  readonly gkeSubsetting?: boolean;
  readonly gkeFlag?: readonly string[];
  readonly gkeSubnetIpv6?: string;
}

const collect = (value: string, previous: string[] = []) => [...previous, value];

export function addGkeOptions(cmd: Command): Command {
  return cmd
    .option(
      "--gke-version <version>",
      `GKE version, e.g. 1.37.1-gke.1000000 (default ${DEFAULT_GKE_VERSION})`,
    )
    .option("--gke-subsetting", "GKE subsetting on (default: on from 1.36)")
    .option("--no-gke-subsetting", "GKE subsetting off")
    .option(
      "--gke-flag <NAME=VALUE>",
      "override a GKE controller flag (repeatable; see docs/providers-gke.md)",
      collect,
    )
    .option(
      "--gke-subnet-ipv6 <ranges>",
      "IPv6 ranges of the subnet: internal, external, both or none",
      "both",
    );
}

export function runGke(
  snapshot: Snapshot,
  opts: GkeCliOptions,
  view: { output: "text" | "json" | "yaml"; explain: boolean },
  io: CliIo,
): number {
  const version = parseGkeVersion(opts.gkeVersion ?? DEFAULT_GKE_VERSION);
  if (!version) {
    io.stderr(`error: --gke-version "${opts.gkeVersion}" is not a GKE version like 1.37.1-gke.1000000\n`);
    return 2;
  }
  const overrides: Partial<Record<GkeFlagName, boolean>> = {};
  for (const text of opts.gkeFlag ?? []) {
    const [name = "", value = "true"] = text.replace(/^--/, "").split("=", 2);
    const parsed = parseFlagBool(value);
    if (!isGkeFlagName(name) || parsed === undefined) {
      io.stderr(
        `error: --gke-flag "${text}": expected NAME=true|false with a known NAME (docs/providers-gke.md)\n`,
      );
      return 2;
    }
    overrides[name] = parsed;
  }
  const subnetIpv6 = opts.gkeSubnetIpv6 ?? "both";
  if (!["internal", "external", "both", "none"].includes(subnetIpv6)) {
    io.stderr(`error: --gke-subnet-ipv6 "${subnetIpv6}": expected internal, external, both or none\n`);
    return 2;
  }
  const plans = planGke(snapshot, {
    version,
    subsetting: opts.gkeSubsetting,
    flags: gkeFlags(version, overrides),
    subnetIpv6: subnetIpv6 as SubnetIpv6,
  });
  if (view.output === "json") io.stdout(`${JSON.stringify(plans, null, 2)}\n`);
  else if (view.output === "yaml") io.stdout(stringify(plans));
  else io.stdout(renderGkeText(plans, { explain: view.explain }));
  return plans.some((p) => p.findings.some((f) => f.severity === "error")) ? 1 : 0;
}
