/**
 * Config + drivers → the nftables LB host (`passlb lb --dataplane nftables|xdp`): an
 * `LbHost` (lb-host.ts) with the parts the config asks for, in start order —
 *
 * preflight (nft usable) → conntrack (sizing) → health (prober; not with --no-probe or
 * --once) → tunnel-check (encap with routes; not with --once) → generations (`nft monitor`;
 * with a drift check, not with --once) → fast-path (XDP, optional) → nat-claim
 * (--claim-nat) → manifests (the first read; manifests mode) → dataplane (LbController) →
 * dashboard (with Observability) → input (the first read fed, or the Kubernetes source) →
 * announcer (--announce; not with --once) → watch (manifests mode, not with --once) →
 * reporter (manifests mode with metrics and --counters-ms, not with --once)
 *
 * — and stopped newest first. The parts share one PassBook (pass-book.ts). `once()` is
 * `--once`'s one sync, after start. Deliberately not here: flags (lb-host-config.ts), the
 * exit codes and signals (cli/lb-nftables.ts).
 */
import type { KubeLbRun } from "../../cli/lb-nftables.ts";
import type { FastPath } from "../fast-path.ts";
import { LbHost, type LbHostEvents, type LbHostPart } from "../lb-host.ts";
import type { NftablesLbHostConfig } from "../lb-host-config.ts";
import type { LbController } from "../nftables/lb-controller.ts";
import type { NftablesLbHostDrivers } from "./lb-host-drivers.ts";
import type { LbHostSinks } from "./lb-host-sinks.ts";
import { AnnouncerPart } from "./parts/announcer-part.ts";
import { ClusterBgp } from "./parts/cluster-bgp.ts";
import { ConntrackPart } from "./parts/conntrack-part.ts";
import { DashboardPart } from "./parts/dashboard-part.ts";
import { DataplanePart } from "./parts/dataplane-part.ts";
import { FastPathPart } from "./parts/fast-path-part.ts";
import { GenerationsPart } from "./parts/generations-part.ts";
import { HealthPart } from "./parts/health-part.ts";
import { KubeInput } from "./parts/kube-input.ts";
import { ManifestInput } from "./parts/manifest-input.ts";
import { NatClaimPart } from "./parts/nat-claim-part.ts";
import { plannedRead } from "./parts/planned-read.ts";
import { PreflightPart } from "./parts/preflight.ts";
import { ReporterPart } from "./parts/reporter-part.ts";
import { TunnelCheckPart } from "./parts/tunnel-check-part.ts";
import { PassBook } from "./pass-book.ts";

export interface NftablesLbHostOptions {
  /** this host's name (--host-name, else the OS's) */
  readonly host: string;
  /** Kubernetes mode (cli/lb-kube.ts) instead of the manifests */
  readonly kube?: KubeLbRun | undefined;
  /** `--dataplane xdp`: the fast path in front of the table (cli/lb-xdp.ts) */
  readonly fastPath?: FastPath | undefined;
  /** `-f -` */
  readonly readStdin: () => Promise<string>;
  /** each part started and stopped (tests) */
  readonly events?: LbHostEvents;
}

export interface NftablesLbHost {
  readonly host: LbHost;
  readonly controller: LbController;
  /** `--once` after start: one sync; 0 synced, 1 failed (or stopped before the first read) */
  once(signal: AbortSignal): Promise<0 | 1>;
}

export function buildNftablesLbHost(
  config: NftablesLbHostConfig,
  drivers: NftablesLbHostDrivers,
  sinks: LbHostSinks,
  options: NftablesLbHostOptions,
): NftablesLbHost {
  const { say, obs } = sinks;
  const { kube, fastPath } = options;
  const { forward, once, driftMs } = config;
  const book = new PassBook();
  const changed = () => book.changed(performance.now());
  const tunnelChecked = forward.mode === "encap" && forward.check === true && !once;
  const health =
    config.probe && !once
      ? new HealthPart(
          { tunnel: tunnelChecked ? { forward, ports: config.checkPorts } : undefined, changed },
          sinks,
        )
      : undefined;
  const tunnelCheck =
    forward.mode === "encap" && config.routes && !once
      ? new TunnelCheckPart(
          {
            routes: drivers.encapCheckRoutes(forward, config.checkPorts),
            addresses: () => health?.prober.tunnelAddresses() ?? [],
            enabled: tunnelChecked,
            everyMs: driftMs > 0 ? driftMs : 5000,
            clock: drivers.clock,
          },
          sinks,
        )
      : undefined;
  const generations =
    !once && driftMs > 0
      ? new GenerationsPart(() =>
          drivers.nftGenerations((stderr) =>
            say(`passlb lb: nft monitor exited (${stderr || "no message"}); restarting`),
          ),
        )
      : undefined;
  const dataplane = new DataplanePart(
    {
      table: config.table,
      seed: config.seed,
      flowTable: config.flows.flowTable,
      nft: drivers.nft,
      ...(config.routes && { routes: drivers.policyRoutes(forward) }),
      forward,
      ...(health && { health: health.source }),
      clock: drivers.clock,
      sizeFor: config.sizeFor,
      ...(kube && { vipSource: "status" as const }),
      debounceMs: 5,
      driftCheckMs: once ? 0 : driftMs,
      ...(generations && { generations }),
      conntrack: drivers.conntrack,
      book,
      fastPath,
    },
    sinks,
  );
  const { controller } = dataplane;
  const cluster =
    config.bgp && !config.bgp.settings && kube
      ? new ClusterBgp(options.host, config.bgp.kernelTable, kube, sinks)
      : undefined;
  const announcer =
    config.announce || config.bgp
      ? new AnnouncerPart(
          {
            l2: config.announce,
            bgp: config.bgp,
            wireMs: config.wireMs,
            host: options.host,
            book,
            forwarding: () => controller.forwarding,
            cluster,
            kube,
            drivers,
          },
          sinks,
        )
      : undefined;
  const planned = plannedRead({ book, fastPath, cluster, health, tunnelCheck, obs, changed });
  const kubeInput = kube && new KubeInput(kube, controller, planned, { once, changed });
  const input = kube
    ? undefined
    : new ManifestInput(manifestOptions(config, options, say), controller, planned);
  const parts: (LbHostPart | undefined)[] = [
    new PreflightPart(drivers.nft, config.table),
    conntrackPart(config, drivers, book, sinks),
    health,
    tunnelCheck,
    generations,
    fastPath && new FastPathPart(fastPath),
    config.claimNat ? new NatClaimPart(drivers.nft, config.table) : undefined,
    input?.firstRead(),
    dataplane,
    obs && new DashboardPart(obs, say),
    kubeInput ?? input?.feed(),
    ...(once ? [] : runningParts(config, { announcer, input, controller, drivers, sinks })),
  ];
  return {
    host: new LbHost(
      parts.filter((p): p is LbHostPart => p !== undefined),
      options.events,
    ),
    controller,
    once: (signal) => syncOnce(controller, kubeInput?.first, signal, fastPath, say),
  };
}

/** the conntrack sizing check: at start, and after the first sync if nf_conntrack was not loaded yet */
function conntrackPart(
  config: NftablesLbHostConfig,
  drivers: NftablesLbHostDrivers,
  book: PassBook,
  sinks: LbHostSinks,
): ConntrackPart {
  const { flowTable, expectedFlows } = config.flows;
  return new ConntrackPart(
    {
      conntrack: drivers.conntrackSysctl,
      max: config.conntrackMax,
      flowTable,
      expectedFlows,
      firstSync: book.firstSync,
    },
    sinks,
  );
}

function manifestOptions(
  config: NftablesLbHostConfig,
  options: NftablesLbHostOptions,
  say: (l: string) => void,
) {
  return { paths: config.paths, pollMs: config.pollMs, once: config.once, readStdin: options.readStdin, say };
}

/** the parts of a host that keeps running (not --once), after the input */
function runningParts(
  config: NftablesLbHostConfig,
  with_: {
    readonly announcer: AnnouncerPart | undefined;
    readonly input: ManifestInput | undefined;
    readonly controller: LbController;
    readonly drivers: NftablesLbHostDrivers;
    readonly sinks: LbHostSinks;
  },
): (LbHostPart | undefined)[] {
  const { input, controller, drivers, sinks } = with_;
  const { obs, say } = sinks;
  return [
    with_.announcer,
    input?.watch(),
    input && obs && config.countersMs > 0
      ? new ReporterPart(
          {
            table: config.table,
            flowTable: config.flows.flowTable,
            everyMs: config.countersMs,
            controller,
            drivers,
          },
          obs,
          say,
        )
      : undefined,
  ];
}

async function syncOnce(
  controller: LbController,
  first: Promise<void> | undefined,
  signal: AbortSignal,
  fastPath: FastPath | undefined,
  say: (line: string) => void,
): Promise<0 | 1> {
  if (first) {
    await Promise.race([first, aborted(signal)]);
    if (signal.aborted) {
      say("passlb lb: stopped before the first read from the API server");
      return 1;
    }
  }
  const outcome = await controller.syncOnce();
  if (outcome.kind !== "ok") {
    say(`passlb lb: sync failed: ${(outcome.cause as Error).message}`);
    return 1;
  }
  say(`passlb lb: ${outcome.mode} sync, ${outcome.bytes} bytes`);
  fastPath?.synced(controller.forwarding);
  return 0;
}

export function aborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
