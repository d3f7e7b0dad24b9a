/**
 * The announcement metrics of an LB host (docs/metrics.md, docs/vip-announce.md): the engine
 * (keepalived or BIRD) and what it holds, VRRP instances, BGP and BFD sessions, and the wire
 * checks. Part of the one catalogue defineMetrics (metric-definitions.ts) registers; the
 * naming rules are that file's.
 */
import { Counter, Gauge, type Registry } from "prom-client";

/** Announcing VIPs: the engine (keepalived or BIRD), VRRP instances, BGP and BFD sessions, and the wire checks. */
export function announceMetrics(r: Registry[]) {
  return {
    announceVips: new Gauge({
      name: "passlb_announce_vips",
      help: "VIPs by announcement state on this host (held, backup, withdrawn), by engine.",
      labelNames: ["engine", "state"] as const,
      registers: r,
    }),
    announceEngineUp: new Gauge({
      name: "passlb_announce_engine_up",
      help: "1 while the announcement engine (keepalived or bird) runs, 0 while it is down or restarting.",
      labelNames: ["engine"] as const,
      registers: r,
    }),
    announceTransitions: new Counter({
      name: "passlb_announce_transitions_total",
      help: "State transitions the announcement engine reported (keepalived: VRRP instance states; bird: a VIP held or withdrawn), by state.",
      labelNames: ["engine", "state"] as const,
      registers: r,
    }),
    announceVipHeld: new Gauge({
      name: "passlb_announce_vip_held",
      help: "1 while this LB host announces the VIP (keepalived: VRRP master; bird: route exported over an established session), else 0, by engine and vip.",
      labelNames: ["engine", "vip"] as const,
      registers: r,
    }),
    vrrpInstanceState: new Gauge({
      name: "passlb_vrrp_instance_state",
      help: "1 for the state keepalived reports for a vrrp_instance of this LB host (MASTER, BACKUP, FAULT, STOP, UNKNOWN), 0 for the others.",
      labelNames: ["vrrp_instance", "state"] as const,
      registers: r,
    }),
    bgpSessionUp: new Gauge({
      name: "passlb_bgp_session_up",
      help: "1 when the BGP session to a peer is Established, else 0 (passlb lb --announce bgp).",
      labelNames: ["peer"] as const,
      registers: r,
    }),
    bfdSessionUp: new Gauge({
      name: "passlb_bfd_session_up",
      help: "1 when the BFD session to a BGP peer is Up, else 0 (only with BFD on).",
      labelNames: ["peer"] as const,
      registers: r,
    }),
    bgpSpeakerState: new Gauge({
      name: "passlb_bgp_speaker_state",
      help: "1 for the BGP speaker's session health (healthy, degraded, down), 0 for the others (engine bird).",
      labelNames: ["state"] as const,
      registers: r,
    }),
    bgpSessionTransitions: new Counter({
      name: "passlb_bgp_session_transitions_total",
      help: "Changes of a BGP session's state seen by passlb lb (to: up or down), by peer: flaps show as increases.",
      labelNames: ["peer", "to"] as const,
      registers: r,
    }),
    bfdSessionTransitions: new Counter({
      name: "passlb_bfd_session_transitions_total",
      help: "Changes of a BFD session's state seen by passlb lb (to: up or down), by peer.",
      labelNames: ["peer", "to"] as const,
      registers: r,
    }),
    wireProblems: new Gauge({
      name: "passlb_announce_wire_problems",
      help: "1 while the wire disagrees with the announcement of a VIP (problem: duplicate_answer, foreign_mac, no_answer, bgp_not_exported, bgp_unexpected_export), 0 once it agrees.",
      labelNames: ["vip", "problem"] as const,
      registers: r,
    }),
    vrrpForeignSpeaker: new Gauge({
      name: "passlb_vrrp_foreign_speaker",
      help: "1 while a VRRP speaker that is not an LB host advertises one of passlb's VRIDs on the interface, 0 after it went quiet.",
      labelNames: ["interface", "vrid"] as const,
      registers: r,
    }),
  };
}
