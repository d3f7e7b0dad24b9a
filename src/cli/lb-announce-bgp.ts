/**
 * `passlb lb --announce bgp …` (issue #19, docs/vip-announce.md "BGP"): the flags of the
 * routed LB tier, their validation (each message names the flag), and the BGP engine built
 * from them (src/announce/bgp/bgp-engine.ts, an `Announcer` like keepalived's: lb-nftables.ts
 * drives both the same way, readiness, logs, metrics and the dashboard included).
 *
 * Kubernetes mode with neither `--bgp-asn` nor `--bgp-peer`: the sessions come from the
 * cluster's LoadBalancerBGPPeer objects instead (`ClusterBgpConfig`, decided by
 * src/announce/bgp/bgp-peer-config.ts), follow every change (BIRD `configure`), and what
 * cannot be honoured is logged naming the object and field.
 *
 * Wiring only; every decision lives in src/announce.
 */
import { isIP, isIPv4 } from "node:net";
import { join } from "node:path";
import type { Command } from "commander";
import type { AnnouncerEvent } from "../announce/announcer.ts";
import { type Aggregate, routesFor } from "../announce/bgp/bgp-advertisements.ts";
import { type BgpObjectConditions, bgpConditions } from "../announce/bgp/bgp-conditions.ts";
import { BgpEngine } from "../announce/bgp/bgp-engine.ts";
import {
  type BgpConfigFinding,
  type BgpPeerConfig,
  type BgpPeerConfigInput,
  bgpSettingsFor,
} from "../announce/bgp/bgp-peer-config.ts";
import { type SessionReset, sessionResets } from "../announce/bgp/bgp-session-resets.ts";
import type { BgpPeer, BgpSettings, SpeakerState } from "../announce/bgp/bgp-types.ts";
import { peerProtocolNames, renderBirdConfig, sessionHasBfd } from "../announce/bgp/bird-config.ts";
import { type BgpSpeaker, birdSpeaker } from "../announce/bgp/bird-speaker.ts";
import {
  DEFAULT_KERNEL_TABLE,
  kernelVipRoutes,
  type VipRouteTable,
} from "../announce/bgp/kernel-vip-routes.ts";
import type { LoadBalancerBGPPeer } from "../k8s/load-balancer-bgp-peer.ts";
import type { Node } from "../k8s/objects.ts";

export interface BgpFlags {
  announce: string;
  // optional: commander fills the defaults; code that builds flags in memory may leave them out
  bgpAsn?: string;
  bgpPeer?: string[];
  bgpRouterId?: string;
  bgpCommunity?: string[];
  bfd?: boolean;
  bfdIntervalMs?: string;
  bfdMultiplier?: string;
  bgpHoldS?: string;
  bgpKernelTable?: string;
  bgpConvergeMs?: string;
  bgpPollMs?: string;
  bgpSpeaker?: string;
  stateDir?: string;
}

export const DEFAULT_BGP_STATE_DIR = "/run/passlb/bgp";

export function addBgpOptions(command: Command): void {
  const many = (v: string, p: string[]) => [...p, v];
  command
    .option("--bgp-asn <asn>", "bgp: this LB host's AS number (the same on every LB host is simplest)")
    .option(
      "--bgp-peer <addr:asn>",
      "bgp: a router to peer with, ADDR:ASN or [IPv6]:ASN; repeatable",
      many,
      [],
    )
    .option("--bgp-router-id <ipv4>", "bgp: router id (default: BIRD picks this host's lowest IPv4 address)")
    .option("--bgp-community <asn:value>", "bgp: a community added to every VIP route; repeatable", many, [])
    .option("--no-bfd", "bgp: no BFD (the hold time alone detects a dead LB host)")
    .option("--bfd-interval-ms <ms>", "bgp: BFD transmit and receive interval", "100")
    .option("--bfd-multiplier <n>", "bgp: BFD packets missed before the session is down", "3")
    .option("--bgp-hold-s <s>", "bgp: BGP hold time (keepalive a third of it); 0 or 3..65535", "9")
    .option(
      "--bgp-kernel-table <id>",
      "bgp: kernel routing table of the VIP routes BIRD learns",
      `${DEFAULT_KERNEL_TABLE}`,
    )
    .option(
      "--bgp-converge-ms <ms>",
      "bgp: on a graceful stop, how long to wait after the withdrawal before stopping",
      "2000",
    )
    .option("--bgp-poll-ms <ms>", "bgp: how often to read the speaker's state back", "1000")
    .option(
      "--bgp-speaker <who>",
      "bgp: own (passlb starts BIRD) or external (BIRD runs beside it, e.g. the DaemonSet's bird container, on --state-dir's socket)",
      "own",
    );
  // --state-dir is lb-announce.ts's (one flag for both engines)
}

/** `ADDR:ASN` or `[IPv6]:ASN` → a peer, or the error message. */
export function parseBgpPeer(text: string): BgpPeer | string {
  const m = /^\[([^\]]+)\]:(\d+)$/.exec(text) ?? /^([^:[\]]+):(\d+)$/.exec(text);
  if (!m) return `--bgp-peer: "${text}" is not ADDR:ASN (IPv6: [ADDR]:ASN)`;
  const [, address, asnText] = m;
  const family = isIP(address!);
  if (family === 0) return `--bgp-peer: "${address}" in "${text}" is not an IP address`;
  if (text.startsWith("[") && family !== 6) return `--bgp-peer: "${text}": brackets are for IPv6 addresses`;
  const asn = Number(asnText);
  if (!validAsn(asn)) return `--bgp-peer: ASN ${asnText} in "${text}" must be 1..4294967295`;
  return { address: address!, asn, family: family === 4 ? "IPv4" : "IPv6" };
}

const validAsn = (n: number) => Number.isInteger(n) && n >= 1 && n <= 4294967295;

export interface BgpConfig {
  /** from the flags; undefined: from the cluster's LoadBalancerBGPPeers (ClusterBgpConfig) */
  readonly settings: BgpSettings | undefined;
  readonly kernelTable: number;
  readonly stateDir: string;
  readonly convergeMs: number;
  readonly pollMs: number;
  /** BIRD is the pod's sidecar: never started or stopped by passlb */
  readonly externalSpeaker: boolean;
}

/** Validates the flags: undefined unless `--announce bgp`, else the config or an error message. */
export function bgpAnnounceConfig(given: BgpFlags): BgpConfig | string | undefined {
  if (given.announce !== "bgp") return undefined;
  const flags = {
    bgpPeer: [],
    bgpCommunity: [],
    bfd: true,
    bfdIntervalMs: "100",
    bfdMultiplier: "3",
    bgpHoldS: "9",
    bgpKernelTable: `${DEFAULT_KERNEL_TABLE}`,
    bgpConvergeMs: "2000",
    bgpPollMs: "1000",
    ...given,
  };
  const fromCluster = flags.bgpAsn === undefined && flags.bgpPeer.length === 0;
  if (flags.bgpAsn === undefined && !fromCluster) return "--announce bgp needs --bgp-asn";
  const asn = Number(flags.bgpAsn);
  if (!fromCluster && !validAsn(asn)) return `--bgp-asn: ${flags.bgpAsn} must be 1..4294967295`;
  if (!fromCluster && flags.bgpPeer.length === 0)
    return "--announce bgp needs at least one --bgp-peer ADDR:ASN";
  const peers: BgpPeer[] = [];
  for (const text of flags.bgpPeer) {
    const p = parseBgpPeer(text);
    if (typeof p === "string") return p;
    if (peers.some((q) => q.address === p.address)) return `--bgp-peer: ${p.address} is given twice`;
    peers.push(p);
  }
  if (flags.bgpRouterId !== undefined && !isIPv4(flags.bgpRouterId))
    return `--bgp-router-id: ${flags.bgpRouterId} is not an IPv4 address`;
  for (const c of flags.bgpCommunity) {
    const m = /^(\d+):(\d+)$/.exec(c);
    if (!m || Number(m[1]) > 65535 || Number(m[2]) > 65535)
      return `--bgp-community: "${c}" is not ASN:VALUE with both 0..65535`;
  }
  const interval = Number(flags.bfdIntervalMs);
  const multiplier = Number(flags.bfdMultiplier);
  if (flags.bfd && !(Number.isInteger(interval) && interval >= 10 && interval <= 60000))
    return `--bfd-interval-ms: ${flags.bfdIntervalMs} must be 10..60000`;
  if (flags.bfd && !(Number.isInteger(multiplier) && multiplier >= 2 && multiplier <= 255))
    return `--bfd-multiplier: ${flags.bfdMultiplier} must be 2..255`;
  const hold = Number(flags.bgpHoldS);
  if (!(Number.isInteger(hold) && (hold === 0 || (hold >= 3 && hold <= 65535))))
    return `--bgp-hold-s: ${flags.bgpHoldS} must be 0 or 3..65535`;
  const table = Number(flags.bgpKernelTable);
  if (!(Number.isInteger(table) && table >= 1 && table < 2 ** 31 && ![253, 254, 255].includes(table)))
    return `--bgp-kernel-table: ${flags.bgpKernelTable} must be 1..2147483647 and not a system table (253-255)`;
  const convergeMs = Number(flags.bgpConvergeMs);
  if (!(convergeMs >= 0 && convergeMs <= 600_000)) return "--bgp-converge-ms must be 0..600000";
  const pollMs = Number(flags.bgpPollMs);
  if (!(pollMs >= 100)) return "--bgp-poll-ms must be ≥ 100";
  const speaker = flags.bgpSpeaker ?? "own";
  if (speaker !== "own" && speaker !== "external")
    return `--bgp-speaker must be own or external (got "${speaker}")`;
  const tuning = {
    kernelTable: table,
    stateDir: flags.stateDir ?? DEFAULT_BGP_STATE_DIR,
    convergeMs,
    pollMs,
    externalSpeaker: speaker === "external",
  };
  if (fromCluster) {
    // the flags of the sessions belong to the objects in this mode
    const given = [
      flags.bgpRouterId !== undefined && "--bgp-router-id",
      flags.bgpCommunity.length > 0 && "--bgp-community",
    ].filter(Boolean);
    if (given.length > 0)
      return `${given.join(", ")}: with LoadBalancerBGPPeer objects (no --bgp-asn/--bgp-peer) set it in the objects`;
    return { settings: undefined, ...tuning };
  }
  return {
    ...tuning,
    settings: {
      asn,
      peers,
      ...(flags.bgpRouterId ? { routerId: flags.bgpRouterId } : {}),
      kernelTable: table,
      bfd: flags.bfd ? { intervalMs: interval, multiplier } : undefined,
      holdSeconds: hold,
      connectRetrySeconds: 1,
      communities: flags.bgpCommunity,
    },
  };
}

/**
 * Kubernetes mode: this host's BGP settings following the LoadBalancerBGPPeers, the
 * LoadBalancerBGPAdvertisements, the pools and its Node's labels (bgp-peer-config.ts).
 * `update` after every read gives the BIRD configuration; findings are handed to `report`
 * when they change, not on every read; a change that restarts sessions (bgp-session-resets.ts)
 * is reported before the configuration is handed out to be loaded.
 */
export class ClusterBgpConfig {
  readonly #host: string;
  readonly #kernelTable: number;
  readonly #report: (f: BgpConfigFinding) => void;
  readonly #reportReset: (r: SessionReset) => void;
  #findings = "";
  #text: string;
  #settings: BgpSettings;
  #bfdPeers: ReadonlySet<string> = new Set();
  #md5Peers: ReadonlySet<string> = new Set();
  #selected: readonly string[] = [];
  #aggregates: readonly Aggregate[] = [];
  #last: BgpPeerConfig | undefined;

  constructor(options: {
    host: string;
    kernelTable: number;
    report: (f: BgpConfigFinding) => void;
    reportReset?: (r: SessionReset) => void;
  }) {
    this.#host = options.host;
    this.#kernelTable = options.kernelTable;
    this.#report = options.report;
    this.#reportReset = options.reportReset ?? (() => {});
    // before the first read: no session yet, and nothing to report (the read says what is missing)
    this.#settings = bgpSettingsFor({
      host: this.#host,
      labels: undefined,
      peers: [],
      kernelTable: this.#kernelTable,
    }).settings;
    this.#text = renderBirdConfig(this.#settings);
  }

  update(
    peers: readonly LoadBalancerBGPPeer[],
    nodes: readonly Node[],
    more: Omit<BgpPeerConfigInput, "host" | "labels" | "peers" | "kernelTable"> = {},
  ): string {
    const node = nodes.find((n) => n.metadata.name === this.#host);
    const labels = node ? { ...node.metadata.labels } : undefined;
    const decided = bgpSettingsFor({
      ...more,
      host: this.#host,
      labels: labels as Record<string, string> | undefined,
      peers,
      kernelTable: this.#kernelTable,
    });
    const { settings, findings, selected, aggregates } = decided;
    this.#last = decided;
    const key = JSON.stringify(findings);
    if (key !== this.#findings) {
      this.#findings = key;
      for (const f of findings) this.#report(f);
    }
    for (const r of sessionResets(this.#settings, settings)) this.#reportReset(r);
    this.#settings = settings;
    this.#selected = selected;
    this.#aggregates = aggregates;
    this.#bfdPeers = new Set(settings.peers.filter((p) => sessionHasBfd(p, settings)).map((p) => p.address));
    this.#md5Peers = new Set(settings.peers.filter((p) => p.password !== undefined).map((p) => p.address));
    this.#text = renderBirdConfig(settings);
    return this.#text;
  }

  /** the configuration of the last update */
  get text(): string {
    return this.#text;
  }

  /** the LoadBalancerBGPPeers this host peers with, as of the last update */
  get selected(): readonly string[] {
    return this.#selected;
  }

  /** the peer addresses whose sessions have BFD (the speaker's health needs their BFD Up) */
  bfdPeers(): ReadonlySet<string> {
    return this.#bfdPeers;
  }

  /** the peer addresses whose sessions have a TCP MD5 key */
  md5Peers(): ReadonlySet<string> {
    return this.#md5Peers;
  }

  /** this host's conditions on every peer and advertisement object, as of the last update */
  conditions(peers: readonly string[], advertisements: readonly string[], speaker: SpeakerState) {
    if (!this.#last) return [];
    const names = peerProtocolNames(this.#last.settings.peers);
    const protocols = new Map(this.#last.settings.peers.map((p, i) => [p.source ?? "", names[i]!]));
    return bgpConditions({ peers, advertisements, config: this.#last, protocols, speaker });
  }

  /** the kernel-table routes of a ready VIP: its host route and its aggregates */
  routesFor(vip: string): readonly string[] {
    return routesFor(vip, this.#aggregates);
  }
}

/** The BGP engine for these flags (not started): the same `Announcer` as keepalived's. */
export function bgpAnnouncer(
  config: BgpConfig,
  host: string,
  onEvent: (e: AnnouncerEvent) => void,
  cluster?: ClusterBgpConfig,
  /** tests: a fake speaker and route table */
  adapters: { speaker?: BgpSpeaker; routes?: VipRouteTable } = {},
): BgpEngine {
  const settings = config.settings;
  if (!settings && !cluster) throw new Error("bgpAnnouncer: neither flag settings nor the cluster's");
  const bfd = settings ? settings.bfd !== undefined : () => cluster!.bfdPeers();
  return new BgpEngine({
    host,
    speaker:
      adapters.speaker ??
      birdSpeaker({
        stateDir: config.stateDir,
        bfd,
        external: config.externalSpeaker,
        ...(cluster && { md5: () => cluster.md5Peers() }),
      }),
    ...(cluster && { routesFor: (vip: string) => cluster.routesFor(vip) }),
    routes: adapters.routes ?? kernelVipRoutes({ table: config.kernelTable }),
    config: settings ? renderBirdConfig(settings) : cluster!.text,
    pollMs: config.pollMs,
    convergeMs: config.convergeMs,
    sleep: (ms) => new Promise((r) => setTimeout(r, ms)),
    onEvent,
  });
}

/** Where to look when BIRD would not start. */
export const birdLog = (config: BgpConfig) => join(config.stateDir, "bird.log");

/**
 * Kubernetes mode: this host's conditions written to the BGP objects' status every
 * `everyMs` (only what changed is written: cluster/bgp-status-writer.ts); failures are logged
 * and tried again. Returns the stop function.
 */
export function startBgpStatus(options: {
  readonly cluster: ClusterBgpConfig;
  readonly engine: BgpEngine;
  readonly names: () => { peers: readonly string[]; advertisements: readonly string[] };
  readonly write: (objects: readonly BgpObjectConditions[]) => Promise<string[]>;
  readonly log: (line: string) => void;
  readonly everyMs?: number;
}): () => void {
  let busy = false;
  const tick = async () => {
    if (busy) return;
    busy = true;
    try {
      const { peers, advertisements } = options.names();
      const failed = await options.write(
        options.cluster.conditions(peers, advertisements, options.engine.speakerState),
      );
      for (const f of failed) options.log(`bgp: could not write ${f}`);
    } finally {
      busy = false;
    }
  };
  const timer = setInterval(() => void tick(), options.everyMs ?? 5000);
  timer.unref();
  void tick();
  return () => clearInterval(timer);
}
