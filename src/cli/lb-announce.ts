/**
 * `passlb lb --announce l2 …`: the flags of VIP announcement on a shared segment and the
 * wiring of the announcer (src/announce/*, docs/vip-announce.md); `--claim-nat` installs
 * the NAT claim for LB hosts that also run kube-proxy (docs/dataplane-nftables.md). Parses
 * and validates flags, builds the real adapters; the decisions live in src/announce.
 */

import { isIP } from "node:net";
import { hostname } from "node:os";
import type { Command } from "commander";
import { udpHeartbeat } from "../announce/heartbeat.ts";
import { parsePeerLabel } from "../announce/lb-peers.ts";
import { kernelVipAddresses } from "../announce/vip-addresses.ts";
import { type AnnounceEvent, VipAnnouncer } from "../announce/vip-announcer.ts";
import { realClock } from "../health/clock.ts";

export interface AnnounceFlags {
  announce: string;
  interface?: string;
  hostName?: string;
  peers: string[];
  heartbeatPort: string;
  heartbeatMs: string;
  deadAfterMs: string;
  handoverMs: string;
  quorum?: string;
  peerLabel?: string;
  claimNat?: boolean;
}

export function addAnnounceOptions(command: Command): void {
  command
    .option(
      "--announce <mode>",
      "nftables: none, l2 (hold elected VIPs on --interface) or bgp (announce to --bgp-peer routers), docs/vip-announce.md",
      "none",
    )
    .option("--interface <name>", "l2: the segment interface the VIPs are held on and announced from")
    .option("--host-name <name>", "l2: this host's name in --peers (default: the hostname)")
    .option(
      "--peers <list>",
      "l2: every LB host of the segment as name=address,… (this one included); repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option(
      "--peer-label <key[=value]>",
      "l2: instead of --peers, every Node with this label is an LB host (at its InternalIP)",
    )
    .option("--heartbeat-port <port>", "l2: UDP port of the peer heartbeats", "7480")
    .option("--heartbeat-ms <ms>", "l2: heartbeat interval", "200")
    .option("--dead-after-ms <ms>", "l2: a peer silent this long is dead", "1000")
    .option(
      "--handover-ms <ms>",
      "l2: on a graceful stop, how long to keep the VIPs after the goodbye",
      "300",
    )
    .option("--quorum <n>", "l2: live hosts needed to hold VIPs (default: majority from 3 hosts, else 1)")
    .option("--claim-nat", "nftables: claim the NAT of forwarded VIP traffic before kube-proxy's DNAT");
}

export function parsePeers(values: readonly string[]): Map<string, string> | string {
  const peers = new Map<string, string>();
  for (const item of values.flatMap((v) => v.split(",")).filter((s) => s.trim() !== "")) {
    const [name, address, ...rest] = item.trim().split("=");
    if (!name || !address || rest.length > 0 || isIP(address) === 0)
      return `--peers: "${item}" is not name=address`;
    if (peers.has(name)) return `--peers: ${name} is listed twice`;
    peers.set(name, address);
  }
  return peers;
}

export interface Announce {
  setVips(vips: readonly string[]): void;
  /** with --peer-label: the labelled Nodes as read now */
  setPeers(peers: ReadonlyMap<string, string>): void;
  stop(): Promise<void>;
}

/** Validates the flags; returns undefined for `--announce none`, or an error message. */
export function announceConfig(flags: AnnounceFlags) {
  if (flags.announce === "none") return undefined;
  if (flags.announce !== "l2") return "--announce must be none or l2";
  if (!flags.interface) return "--announce l2 needs --interface";
  const peers = parsePeers(flags.peers);
  if (typeof peers === "string") return peers;
  const self = flags.hostName ?? hostname();
  const peerLabel = flags.peerLabel === undefined ? undefined : parsePeerLabel(flags.peerLabel);
  if (flags.peerLabel !== undefined && !peerLabel) return "--peer-label must be key or key=value";
  if (peerLabel && peers.size > 0) return "give --peers or --peer-label, not both";
  if (!peerLabel && !peers.has(self)) return `--peers must list this host (${self}; --host-name to choose)`;
  const nums = {
    port: Number(flags.heartbeatPort),
    intervalMs: Number(flags.heartbeatMs),
    deadAfterMs: Number(flags.deadAfterMs),
    handoverMs: Number(flags.handoverMs),
  };
  if (!Number.isInteger(nums.port) || nums.port < 1 || nums.port > 65535) return "--heartbeat-port: 1..65535";
  if (!(nums.intervalMs >= 20)) return "--heartbeat-ms must be ≥ 20";
  if (!(nums.deadAfterMs >= 2 * nums.intervalMs)) return "--dead-after-ms must be ≥ 2 × --heartbeat-ms";
  if (!(nums.handoverMs >= 0)) return "--handover-ms must be ≥ 0";
  const quorum = flags.quorum === undefined ? undefined : Number(flags.quorum);
  if (
    quorum !== undefined &&
    !peerLabel &&
    !(Number.isInteger(quorum) && quorum >= 1 && quorum <= peers.size)
  )
    return `--quorum must be 1..${peers.size}`;
  if (quorum !== undefined && peerLabel) return "--quorum needs a fixed --peers list";
  return { self, peers, peerLabel, interface: flags.interface, quorum, ...nums };
}

export type AnnounceConfig = Exclude<ReturnType<typeof announceConfig>, string | undefined>;

/**
 * Starts announcing `vips`; `peers` replaces the configured list (from --peer-label) and
 * must include this host. A start that fails (the interface, the heartbeat port) is the
 * returned message.
 */
export async function startAnnounce(
  config: AnnounceConfig,
  log: (line: string) => void,
  peers: ReadonlyMap<string, string>,
  vips: readonly string[],
): Promise<Announce | string> {
  if (!peers.has(config.self))
    return `this host (${config.self}) is not among the LB hosts (${[...peers.keys()].join(", ") || "none"})`;
  const describe = (e: AnnounceEvent): string => {
    switch (e.kind) {
      case "took":
        return `holds ${e.vip} (live: ${e.live.join(", ")})`;
      case "released":
        return `released ${e.vip} (${e.reason})`;
      case "peer":
        return `peer ${e.host} ${e.state}`;
      case "cannot_hold":
        return `holds no VIP: ${e.reason}`;
      case "failed":
        return `announce failed: ${(e.error as Error).message ?? String(e.error)}`;
    }
  };
  const heartbeat = udpHeartbeat({
    self: config.self,
    peers,
    port: config.port,
    onError: (e) => log(`heartbeat: ${e.message}`),
  });
  const announcer = new VipAnnouncer({
    self: config.self,
    hosts: [...peers.keys()],
    heartbeat,
    // held addresses expire 3 s after the last renewal (every second): a killed process's
    // VIPs leave its interface by themselves (docs/vip-announce.md "What counts as a dead host")
    addresses: kernelVipAddresses({ interface: config.interface, leaseSeconds: 3 }),
    renewMs: 1000,
    clock: realClock(),
    intervalMs: config.intervalMs,
    deadAfterMs: config.deadAfterMs,
    handoverMs: config.handoverMs,
    ...(config.quorum === undefined ? {} : { quorum: config.quorum }),
    onEvent: (e) => log(describe(e)),
  });
  announcer.setVips(vips);
  try {
    await announcer.start();
  } catch (e) {
    await heartbeat.close();
    return (e as Error).message;
  }
  return {
    setVips(next) {
      announcer.setVips(next);
    },
    setPeers(next) {
      // this host's own address stays what the socket is bound to
      if (!next.has(config.self))
        return log(`this host is no longer labelled as an LB host; keeping the last peer list`);
      heartbeat.setPeers?.(next);
      announcer.setHosts([...next.keys()]);
    },
    stop() {
      return announcer.stop();
    },
  };
}
