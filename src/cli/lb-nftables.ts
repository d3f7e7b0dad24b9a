/**
 * `passlb lb --dataplane nftables` (or auto as root with nft): the LB host's kernel data
 * plane. Reads the manifests (polled for changes), plans, probes the member nodes, and
 * programs the kernel through the LbController (nftables table `inet <table>` + policy
 * routes) until the shutdown signal. On exit the kernel state is left in place: traffic
 * keeps flowing while the process is down and the next process adopts the table without a
 * flush (docs/dataplane-nftables.md).
 *
 * In Kubernetes mode (`kube` given: lb-kube.ts) the API server replaces the manifests: the
 * source's reads feed the controller, VIPs come from Service status only, and while the API
 * server is away the kernel keeps the last table (docs/kubernetes.md).
 *
 * Wiring only. Exit codes: 0 stopped cleanly (or `--once` synced), 1 the sync failed or
 * nft is unusable, 2 bad flags or unreadable input at start.
 */

import { hostname } from "node:os";
import {
  type AnnounceInput,
  type Announcer,
  type AnnouncerEvent,
  type PeerAddresses,
  type PlannedVips,
  vipReadiness,
} from "../announce/announcer.ts";
import type { BgpObjectConditions } from "../announce/bgp/bgp-conditions.ts";
import type { BgpEngine } from "../announce/bgp/bgp-engine.ts";
import type { BgpPeerConfigInput } from "../announce/bgp/bgp-peer-config.ts";
import { type BgpSpeaker, birdPaths } from "../announce/bgp/bird-speaker.ts";
import type { VipRouteTable } from "../announce/bgp/kernel-vip-routes.ts";
import { lbPeersFromNodes, type PeerLabel } from "../announce/lb-peers.ts";
import { readManifests } from "../cluster/manifest-files.ts";
import type { SnapshotSource, SourceRead } from "../cluster/snapshot-source.ts";
import { manifestSignature, watchManifests } from "../cluster/watch-manifests.ts";
import {
  type ConntrackSysctl,
  createConntrackSysctl,
  readConntrackUsage,
} from "../drivers/conntrack-sysctl.ts";
import { conntrackTool } from "../drivers/conntrack-tool.ts";
import { createPolicyRoutes } from "../drivers/ip-routes.ts";
import { createNftDriver, type NftDriver } from "../drivers/nft.ts";
import { PasslbError } from "../errors.ts";
import { realClock } from "../health/clock.ts";
import { TunnelPorts, tunnelProbe } from "../health/probe-tunnel.ts";
import { ProberHealth } from "../health/prober-health.ts";
import { decodeDocuments, formatProblem } from "../k8s/decode.ts";
import type { LoadBalancerBGPPeer } from "../k8s/load-balancer-bgp-peer.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { checkConntrack } from "../lb-host/conntrack-check.ts";
import type { FastPath } from "../lb-host/fast-path.ts";
import { nftablesLbHostConfig } from "../lb-host/lb-host-config.ts";
import { FlowUsagePacer, readFlowTableUsage } from "../lb-host/nftables/flow-table-usage.ts";
import { type HealthSource, LbController, type LbEvent } from "../lb-host/nftables/lb-controller.ts";
import { createNftGenerationWatch } from "../lb-host/nftables/nft-generation.ts";
import { nodeTrafficOf, serviceTrafficOf } from "../lb-host/nftables/node-traffic.ts";
import { flowTableName } from "../lb-host/nftables/render/flow-map.ts";
import { natClaimTransaction } from "../lb-host/nftables/render/nat-claim.ts";
import { describePath, nodePath } from "../lb-host/routing/encap.ts";
import { createEncapCheckRoutes } from "../lb-host/routing/encap-check-routes.ts";
import { TunnelCheckKeeper } from "../lb-host/tunnel-check-keeper.ts";
import { formatCidr } from "../net/ip.ts";
import { planSnapshot } from "../plan/planner.ts";
import { poolUsage } from "../web/pool-usage.ts";
import {
  type AnnounceFlags,
  addAnnounceOptions,
  describeAnnounceEvent,
  keepalivedAnnouncer,
} from "./lb-announce.ts";
import {
  addBgpOptions,
  type BgpFlags,
  bgpAnnouncer,
  birdLog,
  ClusterBgpConfig,
  startBgpStatus,
} from "./lb-announce-bgp.ts";
import { addFlowOptions } from "./lb-flow-flags.ts";
import { type WireChecks, type WireFinding, wireChecksFor } from "./lb-wire.ts";
import type { CliIo } from "./load-input.ts";
import type { Observability } from "./observability.ts";

/** Kubernetes mode: the source and how a read becomes the LB's snapshot (lb-kube.ts). */
export interface KubeLbRun {
  readonly source: SnapshotSource;
  /** `--announce bgp` without --bgp-peer: the LoadBalancerBGPPeers of the last read */
  readonly bgpPeers?: () => readonly LoadBalancerBGPPeer[];
  /** with bgpPeers: the LoadBalancerBGPAdvertisements and the pools they select */
  readonly bgpExtras?: () => Pick<BgpPeerConfigInput, "advertisements" | "pools" | "secrets">;
  /** with bgpPeers: writes this host's conditions to the objects' status (bgp-status-writer.ts) */
  readonly bgpStatus?: (objects: readonly BgpObjectConditions[]) => Promise<string[]>;
  readonly prepare: (read: Extract<SourceRead, { ok: true }>) => { snapshot: Snapshot; degraded: boolean };
  /** an Event on each of these Services (namespace/name); the wire checks report through it */
  readonly serviceEvent?: (
    services: readonly string[],
    type: "Normal" | "Warning",
    reason: string,
    message: string,
  ) => void;
}

export interface NftLbFlags extends AnnounceFlags, BgpFlags {
  filename: string[];
  manifests: string[];
  table: string;
  seed: string;
  maxTableSize: string;
  routes: boolean;
  probe: boolean;
  once?: boolean;
  pollMs: string;
  driftCheckMs: string;
  countersMs?: string;
  forward?: string;
  encap?: string;
  encapPort?: string;
  encapMtu?: string;
  direct?: string[];
  encapCheck?: boolean;
  encapCheckPorts?: string;
  conntrackMax?: string;
  flowTableSize?: string;
  flowTimeout?: string;
  expectedFlows?: string;
}

/** Adds the nftables flags to `passlb lb`. */
export function addNftablesOptions(command: import("commander").Command): void {
  addFlowOptions(command);
  command
    .option(
      "--manifests <path>",
      "same as -f (watched for changes); repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option("--table <name>", "nftables: the table (family inet) passlb owns", "passlb")
    .option("--seed <n>", "nftables: Maglev and jhash seed; the same on every LB host", "1")
    .option("--max-table-size <m>", "nftables: largest Maglev table in the kernel (a listed prime)", "4093")
    .option("--no-routes", "nftables: do not install policy routes (someone else routes marked packets)")
    .option(
      "--forward <mode>",
      "nftables: how packets reach a node: route (policy route on the shared segment) or encap (tunnel to nodes in other subnets)",
      "route",
    )
    .option("--encap <kind>", "nftables, --forward encap: vxlan-gpe (default), ipip, gre or gue")
    .option("--encap-port <n>", "nftables: UDP port of vxlan-gpe (4790) or gue (6080); the same on the nodes")
    .option("--encap-mtu <n>", "nftables: MTU of the underlay toward the nodes (1500)")
    .option(
      "--direct <cidr>",
      "nftables, --forward encap: nodes in this prefix are on this host's segment and routed directly; repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option(
      "--encap-check",
      "nftables, --forward encap: also probe each routed node through the tunnel (TCP); a node whose tunnel check fails gets no new connections",
    )
    .option(
      "--encap-check-ports <first-last>",
      "nftables, --encap-check: local TCP ports the tunnel probes use (outside ip_local_port_range)",
      "61000-61255",
    )
    .option("--no-probe", "nftables: do not probe the nodes (every member counts as serving)")
    .option("--once", "nftables: sync once and exit")
    .option("--poll-ms <ms>", "nftables: how often to look for manifest changes", "1000")
    .option(
      "--drift-check-ms <ms>",
      "nftables: how often to compare the kernel table with what was applied",
      "5000",
    )
    .option(
      "--counters-ms <ms>",
      "nftables: how often to read the per-node counters into metrics (0: never)",
      "10000",
    )
    .option(
      "--conntrack-max <n>",
      "nftables: set the host's nf_conntrack_max at start (keep it ≥ nf_conntrack_buckets; checked and warned about either way)",
    );
  addAnnounceOptions(command);
  addBgpOptions(command);
}

export async function runNftablesLb(
  flags: NftLbFlags,
  io: CliIo,
  shutdownSignal: () => AbortSignal,
  obs?: Observability,
  kube?: KubeLbRun,
  /** tests: a fake applier instead of the `nft` command, a fake announcement engine, fake conntrack sysctls */
  adapters: {
    readonly nft?: NftDriver;
    readonly announcer?: (peers: PeerAddresses, onEvent: (e: AnnouncerEvent) => void) => Announcer;
    readonly conntrack?: ConntrackSysctl;
    /** `--announce bgp` from LoadBalancerBGPPeers: the real engine over a fake speaker and route table */
    readonly bgp?: { readonly speaker: BgpSpeaker; readonly routes: VipRouteTable };
    /** `--dataplane xdp`: the fast path in front of the table (lb-xdp.ts), fed every committed pass */
    readonly fastPath?: FastPath;
  } = {},
): Promise<number> {
  const given = nftablesLbHostConfig(flags, {
    kube: kube !== undefined,
    bgpPeers: kube?.bgpPeers !== undefined,
  });
  if (!given.ok) return usage(io, given.message);
  const { paths, seed, sizeFor, pollMs, driftMs, countersMs, conntrackMax, forward, flows, checkPorts } =
    given.config;
  // --announce bgp (lb-announce-bgp.ts): the routed LB tier; l2 otherwise
  const { announce: announceWith, bgp: bgpWith, wireMs } = given.config;
  const clusterBgp =
    bgpWith && !bgpWith.settings
      ? new ClusterBgpConfig({
          host: flags.hostName ?? hostname(),
          kernelTable: bgpWith.kernelTable,
          reportReset: (r) => {
            // logged before `birdc configure` restarts it (passwords are never in `changed`'s words)
            const what = `BGP session ${r.protocol}${r.source ? ` (LoadBalancerBGPPeer ${r.source})` : ""} restarts: ${r.changed.join(", ")} changed, which BIRD applies only by restarting the session`;
            io.stderr(`passlb lb: bgp: ${what}\n`);
            obs?.logger.log("warn", { event: "bgp_session_reset", reason: "config_changed" }, what);
          },
          report: (f) => {
            io.stderr(`passlb lb: bgp: ${f.subject}: ${f.message} [${f.code}]\n`);
            obs?.logger.log(
              f.severity === "warning" ? "warn" : "info",
              { event: "bgp_config", reason: f.code },
              `${f.subject}: ${f.message}`,
            );
          },
        })
      : undefined;
  let bgpEngine: BgpEngine | undefined;
  /** the Services the pass under way kept at their last good state; the last pass's; its outcome */
  let passKept = new Set<string>();
  let lastKept: ReadonlySet<string> = new Set();
  let lastPassOk = false;
  let lastPlanned: PlannedVips[] = [];

  const nft = adapters.nft ?? createNftDriver();
  try {
    await nft.dump(flags.table, { terse: true });
  } catch (e) {
    const message = e instanceof PasslbError ? e.message : String(e);
    io.stderr(
      `error: the nftables data plane is not usable here (${message}); run as root with nft ≥ 1.0, or use the userspace proxy\n`,
    );
    return 1;
  }
  let announce: Announcer | undefined;
  let lastNodes: Snapshot["nodes"] = [];
  let syncs = 0;
  let pushAnnounce: () => void = () => {};
  // conntrack sizing (issue 16): checked at start; nf_conntrack may load only with our
  // table (its `ct mark` rules), so then once more after the first sync
  const conntrack = adapters.conntrack ?? createConntrackSysctl();
  const sizeConntrack = () =>
    checkConntrack({
      conntrack,
      max: conntrackMax,
      flowTable: flows.flowTable,
      expectedFlows: flows.expectedFlows,
      log: (line) => io.stderr(`${line}\n`),
      warn: (event, message) => obs?.observer.note({ event, severity: "warning", message }),
    });
  const sized = await sizeConntrack();
  if (sized === "failed") return 1;
  const fastPath = adapters.fastPath;
  try {
    await fastPath?.start();
  } catch (e) {
    io.stderr(`error: xdp: ${(e as Error).message}\n`);
    return 1;
  }

  /** first change (input read, health) not yet in the kernel: the programming latency starts there */
  let pendingSince: number | undefined;
  const changed = () => {
    pendingSince ??= performance.now();
  };
  let lastNote = "";
  let synced: () => void = () => {};
  const firstSync = new Promise<void>((r) => {
    synced = r;
  });
  if (sized === "not_loaded")
    void firstSync.then(async () => {
      if ((await sizeConntrack()) === "not_loaded")
        io.stderr(
          "passlb lb: info conntrack_not_loaded: nf_conntrack is not loaded; its sizes were not checked\n",
        );
    });
  // the repair counters exist at 0 from the start, so an alert's increase() counts the first repair
  for (const what of ["table", "routes"]) obs?.metrics.driftRepair("nftables", what, 0);
  const log = (e: LbEvent) => {
    io.stderr(`passlb lb: ${describe(e)}\n`);
    if (e.kind === "kept_last_good") passKept.add(e.service);
    if (e.kind === "synced" || e.kind === "sync_failed") {
      lastPassOk = e.kind === "synced";
      lastKept = passKept;
      passKept = new Set();
      if (lastPassOk) syncs++;
      pushAnnounce();
    }
    if (e.kind === "synced") synced();
    if (e.kind === "synced") fastPath?.synced(controller.forwarding);
    if (!obs) return;
    if (e.kind === "drift") obs.metrics.driftRepair("nftables", e.scope);
    if (e.kind === "synced") {
      if (e.mode !== "noop") obs.metrics.nftTransaction(e.mode, true, e.ms / 1000);
      obs.metrics.reconcile("lb", "ok");
      if (pendingSince !== undefined)
        obs.metrics.programmed("nftables", (performance.now() - pendingSince) / 1000);
      pendingSince = undefined;
      obs.observer.forwarding(controller.forwarding, prober?.lookup);
    } else if (e.kind === "sync_failed") {
      obs.metrics.reconcile("lb", "retry");
      obs.observer.note({ event: "sync_failed", severity: "warning", message: describe(e) });
    } else if (e.kind !== "adopted" && describe(e) !== lastNote) {
      // a retried failure repeats its message: one event until it changes
      lastNote = describe(e);
      obs.observer.note({
        event: e.kind,
        severity: e.kind === "flows_released" ? "info" : "warning",
        message: lastNote,
      });
    }
  };
  // health: the prober plugs in as one HealthSource (members are `unknown`, i.e. serving,
  // until probed; --no-probe keeps them so)
  const listeners = new Set<() => void>();
  let healthVersion = 0;
  const tunnelChecked = forward.mode === "encap" && forward.check === true && !flags.once;
  const prober =
    flags.probe && !flags.once
      ? new ProberHealth({
          ...(tunnelChecked && {
            tunnel: {
              routed: (address: string) => nodePath(forward, address) === "encap",
              probe: tunnelProbe(new TunnelPorts(checkPorts)),
            },
          }),
          onChange: () => {
            healthVersion++;
            changed();
            for (const l of listeners) l();
          },
          ...(obs && {
            onEvent: (e) => obs.observer.proberEvent(e),
            onProbe: (node, ok, seconds) => obs.observer.probeFinished(node, ok, seconds),
          }),
        })
      : undefined;
  // the tunnel check's rule and routes (encap-check.ts): synced after each new set of
  // targets and on every drift tick; without --encap-check, a previous run's are removed
  const checkRoutes =
    forward.mode === "encap" && flags.routes && !flags.once && !adapters.nft
      ? createEncapCheckRoutes({ forward, ports: checkPorts })
      : undefined;
  const tunnelCheck =
    checkRoutes &&
    new TunnelCheckKeeper({
      routes: checkRoutes,
      addresses: () => prober?.tunnelAddresses() ?? [],
      enabled: tunnelChecked,
      everyMs: driftMs > 0 ? driftMs : 5000,
      clock: realClock(),
      onSynced: (n) => io.stderr(`passlb lb: tunnel check routes synced for ${n} routed node address(es)\n`),
      onFailed: (message) => {
        io.stderr(`passlb lb: ${message}\n`);
        obs?.observer.note({ event: "tunnel_check_routes_failed", severity: "warning", message });
      },
    });
  const syncCheck = (): void => tunnelCheck?.sync();
  const health: HealthSource | undefined = prober && {
    lookup: prober.lookup,
    version: () => healthVersion,
    subscribe: (listener) => {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
  if (forward.mode === "encap")
    io.stderr(
      `passlb lb: forwarding: ${describePath(forward, "encap")} (mtu ${forward.encap.mtu}); routed directly: ${forward.direct.map(formatCidr).join(", ") || "none"}\n`,
    );
  obs?.observer.forwardMode(forward);
  // the kernel's nftables generation: a drift check lists the table only after a commit
  const generations =
    !flags.once && driftMs > 0 && !adapters.nft
      ? createNftGenerationWatch({
          onExit: (stderr) =>
            io.stderr(`passlb lb: nft monitor exited (${stderr || "no message"}); restarting\n`),
        })
      : undefined;
  const controller = new LbController({
    table: flags.table,
    seed,
    flowTable: flows.flowTable,
    nft,
    ...(flags.routes ? { routes: createPolicyRoutes({ forward }) } : {}),
    forward,
    ...(health ? { health } : {}),
    clock: realClock(),
    sizeFor,
    ...(kube && { vipSource: "status" as const }),
    debounceMs: 5,
    driftCheckMs: flags.once ? 0 : driftMs,
    ...(generations && { generations }),
    onEvent: log,
    conntrack: conntrackTool(),
  });
  pushAnnounce = () => {
    if (announce) void announce.update(announceInput());
  };
  if (flags.claimNat) {
    try {
      await nft.run(natClaimTransaction(flags.table));
    } catch (e) {
      io.stderr(`error: --claim-nat: ${(e as Error).message}\n`);
      return 1;
    }
  }
  // VIP announcement (--announce l2: keepalived; --announce bgp: BIRD), one `Announcer`
  // either way: started after the first sync, so a VIP is announced only once this host
  // can forward it; every pass and every read tells the engine which VIPs this host can
  // serve now (announcer.ts vipReadiness), and (l2 with --peer-label) the peers
  const announceInput = (): AnnounceInput => ({
    vips: vipReadiness({
      planned: lastPlanned,
      programmed: controller.forwarding,
      lastPassOk,
      kept: lastKept,
      stopping: false,
    }),
    generation: syncs,
    ...(announceWith?.peerLabel ? { peers: labelledPeers(lastNodes, announceWith.peerLabel) } : {}),
  });
  const announceRead = (snapshot: Snapshot, plans: ReturnType<typeof planSnapshot>["plans"]) => {
    lastPlanned = plans.map((p) => ({ service: p.service, vips: p.vips.map((v) => ({ ...v })) }));
    lastNodes = snapshot.nodes;
    fastPath?.setZones(snapshot.config.zones);
    if (clusterBgp && kube?.bgpPeers) {
      const text = clusterBgp.update(kube.bgpPeers(), snapshot.nodes, kube.bgpExtras?.() ?? {});
      // a refused configuration keeps the last good one running (bird-speaker.ts)
      bgpEngine?.configure(text).catch((e: unknown) => {
        io.stderr(`passlb lb: bgp: the new configuration was refused: ${(e as Error).message}\n`);
        obs?.logger.log("error", { event: "bgp_config", reason: "refused" }, (e as Error).message);
      });
    }
    pushAnnounce();
  };
  const mode = bgpWith ? "bgp" : "l2";
  const engineName = bgpWith ? "bird" : "keepalived";
  let announceMetrics: ReturnType<typeof setInterval> | undefined;
  let wire: WireChecks | undefined;
  const wireFinding = (f: WireFinding) => {
    const services = lastPlanned
      .filter((p) => p.vips.some((v) => f.vips?.includes(v.address)))
      .map((p) => p.service);
    const on = services.length > 0 ? ` [${services.join(", ")}]` : "";
    io.stderr(`passlb lb: wire: ${f.message}${on} [${f.reason}]\n`);
    obs?.logger.log(
      f.severity === "warning" ? "warn" : "info",
      { event: "announce_wire", reason: f.reason },
      f.message,
    );
    obs?.observer.note({
      event: "announce_wire",
      reason: f.reason,
      severity: f.severity,
      ...(services[0] !== undefined && { service: services[0] }),
      message: f.message,
    });
    kube?.serviceEvent?.(services, f.severity === "warning" ? "Warning" : "Normal", f.reason, f.message);
  };
  const announceStatus = () => {
    const base = announce!.status();
    return wire ? wire.status(base) : base;
  };
  let stopBgpStatus: (() => void) | undefined;
  const beginAnnounce = async (): Promise<boolean> => {
    if (!announceWith && !bgpWith) return true;
    let waited: ReturnType<typeof setTimeout> | undefined;
    await Promise.race([firstSync, new Promise((r) => (waited = setTimeout(r, 10_000)))]);
    clearTimeout(waited);
    const peers: PeerAddresses = !announceWith
      ? new Map()
      : announceWith.peerLabel
        ? labelledPeers(lastNodes, announceWith.peerLabel)
        : announceWith.peers;
    const onEvent = (e: AnnouncerEvent) => {
      const line = describeAnnounceEvent(e, engineName);
      io.stderr(`passlb lb: ${line}\n`);
      if (e.kind === "state") obs?.metrics.announceTransition(engineName, e.state);
      if (e.kind === "state") wire?.failover();
      if (announce && obs) obs.metrics.announce(announceStatus());
      if (
        e.kind === "failed" ||
        (e.kind === "engine" && (e.state === "restarting" || e.state === "failed" || e.healthy === false))
      )
        obs?.observer.note({ event: `announce_${e.kind}`, severity: "warning", message: line });
    };
    const bgp =
      bgpWith && !adapters.announcer
        ? bgpAnnouncer(bgpWith, flags.hostName ?? hostname(), onEvent, clusterBgp, adapters.bgp)
        : undefined;
    const engine = adapters.announcer
      ? adapters.announcer(peers, onEvent)
      : (bgp ?? keepalivedAnnouncer(announceWith!, peers, onEvent));
    if (typeof engine === "string") {
      io.stderr(`error: --announce ${mode}: ${engine}\n`);
      return false;
    }
    try {
      await engine.start(announceInput());
    } catch (e) {
      const where = bgpWith ? ` (state in ${birdLog(bgpWith)})` : "";
      io.stderr(`error: --announce ${mode}: ${(e as Error).message}${where}\n`);
      return false;
    }
    announce = engine;
    // LoadBalancerBGPPeers that changed while BIRD started: reconfigured from here on
    bgpEngine = bgp;
    if (bgp && clusterBgp) await bgp.configure(clusterBgp.text).catch(() => false);
    // the announcement checked from the wire (lb-wire.ts; not with a test's fake engine)
    if (!adapters.announcer && !adapters.bgp)
      wire = wireChecksFor({
        periodMs: wireMs,
        engine: () => engine.status(),
        report: wireFinding,
        ...(announceWith && {
          l2: {
            self: announceWith.self,
            interface: announceWith.interface,
            peers: () => (announceWith.peerLabel ? labelledPeers(lastNodes, announceWith.peerLabel) : peers),
            vridRange: announceWith.vridRange,
            vrrpWatch: announceWith.vrrpWatch,
          },
        }),
        ...(bgpWith && { bgpSocket: birdPaths(bgpWith.stateDir).socket }),
      });
    obs?.observer.announcement(announceStatus);
    if (bgp && clusterBgp && kube?.bgpStatus && kube.bgpPeers)
      stopBgpStatus = startBgpStatus({
        cluster: clusterBgp,
        engine: bgp,
        names: () => ({
          peers: kube.bgpPeers!().map((p) => p.metadata.name),
          advertisements: (kube.bgpExtras?.().advertisements ?? []).map((a) => a.metadata.name),
        }),
        write: kube.bgpStatus,
        log: (line) => io.stderr(`passlb lb: ${line}\n`),
      });
    if (obs) {
      // the engine's own state (sessions, BFD, VRRP) changes between events too
      obs.metrics.announce(announceStatus());
      announceMetrics = setInterval(() => obs.metrics.announce(announceStatus()), 1000);
      announceMetrics.unref();
    }
    pushAnnounce(); // reads that landed while it started
    return true;
  };
  if (kube) {
    await controller.start();
    const dashboard = await obs?.serve();
    if (dashboard) io.stderr(`passlb lb: dashboard ${dashboard} (metrics at ${dashboard}metrics)\n`);
    const signal = shutdownSignal();
    const first = kube.source.start({
      onChange: changed,
      onRead: (read) => {
        if (!read.ok) return;
        const next = kube.prepare(read);
        const plans = planSnapshot(next.snapshot, { vipSource: "status" }).plans;
        announceRead(next.snapshot, plans);
        prober?.setPlans(plans);
        syncCheck();
        obs?.metrics.ipPools(poolUsage(next.snapshot.config.pools, plans));
        changed();
        controller.setSnapshot(next.snapshot, next.degraded, !flags.once);
      },
    });
    const aborted = new Promise<void>((resolve) => {
      if (signal.aborted) resolve();
      else signal.addEventListener("abort", () => resolve(), { once: true });
    });
    let code = 0;
    if (flags.once) {
      await Promise.race([first, aborted]);
      if (signal.aborted) {
        io.stderr("passlb lb: stopped before the first read from the API server\n");
        code = 1;
      } else {
        const outcome = await controller.syncOnce();
        if (outcome.kind !== "ok") {
          io.stderr(`passlb lb: sync failed: ${(outcome.cause as Error).message}\n`);
          code = 1;
        } else io.stderr(`passlb lb: ${outcome.mode} sync, ${outcome.bytes} bytes\n`);
        fastPath?.synced(controller.forwarding);
      }
    } else if (await beginAnnounce()) await aborted;
    else code = 1;
    clearInterval(announceMetrics);
    await wire?.stop();
    stopBgpStatus?.();
    await announce?.stop({ graceful: true });
    await kube.source.close();
    await controller.stop();
    await fastPath?.stop();
    generations?.close();
    const checkStopped = tunnelCheck?.stop();
    await prober?.close();
    await checkStopped;
    if (!flags.once) io.stderr("passlb lb: stopped; the kernel keeps forwarding with the last table\n");
    return code;
  }
  const load = async (): Promise<{ snapshot: Snapshot; degraded: boolean } | undefined> => {
    try {
      const read = await readManifests(paths, io.readStdin);
      const decoded = decodeDocuments(read.documents);
      const problems = [...read.problems.map(formatProblem), ...decoded.problems.map(formatProblem)];
      for (const p of problems) io.stderr(`passlb lb: input problem: ${p}\n`);
      const plans = planSnapshot(decoded.snapshot).plans;
      announceRead(decoded.snapshot, plans);
      prober?.setPlans(plans);
      syncCheck();
      healthVersion++; // new targets answer differently
      obs?.metrics.ipPools(poolUsage(decoded.snapshot.config.pools, plans));
      changed();
      return { snapshot: decoded.snapshot, degraded: problems.length > 0 };
    } catch (e) {
      io.stderr(`passlb lb: ${(e as Error).message}\n`);
      return undefined;
    }
  };
  const first = await load();
  if (!first) return 2;
  await controller.start();
  const dashboard = await obs?.serve();
  if (dashboard) io.stderr(`passlb lb: dashboard ${dashboard} (metrics at ${dashboard}metrics)\n`);
  controller.setSnapshot(first.snapshot, first.degraded, !flags.once);
  if (flags.once) {
    const outcome = await controller.syncOnce();
    await controller.stop();
    await fastPath?.stop();
    generations?.close();
    await prober?.close();
    if (outcome.kind !== "ok") {
      io.stderr(`passlb lb: sync failed: ${(outcome.cause as Error).message}\n`);
      return 1;
    }
    io.stderr(`passlb lb: ${outcome.mode} sync, ${outcome.bytes} bytes\n`);
    fastPath?.synced(controller.forwarding);
    await fastPath?.stop();
    return 0;
  }
  if (!(await beginAnnounce())) {
    await controller.stop();
    await fastPath?.stop();
    generations?.close();
    await prober?.close();
    return 1;
  }
  const signal = shutdownSignal();
  watchManifests(paths, {
    intervalMs: pollMs,
    signal,
    initial: await manifestSignature(paths),
    onChange: () => {
      void load().then((next) => {
        if (next) controller.setSnapshot(next.snapshot, next.degraded);
      });
    },
  });
  // per-node packets and bytes from the kernel's counters, at a modest period
  const flowPacer = new FlowUsagePacer(() => performance.now());
  const readCounters = async () => {
    const state = controller.current;
    if (!obs || !state) return;
    try {
      const counters = await nft.counters(flags.table);
      for (const t of nodeTrafficOf(state, controller.forwarding, counters))
        obs.metrics.nodeTraffic(t.node, t.packets, t.bytes);
      for (const t of serviceTrafficOf(controller.forwarding, counters))
        obs.metrics.serviceTraffic(t.service, t.packets, t.bytes);
      if (!adapters.nft)
        void flowPacer
          .maybe(() => readFlowTableUsage(flowTableName(flags.table), flows.flowTable))
          .then(
            (usage) => {
              for (const u of usage ?? []) obs.metrics.flowTable("nftables", u.family, u.entries, u.capacity);
            },
            (e) => io.stderr(`passlb lb: reading the flow table failed: ${(e as Error).message}\n`),
          );
    } catch (e) {
      io.stderr(`passlb lb: reading the node counters failed: ${(e as Error).message}\n`);
    }
    const usage = await readConntrackUsage().catch(() => undefined);
    if (usage) obs.metrics.conntrack(usage.entries, usage.max);
  };
  const counterTimer = obs && countersMs > 0 ? setInterval(() => void readCounters(), countersMs) : undefined;
  counterTimer?.unref();
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
  if (counterTimer) clearInterval(counterTimer);
  clearInterval(announceMetrics);
  await wire?.stop();
  await announce?.stop({ graceful: true });
  await controller.stop();
  await fastPath?.stop();
  generations?.close();
  const checkStopped = tunnelCheck?.stop();
  await prober?.close();
  await checkStopped;
  io.stderr("passlb lb: stopped; the kernel keeps forwarding with the last table\n");
  return 0;
}

/** --peer-label: the labelled Nodes with their InternalIPs of both families */
function labelledPeers(nodes: Snapshot["nodes"], label: PeerLabel): PeerAddresses {
  const v4 = lbPeersFromNodes(nodes, label, "IPv4");
  const v6 = lbPeersFromNodes(nodes, label, "IPv6");
  const out = new Map<string, { IPv4?: string; IPv6?: string }>();
  for (const name of [...new Set([...v4.keys(), ...v6.keys()])].sort()) {
    const a = v4.get(name);
    const b = v6.get(name);
    out.set(name, { ...(a === undefined ? {} : { IPv4: a }), ...(b === undefined ? {} : { IPv6: b }) });
  }
  return out;
}

function usage(io: CliIo, message: string): number {
  io.stderr(`error: ${message}\n`);
  return 2;
}

function describe(e: LbEvent): string {
  switch (e.kind) {
    case "synced":
      return `${e.mode} sync, ${e.bytes} bytes, ${e.ms.toFixed(1)} ms`;
    case "sync_failed":
      return `sync failed (retry in ${e.retryInMs} ms): ${(e.error as Error).message ?? String(e.error)}`;
    case "adopted":
      return `adopted the existing table (${e.sets} sets/maps, ${e.chains} chains) without a flush`;
    case "drift":
      if (e.scope === "flows") return `flow table drifted (${e.what}); restoring it`;
      return e.scope === "table"
        ? `kernel table drifted (${e.what}); full sync`
        : `policy routing drifted (${e.what}); installing the routes again`;
    case "routes_failed":
      return `policy routes not fully installed (retrying): ${(e.error as Error).message}`;
    case "kept_last_good":
      return `${e.service}: kept its last good data plane (${e.reason})`;
    case "flows_released":
      return `${e.service}: released ${e.flows} pinned flow(s) of ${e.node}, which left its table`;
    case "flows_release_failed":
      return `${e.service}: could not release the pinned flows of ${e.node}: ${(e.error as Error).message}`;
  }
}
