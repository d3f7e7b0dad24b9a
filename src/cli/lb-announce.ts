/**
 * `passlb lb --announce l2 …`: the flags of VIP announcement on a shared segment and the
 * wiring of the keepalived engine (src/announce/keepalived-*.ts, docs/vip-announce.md);
 * `--claim-nat` installs the NAT claim for LB hosts that also run kube-proxy
 * (docs/dataplane-nftables.md). Parses and validates flags, refuses the flags of the
 * heartbeat protocol keepalived replaced (saying what replaced each), builds the real
 * adapters; the decisions live in src/announce.
 */

import { isIP } from "node:net";
import { hostname } from "node:os";
import type { Command } from "commander";
import type { Announcer, AnnouncerEvent, PeerAddresses } from "../announce/announcer.ts";
import { parsePeerLabel } from "../announce/lb-peers.ts";
import { kernelVipAddresses } from "../announce/vip-addresses.ts";
import { parseVridRange } from "../announce/vrrp-adverts.ts";
import { KeepalivedDriver } from "../drivers/keepalived-driver.ts";

export interface AnnounceFlags {
  announce: string;
  interface?: string;
  hostName?: string;
  peers: string[];
  peerLabel?: string;
  stateDir?: string;
  advertMs?: string;
  handoverMs?: string;
  keepalived?: string;
  claimNat?: boolean;
  vridRange?: string;
  garpRefreshS?: string;
  garpRefreshRepeat?: string;
  wireCheckMs?: string;
  vrrpWatch?: boolean;
  // the heartbeat protocol's flags: refused with what replaced them
  heartbeatPort?: string;
  heartbeatMs?: string;
  deadAfterMs?: string;
  quorum?: string;
}

/** flag → why it is gone and what does its job now (docs/vip-announce.md "Flags") */
export const REPLACED_FLAGS = {
  heartbeatPort:
    "--heartbeat-port is gone: the LB hosts speak VRRP (IP protocol 112, unicast to --peers), which has no port",
  heartbeatMs: "--heartbeat-ms is gone: use --advert-ms (the VRRP advertisement interval, default 100)",
  deadAfterMs:
    "--dead-after-ms is gone: keepalived takes a master for dead after 3 × --advert-ms plus the skew time (RFC 5798)",
  quorum:
    '--quorum is gone: VRRP has no quorum; in a partition each side answers for its VIPs (docs/vip-announce.md "Partition")',
} as const;

export function addAnnounceOptions(command: Command): void {
  command
    .option(
      "--announce <mode>",
      "nftables: none, l2 (VRRP through keepalived on --interface) or bgp (BIRD, to --bgp-peer routers), docs/vip-announce.md",
      "none",
    )
    .option("--interface <name>", "l2: the segment interface the VIPs are held on and announced from")
    .option("--host-name <name>", "l2: this host's name in --peers (default: the hostname)")
    .option(
      "--peers <list>",
      "l2: every LB host of the segment as name=address,… (this one included; a name twice for IPv4 and IPv6); repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option(
      "--peer-label <key[=value]>",
      "l2: instead of --peers, every Node with this label is an LB host (at its InternalIPs)",
    )
    .option(
      "--state-dir <dir>",
      "l2: keepalived's configuration, pid files, track files and FIFO (default /run/passlb/l2); bgp: BIRD's config, socket, pid and log (default /run/passlb/bgp)",
    )
    .option(
      "--advert-ms <ms>",
      "l2: VRRP advertisement interval (a dead master is seen after ~3 of them)",
      "100",
    )
    .option(
      "--handover-ms <ms>",
      "l2: on a graceful stop, the longest wait for the peers to take the VIPs before keepalived stops",
      "1000",
    )
    .option("--keepalived <path>", "l2: the keepalived binary", "keepalived")
    .option("--vrid-range <A-B>", "l2: the VRRP router IDs passlb may use on the segment (1..255)", "1-255")
    .option(
      "--garp-refresh-s <s>",
      "l2: the holder repeats its gratuitous ARP / unsolicited NA every s seconds (0: off)",
      "60",
    )
    .option("--garp-refresh-repeat <n>", "l2: gratuitous ARPs / NAs per refresh (1..10)", "1")
    .option(
      "--wire-check-ms <ms>",
      "l2: ask the segment who answers for each VIP (arping/ndisc6) every ms; bgp: compare BIRD's exports; 0: off",
      "10000",
    )
    .option("--no-vrrp-watch", "l2: do not listen (tcpdump) for foreign VRRP speakers on passlb's VRIDs")
    .option("--heartbeat-port <port>", "gone (VRRP has no port)")
    .option("--heartbeat-ms <ms>", "gone: use --advert-ms")
    .option("--dead-after-ms <ms>", "gone: 3 × --advert-ms")
    .option("--quorum <n>", "gone: VRRP has no quorum")
    .option("--claim-nat", "nftables: claim the NAT of forwarded VIP traffic before kube-proxy's DNAT");
}

/** `name=address` items; a name may appear twice, once per address family. */
export function parsePeers(
  values: readonly string[],
): Map<string, { IPv4?: string; IPv6?: string }> | string {
  const peers = new Map<string, { IPv4?: string; IPv6?: string }>();
  for (const item of values.flatMap((v) => v.split(",")).filter((s) => s.trim() !== "")) {
    const [name, address, ...rest] = item.trim().split("=");
    if (!name || !address || rest.length > 0 || isIP(address) === 0)
      return `--peers: "${item}" is not name=address`;
    const family = isIP(address) === 6 ? "IPv6" : "IPv4";
    const entry = peers.get(name) ?? {};
    if (entry[family] !== undefined) return `--peers: ${name} is listed twice for ${family}`;
    peers.set(name, { ...entry, [family]: address });
  }
  return peers;
}

/** Validates the flags; returns undefined for `--announce none` and `bgp` (lb-announce-bgp.ts
 * validates those), or an error message. The heartbeat flags are refused in every mode. */
export function announceConfig(flags: AnnounceFlags) {
  for (const [flag, message] of Object.entries(REPLACED_FLAGS))
    if (flags[flag as keyof typeof REPLACED_FLAGS] !== undefined) return message;
  if (flags.announce === "none" || flags.announce === "bgp") return undefined;
  if (flags.announce !== "l2") return "--announce must be none, l2 or bgp";
  if (!flags.interface) return "--announce l2 needs --interface";
  const peers = parsePeers(flags.peers);
  if (typeof peers === "string") return peers;
  const self = flags.hostName ?? hostname();
  const peerLabel = flags.peerLabel === undefined ? undefined : parsePeerLabel(flags.peerLabel);
  if (flags.peerLabel !== undefined && !peerLabel) return "--peer-label must be key or key=value";
  if (peerLabel && peers.size > 0) return "give --peers or --peer-label, not both";
  if (!peerLabel && !peers.has(self)) return `--peers must list this host (${self}; --host-name to choose)`;
  const advertMs = Number(flags.advertMs ?? "100");
  const handoverMs = Number(flags.handoverMs ?? "1000");
  // VRRPv3 carries the interval in centiseconds, 12 bits (RFC 5798 §5.2.7)
  if (!(Number.isInteger(advertMs) && advertMs >= 10 && advertMs <= 40_950 && advertMs % 10 === 0))
    return "--advert-ms must be 10..40950 in steps of 10 (VRRPv3 counts centiseconds)";
  if (!(handoverMs >= 0 && handoverMs <= 60_000)) return "--handover-ms must be 0..60000";
  const vridRange = parseVridRange(flags.vridRange ?? "1-255");
  if (typeof vridRange === "string") return vridRange;
  const hosts = peerLabel ? 0 : [...peers].filter(([, a]) => a.IPv4 ?? a.IPv6).length;
  if (hosts > vridRange.last - vridRange.first + 1)
    return `--vrid-range ${vridRange.first}-${vridRange.last}: ${hosts} LB hosts in --peers need at least ${hosts} VRIDs`;
  const garpSeconds = Number(flags.garpRefreshS ?? "60");
  if (!(Number.isInteger(garpSeconds) && garpSeconds >= 0 && garpSeconds <= 86_400))
    return `--garp-refresh-s must be 0..86400 whole seconds (0: off), got ${flags.garpRefreshS}`;
  const garpRepeat = Number(flags.garpRefreshRepeat ?? "1");
  if (!(Number.isInteger(garpRepeat) && garpRepeat >= 1 && garpRepeat <= 10))
    return `--garp-refresh-repeat must be 1..10, got ${flags.garpRefreshRepeat}`;
  const wire = wireCheckMs(flags);
  if (typeof wire === "string") return wire;
  return {
    self,
    peers,
    peerLabel,
    interface: flags.interface,
    stateDir: flags.stateDir ?? "/run/passlb/l2",
    keepalived: flags.keepalived ?? "keepalived",
    advertMs,
    handoverMs,
    vridRange,
    garpRefresh: { seconds: garpSeconds, repeat: garpRepeat },
    wireCheckMs: wire,
    vrrpWatch: flags.vrrpWatch !== false,
  };
}

/** `--wire-check-ms`: 0 (off) or 1000..3600000 (each round listens about a second). */
export function wireCheckMs(flags: Pick<AnnounceFlags, "wireCheckMs">): number | string {
  const ms = Number(flags.wireCheckMs ?? "10000");
  if (!(Number.isInteger(ms) && (ms === 0 || (ms >= 1000 && ms <= 3_600_000))))
    return `--wire-check-ms must be 0 (off) or 1000..3600000, got ${flags.wireCheckMs}`;
  return ms;
}

export type AnnounceConfig = Exclude<ReturnType<typeof announceConfig>, string | undefined>;

/** One log line for an engine's event (`engine`: keepalived or bird). */
export function describeAnnounceEvent(e: AnnouncerEvent, engine: string): string {
  switch (e.kind) {
    case "state":
      return `${e.group} ${e.state} (${e.vips.join(", ")})${e.reason ? `: ${e.reason}` : ""}`;
    case "engine":
      return `${engine} ${e.state}${e.pid === undefined ? "" : ` (pid ${e.pid})`}${e.detail ? `: ${e.detail}` : ""}`;
    case "reloaded":
      if (engine === "bird") return "bird reloaded: the BGP configuration changed (LoadBalancerBGPPeers)";
      return `${engine} reloaded: ${e.added} instances added, ${e.removed} removed, ${e.changed} changed`;
    case "cleaned":
      return `removed VIP addresses ${engine} left behind (${e.why}): ${e.vips.join(", ")}`;
    case "failed":
      return `announce: ${(e.error as Error).message ?? String(e.error)}`;
  }
}

/** The keepalived engine for these flags (not started). */
export function keepalivedAnnouncer(
  config: AnnounceConfig,
  peers: PeerAddresses,
  onEvent: (e: AnnouncerEvent) => void,
): Announcer | string {
  if (!peers.has(config.self))
    return `this host (${config.self}) is not among the LB hosts (${[...peers.keys()].join(", ") || "none"})`;
  return new KeepalivedDriver({
    self: config.self,
    interface: config.interface,
    peers,
    stateDir: config.stateDir,
    advertMs: config.advertMs,
    handoverMs: config.handoverMs,
    command: [config.keepalived],
    addresses: kernelVipAddresses({ interface: config.interface }),
    onEvent,
    vridRange: config.vridRange,
    garpRefresh: config.garpRefresh,
  });
}
