/**
 * The announcement interface (docs/vip-announce.md "The interface"): what `passlb lb` tells
 * an announcement engine each pass, and what the engine reports back for the log, metrics,
 * the dashboard and `kubectl passlb status`. One interface, two engines: L2 on VRRP
 * (keepalived-driver.ts, `--announce l2`, issue 20) and BGP through BIRD
 * (bgp/bgp-engine.ts, `--announce bgp`, issue 19). `passlb lb` drives both through the
 * same calls and shows both in the same shape.
 *
 * Types only, plus `vipReadiness`, the pure rule that says whether this host can serve a
 * VIP now, the same for both engines. An engine decides nothing about readiness: it only
 * moves the VIPs this host cannot serve away from it (a lower VRRP priority, a withdrawn
 * route).
 */
import type { ServiceForwarding } from "../forwarding/forwarding-state.ts";
import type { WireReport } from "./wire-verdict.ts";

export type IpFamily = "IPv4" | "IPv6";

/** Why this host cannot serve a VIP now (`ok`: it can). */
export type NotReadyReason =
  | "ok"
  | "not_programmed"
  | "no_healthy_backend"
  | "kept_last_good"
  | "sync_failed"
  | "stopping";

export interface VipReadiness {
  readonly vip: string;
  readonly family: IpFamily;
  /** the Services (namespace/name) on this VIP, in plan order */
  readonly services: readonly string[];
  readonly ready: boolean;
  /** the stable code (keepalived's `not_ready:<reason>`, metrics, tests) */
  readonly reason: NotReadyReason;
  /** the words for the log, either way, e.g. `bgp/web: 3 healthy node(s)` */
  readonly detail: string;
}

/** One pass of the data plane, as the announcer sees it. */
export interface AnnounceInput {
  /** every VIP of the current plans (sorted, unique), with whether this host can serve it */
  readonly vips: readonly VipReadiness[];
  /** the data plane's sync count when the readiness was computed (shown, not interpreted) */
  readonly generation: number;
  /** the LB hosts of the segment when they follow the cluster (`--peer-label`); else the configured ones */
  readonly peers?: PeerAddresses;
}

/** LB host name → its addresses on the segment (per family). */
export type PeerAddresses = ReadonlyMap<string, { readonly IPv4?: string; readonly IPv6?: string }>;

/** held: this host answers for the VIP (keepalived: VRRP master; BIRD: announced to a
 * router over an established session); backup: a peer does and this host stands by
 * (keepalived only: on a routed tier every ready host holds its VIPs); withdrawn: this host
 * does not answer and will not take it (not ready, engine down, stopping). */
export type VipAnnounceState = "held" | "backup" | "withdrawn";

export interface VipAnnounceStatus {
  readonly vip: string;
  readonly state: VipAnnounceState;
  /** engine-specific why, e.g. `vrrp_master`, `vrrp_backup`, `engine_down`,
   * `not_ready:no_healthy_backend` (keepalived); `bgp/web: 3 healthy node(s); to 198.51.100.1` (BIRD) */
  readonly reason: string;
  /** the host that holds it while every host is ready (keepalived: the top of its instance's order) */
  readonly preferredHolder?: string;
  /** the engine's grouping of this VIP (keepalived: the vrrp_instance) */
  readonly group?: string;
}

export type EngineState = "starting" | "running" | "restarting" | "stopping" | "stopped" | "failed";

export interface AnnouncerStatus {
  readonly engine: "keepalived" | "bird";
  readonly host: string;
  readonly state: EngineState;
  /** the last problem (a failed reload, an engine exit) */
  readonly detail?: string;
  /** the engine's process id while it runs */
  readonly pid?: number;
  readonly generation: number;
  readonly vips: readonly VipAnnounceStatus[];
  /** per engine group (keepalived: per vrrp_instance): this host's protocol state; BIRD has none */
  readonly groups: readonly {
    readonly name: string;
    readonly state: string;
    readonly priority: number;
    readonly vips: number;
  }[];
  /** engine detail (BIRD): the speaker's health and its BGP sessions with their BFD state */
  readonly speaker?: SpeakerView;
  /** what the wire says (wire-checker.ts, vrrp-watch.ts, bgp/bird-export-check.ts); added by
   * `passlb lb` beside the engine's own status, absent with the checks off */
  readonly wire?: WireReport;
}

export interface SpeakerView {
  /** healthy: every session Established and (with BFD) its BFD session Up; degraded: some;
   * down: none, or BIRD does not answer (bgp/bird-status.ts) */
  readonly health: "healthy" | "degraded" | "down";
  /** why not healthy, one line each */
  readonly findings: readonly string[];
  readonly sessions: readonly {
    readonly peer: string;
    /** BGP FSM state: Idle, Connect, Active, OpenSent, OpenConfirm, Established */
    readonly state: string;
    readonly established: boolean;
    /** the BFD session's state (Up, Down, Init, AdminDown); absent without BFD */
    readonly bfd?: string;
    /** BIRD's protocol name (`p_<LoadBalancerBGPPeer>` or `peerN`) */
    readonly name?: string;
    /** routes exported to this peer (VIP host routes and aggregates) */
    readonly exported?: number;
    /** the speaker's last error, or why the session may be down */
    readonly lastError?: string;
  }[];
}

export type AnnouncerEvent =
  | {
      readonly kind: "state";
      /** keepalived: the vrrp_instance; BIRD: `bgp` */
      readonly group: string;
      /** keepalived: MASTER, BACKUP, FAULT, STOP; BIRD: held, withdrawn */
      readonly state: string;
      readonly vips: readonly string[];
      readonly reason?: string;
    }
  | {
      readonly kind: "engine";
      readonly state: EngineState;
      readonly detail?: string;
      readonly pid?: number;
      /** false when the engine runs but cannot do its job (BIRD: a session or BFD down) */
      readonly healthy?: boolean;
    }
  | { readonly kind: "reloaded"; readonly added: number; readonly removed: number; readonly changed: number }
  | { readonly kind: "cleaned"; readonly vips: readonly string[]; readonly why: string }
  | { readonly kind: "failed"; readonly error: unknown };

/** The engine. Implemented by keepalived-driver.ts and bgp/bgp-engine.ts (and fake-announcer.ts). */
export interface Announcer {
  /** Start (or adopt a running engine) with the first pass's input. A failure is its message. */
  start(input: AnnounceInput): Promise<void>;
  /** A new pass: readiness changes take effect at once; VIP or peer changes reload the engine
   * only when its rendered configuration changed, without disturbing what did not change. */
  update(input: AnnounceInput): Promise<void>;
  status(): AnnouncerStatus;
  /** graceful: hand the VIPs over first (peers take them), then stop the engine;
   * not graceful: leave the engine running for the next process to adopt. */
  stop(options: { readonly graceful: boolean }): Promise<void>;
}

/** The VIPs of the plans just read, per Service. */
export interface PlannedVips {
  readonly service: string;
  readonly vips: readonly { readonly address: string; readonly family: IpFamily }[];
}

export interface ReadinessInput {
  readonly planned: readonly PlannedVips[];
  /** what the last successful data-plane sync applied (LbController.forwarding) */
  readonly programmed: readonly ServiceForwarding[];
  /** the last data-plane pass succeeded (the kernel holds the current generation's tables) */
  readonly lastPassOk: boolean;
  /** Services the last pass kept at their last good state (an input problem) */
  readonly kept: ReadonlySet<string>;
  /** the process is stopping: every VIP goes to the peers */
  readonly stopping: boolean;
}

type Verdict = { readonly reason: NotReadyReason; readonly detail: string };

function serviceVerdict(service: string, vip: string, input: ReadinessInput): Verdict {
  if (input.kept.has(service))
    return { reason: "kept_last_good", detail: `${service} kept its last good data plane` };
  const fw = input.programmed.find((f) => f.service === service);
  if (!fw?.plan.vips.some((v) => v.address === vip))
    return { reason: "not_programmed", detail: `${service} is not programmed with this VIP yet` };
  const healthy = fw.listeners.filter((l) => !l.failOpen && l.backends.length > 0);
  if (healthy.length === 0)
    return { reason: "no_healthy_backend", detail: `${service}: no healthy backend on any listener` };
  const nodes = new Set(healthy.flatMap((l) => l.backends.map((b) => b.node)));
  return { reason: "ok", detail: `${service}: ${nodes.size} healthy node(s)` };
}

/**
 * Whether this host can serve each VIP now (issue 20 "Health stays", issue 19 §1 "Announce
 * only what this host can serve"; docs/vip-announce.md "How a VIP is announced", "Only what this host can
 * serve"). Pure; the same rule for every engine. A VIP is ready when the process is
 * not stopping, the last data-plane pass succeeded (so the kernel holds the current plan's
 * Maglev tables, built from the same manifests, seed and M as on every other LB host), and
 * at least one Service on it is programmed with that VIP, was not kept at its last good
 * state because of an input problem, and has a listener with a healthy backend (fail-open
 * tables count as none: fail-open means no member is healthy, forwarding-state.ts). A VIP
 * several Services share (different ports) is ready when any of them is; when none is, the
 * code is the first Service's. Evaluated after each pass, never during one, so programming
 * a health change does not move every VIP for the few milliseconds of the pass.
 */
export function vipReadiness(input: ReadinessInput): VipReadiness[] {
  const byVip = new Map<string, { family: IpFamily; services: string[] }>();
  for (const p of input.planned)
    for (const v of p.vips) {
      const entry = byVip.get(v.address) ?? { family: v.family, services: [] };
      if (!entry.services.includes(p.service)) entry.services.push(p.service);
      byVip.set(v.address, entry);
    }
  return [...byVip]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([vip, { family, services }]): VipReadiness => {
      const base = { vip, family, services };
      if (input.stopping)
        return { ...base, ready: false, reason: "stopping", detail: "passlb lb is stopping" };
      if (!input.lastPassOk)
        return { ...base, ready: false, reason: "sync_failed", detail: "the last data-plane sync failed" };
      const verdicts = services.map((s) => serviceVerdict(s, vip, input));
      const good = verdicts.filter((v) => v.reason === "ok");
      const shown = good.length > 0 ? good : verdicts;
      return {
        ...base,
        ready: good.length > 0,
        reason: shown[0]!.reason,
        detail: shown.map((v) => v.detail).join("; "),
      };
    });
}
