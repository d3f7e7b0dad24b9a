/**
 * `passlb plan -f …`: decode the manifests and print what passlb would build per
 * LoadBalancer Service. Exit 0 clean, 1 when a Service has error-level issues, 2 on
 * invalid input. With `--announce l2|bgp` and the LB hosts (`--peers` or `--peer-label`, as
 * for `passlb lb`), also which hosts announce each VIP and why (plan-announce.ts).
 */
import type { Command } from "commander";
import { stringify } from "yaml";
import { slicesForSnapshot } from "../endpoints/snapshot-slices.ts";
import type { Document } from "../k8s/documents.ts";
import { objectKey, type Snapshot } from "../k8s/snapshot.ts";
import { type Forward, type ForwardFlags, forwardFromFlags, memberPaths } from "../lb-host/routing/encap.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { planJson } from "../plan/plan-json.ts";
import { renderPlansText } from "../plan/plan-text.ts";
import { planSnapshot, type SkippedService } from "../plan/planner.ts";
import { type CliIo, loadSnapshot } from "./load-input.ts";
import {
  addPlanAnnounceOptions,
  announceView,
  type PlanAnnounceFlags,
  planAnnounceFrom,
} from "./plan-announce.ts";
import {
  addPlanDataplaneOption,
  type PlanDataplaneView,
  planDataplaneFrom,
  planDataplaneView,
} from "./plan-dataplane.ts";
import { type AzureFlags, addAzureOptions, runAzure } from "./provider-azure.ts";
import { addGkeOptions, type GkeCliOptions, runGke } from "./provider-gke.ts";

const collect = (value: string, previous: string[]) => [...previous, value];

export type OutputFormat = "text" | "json" | "yaml";

export function parseOutputFormat(
  value: string,
  allowed: readonly OutputFormat[] = ["text", "json", "yaml"],
): OutputFormat | undefined {
  return (allowed as readonly string[]).includes(value) ? (value as OutputFormat) : undefined;
}

type PlanFlags = {
  filename: string[];
  output: string;
  explain?: boolean;
  provider: string;
  acceptClass: string[];
  defaultClass?: boolean;
  dataplane?: string;
} & GkeCliOptions &
  AzureFlags &
  ForwardFlags &
  PlanAnnounceFlags;

export function registerPlanCommand(program: Command, io: CliIo, setExitCode: (code: number) => void): void {
  const command = program
    .command("plan")
    .description("show what passlb — or GKE, or AKS — would build for each LoadBalancer Service, and why")
    .option(
      "-f, --filename <path>",
      "manifest file, directory (recursive) or - for stdin; repeatable",
      collect,
      [],
    )
    .option("-o, --output <format>", "text, json or yaml", "text")
    .option(
      "--explain",
      "say in plain words why each backend is in or out (for a provider: the decision path)",
    )
    .option("--provider <name>", "whose load balancer to plan: passlb, gke or azure", "passlb")
    .option(
      "--accept-class <class>",
      "also plan Services of this foreign loadBalancerClass (io.cilium/l2-announcer, …); repeatable",
      collect,
      [],
    )
    .option("--default-class", "also plan Services without a loadBalancerClass (PasslbConfig defaultClass)")
    .option("--forward <mode>", "show how an LB host with this mode reaches each node: route or encap")
    .option("--encap <kind>", "with --forward encap: vxlan-gpe (default), ipip, gre or gue")
    .option("--encap-port <n>", "with --forward encap: the UDP port (vxlan-gpe 4790, gue 6080)")
    .option(
      "--direct <cidr>",
      "with --forward encap: nodes here are routed directly; repeatable",
      collect,
      [],
    )
    .option("--encap-check", "with --forward encap: show the routed members as tunnel-checked");
  addPlanAnnounceOptions(command);
  addPlanDataplaneOption(command);
  addGkeOptions(command);
  addAzureOptions(command);
  command.action(async (opts: PlanFlags) => {
    const format = parseOutputFormat(opts.output);
    if (!format) {
      io.stderr(`error: --output must be text, json or yaml (got "${opts.output}")\n`);
      return setExitCode(2);
    }
    if (!["passlb", "gke", "azure"].includes(opts.provider)) {
      io.stderr(`error: --provider must be passlb, gke or azure (got "${opts.provider}")\n`);
      return setExitCode(2);
    }
    const forward = opts.forward === undefined ? undefined : forwardFromFlags(opts);
    if (typeof forward === "string") {
      io.stderr(`error: ${forward}\n`);
      return setExitCode(2);
    }
    const dataplane = planDataplaneFrom(opts.dataplane);
    if (typeof dataplane === "object") {
      io.stderr(`error: ${dataplane.error}\n`);
      return setExitCode(2);
    }
    let documents: readonly Document[] = [];
    const loaded = await loadSnapshot(opts.filename, io, {
      quiet: format !== "text",
      ownKinds: ["LoadBalancerBGPPeer"],
      onDocuments: (d) => {
        documents = d;
      },
    });
    if (!loaded) return setExitCode(2);
    const announce = planAnnounceFrom(opts, loaded, documents);
    if (typeof announce === "string") {
      io.stderr(`error: ${announce}\n`);
      return setExitCode(2);
    }
    const given = withClassFlags(loaded, opts);
    setExitCode(
      printPlans(
        given,
        {
          ...opts,
          ...(forward && { forwardMode: forward }),
          ...(announce && { announceHosts: announce }),
          ...(dataplane && { dataplaneView: dataplane }),
        },
        format,
        io,
      ),
    );
  });
}

/** `--accept-class` and `--default-class` on top of the input's PasslbConfig. */
function withClassFlags(
  snapshot: Snapshot,
  opts: { acceptClass: string[]; defaultClass?: boolean },
): Snapshot {
  if (opts.acceptClass.length === 0 && !opts.defaultClass) return snapshot;
  const accept = [...new Set([...snapshot.config.acceptClasses, ...opts.acceptClass])];
  return {
    ...snapshot,
    config: {
      ...snapshot.config,
      acceptClasses: accept,
      defaultClass: snapshot.config.defaultClass || opts.defaultClass === true,
    },
  };
}

/** What `printPlans` needs from the flags: the view and the providers' own options. */
export type PlanPrintFlags = {
  explain?: boolean;
  provider: string;
  forwardMode?: Forward;
  /** `--dataplane`: the LB host's data plane view per Service (plan-dataplane.ts) */
  dataplaneView?: "nftables" | "xdp";
  /** `--announce`: the LB hosts and mode to show per VIP (plan-announce.ts) */
  announceHosts?: Parameters<typeof announceView>[0];
} & GkeCliOptions &
  AzureFlags;

/**
 * The part of `passlb plan` after the input is decoded, shared with `kubectl passlb plan`:
 * computes the slices standalone mode needs, plans (or runs a provider view) and prints.
 * `only` (given `namespace/name`) picks the Services to print; passlb's planner still sees every
 * Service, so addresses are assigned as for the whole cluster. Returns the exit code.
 */
export function printPlans(
  given: Snapshot,
  opts: PlanPrintFlags,
  format: OutputFormat,
  io: CliIo,
  only?: (service: string) => boolean,
): number {
  // Standalone mode: Services with a selector and no slices in the input get the slices
  // the EndpointSlice controller would write from the Pods (and mirrored ones from Endpoints).
  const computed = slicesForSnapshot(given);
  for (const f of computed.findings)
    if (f.severity !== "info" || format === "text")
      io.stderr(`${f.severity}: ${f.subject}: ${f.message} [${f.code}]\n`);
  const snapshot = { ...given, endpointSlices: computed.endpointSlices };
  const view = { output: format, explain: opts.explain ?? false };
  const forward = opts.forwardMode;
  const keep = only ?? (() => true);
  const picked = () => ({
    ...snapshot,
    services: snapshot.services.filter((s) => keep(objectKey(s.metadata))),
  });
  if (opts.provider === "gke") return runGke(picked(), opts, view, io);
  if (opts.provider === "azure") return runAzure(picked(), opts, view, io);
  const all = planSnapshot(snapshot);
  const plans = all.plans.filter((p) => keep(p.service));
  const skipped = all.skipped.filter((s) => keep(s.service));
  const dataplane = opts.dataplaneView && planDataplaneView(opts.dataplaneView, snapshot, forward);
  const pathsOf = (p: (typeof plans)[number]) =>
    dataplane ? dataplane.paths(p) : forward ? memberPaths(forward, p.members) : undefined;
  // announcement is decided over every plan (a VIP shared by Services), shown per Service
  const announced = opts.announceHosts && announceView(opts.announceHosts, all.plans);
  if (format === "text")
    io.stdout(
      renderPlansText(plans, skipped, {
        ...view,
        ...((forward || dataplane) && { paths: (s: string) => pathsOf(plans.find((p) => p.service === s)!) }),
        ...(dataplane && { dataplane: (s: string) => dataplane.lines(plans.find((p) => p.service === s)!) }),
        ...(announced && { announce: announced }),
      }),
    );
  else {
    const doc = plansDocument(plans, skipped, pathsOf, announced, dataplane);
    io.stdout(
      format === "json" ? `${JSON.stringify(doc, null, 2)}\n` : stringify(JSON.parse(JSON.stringify(doc))),
    );
  }
  return plans.some((p) => p.issues.some((i) => i.severity === "error")) ? 1 : 0;
}

/**
 * `-o json|yaml`: each plan's JSON view (plan-json.ts); with `--forward`, its members with how
 * the LB host reaches each (`members[].path`); with `--announce`, which hosts announce each
 * of its VIPs (`announce`).
 */
function plansDocument(
  plans: readonly LoadBalancerPlan[],
  skipped: readonly SkippedService[],
  pathsOf: ((plan: LoadBalancerPlan) => ReadonlyMap<string, string> | undefined) | undefined,
  announced: ReturnType<typeof announceView> | undefined,
  dataplane: PlanDataplaneView | undefined,
) {
  const services = plans.map((p) => {
    const paths = pathsOf?.(p);
    return {
      ...planJson(p),
      ...(paths && { members: p.members.map((m) => ({ ...m, path: paths.get(m.node) ?? "route" })) }),
      ...(dataplane && { dataplane: dataplane.json(p) }),
      ...(announced && { announce: { mode: announced.mode, vips: announced.forService(p.service) } }),
    };
  });
  return { services, skipped };
}
