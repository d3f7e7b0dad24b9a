/**
 * VIP announcement (`--announce l2`: keepalived; `--announce bgp`: BIRD), one `Announcer`
 * either way (announce/announcer.ts). Started after the first sync (or 10 s), so a VIP is
 * announced only once this host can forward it; after every pass and every read the engine
 * is told which VIPs this host can serve now (vipReadiness) and, with --peer-label, the
 * peers. With it: the wire checks (cli/lb-wire.ts), the BGP objects' status in Kubernetes
 * mode (startBgpStatus) and the engine's state in the metrics every second.
 *
 * An engine that cannot start stops the host (exit 1). Undo, in this order: the metrics
 * timer, the wire checks, the BGP status, the engine (withdrawn gracefully).
 */
import {
  type AnnounceInput,
  type Announcer,
  type AnnouncerEvent,
  type AnnouncerStatus,
  type PeerAddresses,
  vipReadiness,
} from "../../../announce/announcer.ts";
import { BgpEngine } from "../../../announce/bgp/bgp-engine.ts";
import { birdPaths } from "../../../announce/bgp/bird-speaker.ts";
import { type AnnounceConfig, describeAnnounceEvent } from "../../../cli/lb-announce.ts";
import { type BgpConfig, birdLog, startBgpStatus } from "../../../cli/lb-announce-bgp.ts";
import type { KubeLbRun } from "../../../cli/lb-nftables.ts";
import type { WireChecks, WireFinding } from "../../../cli/lb-wire.ts";
import type { ServiceForwarding } from "../../../forwarding/forwarding-state.ts";
import type { LbHostPart, Undo } from "../../lb-host.ts";
import type { NftablesLbHostDrivers } from "../lb-host-drivers.ts";
import type { LbHostSinks } from "../lb-host-sinks.ts";
import type { PassBook } from "../pass-book.ts";
import { StartRefused } from "../start-refused.ts";
import type { ClusterBgp } from "./cluster-bgp.ts";
import { labelledPeers } from "./labelled-peers.ts";

/** how long the announcer waits for the first sync before it starts anyway */
const FIRST_SYNC_WAIT_MS = 10_000;

export interface AnnouncerPartOptions {
  /** exactly one of the two */
  readonly l2: AnnounceConfig | undefined;
  readonly bgp: BgpConfig | undefined;
  readonly wireMs: number;
  readonly host: string;
  readonly book: PassBook;
  readonly forwarding: () => readonly ServiceForwarding[];
  readonly cluster: ClusterBgp | undefined;
  readonly kube: KubeLbRun | undefined;
  readonly drivers: Pick<NftablesLbHostDrivers, "keepalived" | "bird" | "wireChecks" | "clock">;
}

export class AnnouncerPart implements LbHostPart {
  readonly name = "announcer";
  readonly #o: AnnouncerPartOptions;
  readonly #sinks: LbHostSinks;
  readonly #mode: "l2" | "bgp";
  readonly #engineName: "keepalived" | "bird";
  #engine: Announcer | undefined;
  #wire: WireChecks | undefined;

  constructor(options: AnnouncerPartOptions, sinks: LbHostSinks) {
    this.#o = options;
    this.#sinks = sinks;
    this.#mode = options.bgp ? "bgp" : "l2";
    this.#engineName = options.bgp ? "bird" : "keepalived";
    options.book.listen(() => this.#push());
  }

  async start(): Promise<Undo> {
    await this.#firstSyncOr(FIRST_SYNC_WAIT_MS);
    const engine = await this.#startEngine();
    this.#engine = engine;
    const bgp = engine instanceof BgpEngine ? engine : undefined;
    const cluster = this.#o.cluster;
    // LoadBalancerBGPPeers that changed while BIRD started: reconfigured from here on
    if (cluster) cluster.engine = bgp;
    if (bgp && cluster) await bgp.configure(cluster.config.text).catch(() => false);
    this.#wire = this.#o.drivers.wireChecks(this.#wireOptions(engine));
    const { obs } = this.#sinks;
    obs?.observer.announcement(() => this.#status());
    const stopBgpStatus = bgp && this.#bgpStatus(bgp);
    let metrics: ReturnType<typeof setInterval> | undefined;
    if (obs) {
      // the engine's own state (sessions, BFD, VRRP) changes between events too
      obs.metrics.announce(this.#status());
      metrics = setInterval(() => obs.metrics.announce(this.#status()), 1000);
      metrics.unref();
    }
    this.#push(); // reads that landed while it started
    return async () => {
      clearInterval(metrics);
      await this.#wire?.stop();
      stopBgpStatus?.();
      await engine.stop({ graceful: true });
    };
  }

  async #firstSyncOr(ms: number): Promise<void> {
    const { clock } = this.#o.drivers;
    let waited: ReturnType<typeof clock.setTimer> | undefined;
    await Promise.race([
      this.#o.book.firstSync,
      new Promise((r) => (waited = clock.setTimer(() => r(0), ms))),
    ]);
    if (waited) clock.clearTimer(waited);
  }

  async #startEngine(): Promise<Announcer> {
    const { l2, bgp, host, drivers } = this.#o;
    const onEvent = (e: AnnouncerEvent) => this.#onEvent(e);
    const engine = bgp
      ? drivers.bird(bgp, host, onEvent, this.#o.cluster?.config)
      : drivers.keepalived(l2!, this.#peers(), onEvent);
    const refuse = (message: string): StartRefused =>
      new StartRefused(1, `error: --announce ${this.#mode}: ${message}`);
    if (typeof engine === "string") throw refuse(engine);
    try {
      await engine.start(this.#input());
    } catch (e) {
      throw refuse(`${(e as Error).message}${bgp ? ` (state in ${birdLog(bgp)})` : ""}`);
    }
    return engine;
  }

  #peers(): PeerAddresses {
    const { l2, book } = this.#o;
    if (!l2) return new Map();
    return l2.peerLabel ? labelledPeers(book.lastNodes, l2.peerLabel) : l2.peers;
  }

  #input(): AnnounceInput {
    const { book, l2 } = this.#o;
    return {
      vips: vipReadiness({
        planned: book.lastPlanned,
        programmed: this.#o.forwarding(),
        lastPassOk: book.lastPassOk,
        kept: book.lastKept,
        stopping: false,
      }),
      generation: book.syncs,
      ...(l2?.peerLabel ? { peers: labelledPeers(book.lastNodes, l2.peerLabel) } : {}),
    };
  }

  #push(): void {
    if (this.#engine) void this.#engine.update(this.#input());
  }

  #status(): AnnouncerStatus {
    const base = this.#engine!.status();
    return this.#wire ? this.#wire.status(base) : base;
  }

  #onEvent(e: AnnouncerEvent): void {
    const { say, obs } = this.#sinks;
    const line = describeAnnounceEvent(e, this.#engineName);
    say(`passlb lb: ${line}`);
    if (e.kind === "state") obs?.metrics.announceTransition(this.#engineName, e.state);
    if (e.kind === "state") this.#wire?.failover();
    if (this.#engine && obs) obs.metrics.announce(this.#status());
    if (
      e.kind === "failed" ||
      (e.kind === "engine" && (e.state === "restarting" || e.state === "failed" || e.healthy === false))
    )
      obs?.observer.note({ event: `announce_${e.kind}`, severity: "warning", message: line });
  }

  #wireOptions(engine: Announcer) {
    const { l2, bgp, wireMs } = this.#o;
    return {
      periodMs: wireMs,
      engine: () => engine.status(),
      report: (f: WireFinding) => this.#wireFinding(f),
      ...(l2 && {
        l2: {
          self: l2.self,
          interface: l2.interface,
          peers: () => this.#peers(),
          vridRange: l2.vridRange,
          vrrpWatch: l2.vrrpWatch,
        },
      }),
      ...(bgp && { bgpSocket: birdPaths(bgp.stateDir).socket }),
    };
  }

  #wireFinding(f: WireFinding): void {
    const { say, obs } = this.#sinks;
    const services = this.#o.book.lastPlanned
      .filter((p) => p.vips.some((v) => f.vips?.includes(v.address)))
      .map((p) => p.service);
    const on = services.length > 0 ? ` [${services.join(", ")}]` : "";
    say(`passlb lb: wire: ${f.message}${on} [${f.reason}]`);
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
    this.#o.kube?.serviceEvent?.(
      services,
      f.severity === "warning" ? "Warning" : "Normal",
      f.reason,
      f.message,
    );
  }

  /** Kubernetes mode: this host's conditions on the BGP objects */
  #bgpStatus(engine: BgpEngine): (() => void) | undefined {
    const { cluster, kube } = this.#o;
    const bgpPeers = kube?.bgpPeers;
    if (!cluster || !kube?.bgpStatus || !bgpPeers) return undefined;
    return startBgpStatus({
      cluster: cluster.config,
      engine,
      names: () => ({
        peers: bgpPeers().map((p) => p.metadata.name),
        advertisements: (kube.bgpExtras?.().advertisements ?? []).map((a) => a.metadata.name),
      }),
      write: kube.bgpStatus,
      log: (line) => this.#sinks.say(`passlb lb: ${line}`),
    });
  }
}
