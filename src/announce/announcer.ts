/**
 * The announcement interface (docs/vip-announce.md "The interface"): what `passlb lb` tells
 * an announcement engine each pass, and what the engine reports back for the log, metrics,
 * the dashboard and `kubectl passlb status`. One interface, several engines: L2 on VRRP
 * (keepalived-driver.ts, `--announce l2`) implements it today; the BGP engine (issue 19,
 * BIRD) implements the same one.
 *
 * Types only, plus `vipReadiness`, the pure rule that says whether this host can serve a
 * VIP now. An engine decides nothing about readiness: it only moves the VIPs this host
 * cannot serve away from it (a lower VRRP priority, a withdrawn route).
 */
import type { ServiceForwarding } from "../dataplane/forwarding-state.ts";

/** Why this host cannot serve a VIP now (`ok`: it can). */
export type NotReadyReason = "ok" | "not_programmed" | "no_healthy_backend" | "stopping";

export interface VipReadiness {
  readonly vip: string;
  readonly ready: boolean;
  readonly reason: NotReadyReason;
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

/** held: this host answers for the VIP; backup: a peer does and this host stands by;
 * withdrawn: nobody here answers and this host will not take it (engine down, stopping). */
export type VipAnnounceState = "held" | "backup" | "withdrawn";

export interface VipAnnounceStatus {
  readonly vip: string;
  readonly state: VipAnnounceState;
  /** engine-specific why, e.g. `vrrp_master`, `vrrp_backup`, `engine_down`, `not_ready:no_healthy_backend` */
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
  /** per engine group (keepalived: per vrrp_instance): this host's protocol state */
  readonly groups: readonly {
    readonly name: string;
    readonly state: string;
    readonly priority: number;
    readonly vips: number;
  }[];
}

export type AnnouncerEvent =
  | {
      readonly kind: "state";
      readonly group: string;
      readonly state: string;
      readonly vips: readonly string[];
    }
  | { readonly kind: "engine"; readonly state: EngineState; readonly detail?: string; readonly pid?: number }
  | { readonly kind: "reloaded"; readonly added: number; readonly removed: number; readonly changed: number }
  | { readonly kind: "cleaned"; readonly vips: readonly string[]; readonly why: string }
  | { readonly kind: "failed"; readonly error: unknown };

/** The engine. Implemented by keepalived-driver.ts; the BGP engine implements the same. */
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

/**
 * Whether this host can serve each VIP now (issue 20 "Health stays"): the VIP's Service is
 * in the programmed data plane (`programmed`: what the last successful sync applied), at
 * least one listener has a healthy backend (fail-open tables count as none, see
 * forwarding-state.ts), and the process is not stopping. Pure.
 */
export function vipReadiness(
  vips: readonly string[],
  programmed: readonly ServiceForwarding[],
  stopping: boolean,
): VipReadiness[] {
  const byVip = new Map<string, ServiceForwarding>();
  for (const f of programmed) for (const v of f.plan.vips) byVip.set(v.address, f);
  return [...new Set(vips)].sort().map((vip): VipReadiness => {
    if (stopping) return { vip, ready: false, reason: "stopping" };
    const f = byVip.get(vip);
    if (!f) return { vip, ready: false, reason: "not_programmed" };
    const healthy = f.listeners.some((l) => !l.failOpen && l.backends.length > 0);
    return healthy ? { vip, ready: true, reason: "ok" } : { vip, ready: false, reason: "no_healthy_backend" };
  });
}
