/**
 * The BGP engine's own types (docs/vip-announce.md "BGP: the routed LB tier"): what it tells the
 * routers per VIP (announced or withdrawn, and why), the speaker's sessions and BFD as read
 * back, and the settings a speaker is configured with. Types only. What goes in is the
 * engine-neutral readiness (../announcer.ts `VipReadiness`); what `passlb lb` sees is
 * `AnnouncerStatus` (bgp-engine.ts maps these to it). BIRD is the speaker behind it
 * (bird-config.ts, bird-speaker.ts).
 *
 * It does not decide readiness (../announcer.ts `vipReadiness` does, from the data plane) nor
 * elect anything: on a routed LB tier every host that can serve a VIP announces it, and the
 * routers spread flows over them with ECMP (docs/vip-announce.md "L2 or BGP?", docs/maglev.md).
 */

import type { IpFamily } from "../announcer.ts";

export type { IpFamily };

/** Output, per VIP: what this host tells the routers. */
export interface VipAnnouncement {
  readonly vip: string;
  readonly family: IpFamily;
  readonly state: "announced" | "withdrawn";
  readonly reason: string;
}

/** One BGP neighbour, from `--bgp-peer ADDR:ASN` (IPv6 `[ADDR]:ASN`) or a
 * LoadBalancerBGPPeer (bgp-peer-config.ts). The optional fields override the settings'
 * values for this session only; absent, the session takes the settings' (the flags'). */
export interface BgpPeer {
  readonly address: string;
  /** the router's AS; absent with `dynamicAsn` */
  readonly asn?: number;
  /** accept the AS the router sends, internal (= ours) or external (≠ ours): BIRD `neighbor X internal|external` */
  readonly dynamicAsn?: "internal" | "external";
  readonly family: IpFamily;
  /** the LoadBalancerBGPPeer it came from (a comment in bird.conf; the protocol stays peerN) */
  readonly source?: string;
  /** this host's ASN on this session (LoadBalancerBGPPeer localASN, else myASN) */
  readonly localAsn?: number;
  /** the router's TCP port (179 when absent) */
  readonly port?: number;
  readonly holdSeconds?: number;
  /** absent: a third of the hold time */
  readonly keepaliveSeconds?: number;
  readonly connectRetrySeconds?: number;
  /** BFD on this session; absent: whenever `settings.bfd` is set */
  readonly bfd?: boolean;
  /** this session's own BFD timing (BIRD's per-session `bfd { … }` block) */
  readonly bfdTiming?: BfdTiming;
  /** communities added to the VIP routes sent to this peer, after the settings' ones */
  readonly communities?: readonly string[];
  /** LOCAL_PREF on the VIP routes sent to this peer (iBGP sessions only) */
  readonly localPref?: number;
  /** this host's address on the session (BIRD `source address`) */
  readonly sourceAddress?: string;
  /** TCP MD5 key; checked by k8s/load-balancer-bgp-peer.ts passwordProblem */
  readonly password?: string;
  /** the router is several hops away: BIRD `multihop 255` */
  readonly multihop?: boolean;
  /** RFC 4724 graceful restart on this session */
  readonly gracefulRestart?: boolean;
  /** BGP identifier of this session (BIRD per-protocol `router id`) */
  readonly routerId?: string;
  readonly vrf?: string;
  /** carry both address families over this session */
  readonly dualStack?: boolean;
  /** what this session exports, per family (LoadBalancerBGPAdvertisements: bgp-advertisements.ts);
   * absent: every host route of the session's family(ies) */
  readonly exports?: Readonly<Partial<Record<IpFamily, readonly ExportRule[]>>>;
}

export interface BfdTiming {
  readonly receiveMs: number;
  readonly transmitMs: number;
  readonly multiplier: number;
  readonly passive: boolean;
}

/** One advertisement's part of a session's export filter: the routes it matches (BIRD prefix
 * set items such as `198.51.100.0/24{32,32}`) and what it adds to them. */
export interface ExportRule {
  /** `LoadBalancerBGPAdvertisement NAME`, or `implicit` */
  readonly from: string;
  readonly prefixes: readonly string[];
  readonly communities: readonly string[];
  readonly localPref?: number;
  /** adds its attributes to what other rules select, selects nothing itself (a peer's own ipv4/ipv6 block) */
  readonly attributesOnly?: boolean;
}

/** Everything the speaker's configuration is rendered from (identical on every LB host but `routerId`). */
export interface BgpSettings {
  readonly asn: number;
  readonly peers: readonly BgpPeer[];
  /** optional: BIRD takes the lowest IPv4 address of the host otherwise */
  readonly routerId?: string;
  /** the kernel routing table passlb writes VIP routes into and the speaker learns from */
  readonly kernelTable: number;
  /** BFD timing of every BFD session of the host (BIRD's bfd protocol takes one per
   * interface); `receiveMs`/`transmitMs`, when given, replace `intervalMs` for that direction */
  readonly bfd:
    | {
        readonly intervalMs: number;
        readonly multiplier: number;
        readonly receiveMs?: number;
        readonly transmitMs?: number;
      }
    | undefined;
  readonly holdSeconds: number;
  /** seconds between attempts to (re)open a session */
  readonly connectRetrySeconds: number;
  /** BGP communities added to every announced VIP route, "ASN:VALUE" (or "large:A:B:C") */
  readonly communities: readonly string[];
}

/** A BGP session as the speaker reports it. */
export interface BgpSessionState {
  readonly name: string;
  readonly peer: string;
  /** BGP FSM state: Idle, Connect, Active, OpenSent, OpenConfirm, Established */
  readonly state: string;
  readonly established: boolean;
  /** routes exported to this peer (what it was told) */
  readonly exported: number;
  /** the speaker's last error for this session, if any */
  readonly lastError?: string;
}

export interface BfdSessionState {
  readonly peer: string;
  readonly interface: string;
  /** Up, Down, Init, AdminDown */
  readonly state: string;
}

/** The speaker as read back: "healthy" needs every session established and, with BFD, its BFD session up. */
export interface SpeakerState {
  readonly running: boolean;
  readonly sessions: readonly BgpSessionState[];
  readonly bfd: readonly BfdSessionState[];
  readonly health: "healthy" | "degraded" | "down";
  /** why not healthy (one line per finding) */
  readonly findings: readonly string[];
}
