/**
 * The BGP announcement engine's interface (docs/vip-announce.md "BGP"): what goes in (per VIP:
 * can this host serve it now, and if not why), what comes out (per VIP: announced or
 * withdrawn, and why; the speaker's sessions and BFD), and the settings a speaker is
 * configured with. Types only, engine-neutral in spirit: BIRD is the one engine behind it
 * today (bird-config.ts, bird-speaker.ts), an FRR or GoBGP driver would take the same input.
 *
 * It does not decide servability (the caller does, from the data plane: bgp-servable.ts) nor
 * elect anything: on a routed LB tier every host that can serve a VIP announces it, and the
 * routers spread flows over them with ECMP (specs/scale-out.md §0, §D).
 */

export type IpFamily = "IPv4" | "IPv6";

/** Input, per VIP: can this host forward it right now, and the reason when not. */
export interface VipServability {
  readonly vip: string;
  readonly family: IpFamily;
  /** the Services (namespace/name) that use this VIP, for the reasons */
  readonly services: readonly string[];
  readonly servable: boolean;
  /** why (either way), e.g. "programmed, 2 healthy nodes" or "no healthy backend on any listener" */
  readonly reason: string;
}

/** Output, per VIP: what this host tells the routers. */
export interface VipAnnouncement {
  readonly vip: string;
  readonly family: IpFamily;
  readonly state: "announced" | "withdrawn";
  readonly reason: string;
}

/** One BGP neighbour, from `--bgp-peer ADDR:ASN` (IPv6 `[ADDR]:ASN`). */
export interface BgpPeer {
  readonly address: string;
  readonly asn: number;
  readonly family: IpFamily;
}

/** Everything the speaker's configuration is rendered from (identical on every LB host but `routerId`). */
export interface BgpSettings {
  readonly asn: number;
  readonly peers: readonly BgpPeer[];
  /** optional: BIRD takes the lowest IPv4 address of the host otherwise */
  readonly routerId?: string;
  /** the kernel routing table passlb writes VIP routes into and the speaker learns from */
  readonly kernelTable: number;
  readonly bfd: { readonly intervalMs: number; readonly multiplier: number } | undefined;
  readonly holdSeconds: number;
  /** seconds between attempts to (re)open a session */
  readonly connectRetrySeconds: number;
  /** BGP communities added to every announced VIP route, "ASN:VALUE" */
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
