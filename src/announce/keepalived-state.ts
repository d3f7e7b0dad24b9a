/**
 * What keepalived says back, parsed (docs/vip-announce.md "Reading the state"). Pure:
 *   - `parseNotifyLine`: one line of keepalived's `vrrp_notify_fifo`, of the form
 *     `INSTANCE "passlb_v4_3" MASTER 250` (keepalived.conf(5) global_defs
 *     `vrrp_notify_fifo`; doc/samples/sample_notify_fifo.sh in acassen/keepalived);
 *   - `stateFromAddresses`: the state of each instance inferred from the addresses on the
 *     interface, for a keepalived adopted from an earlier process (whose past notifications
 *     were read by that process): an instance whose VIPs are all on the interface is taken
 *     as MASTER, one with none as BACKUP, until keepalived reports a transition;
 *   - `announcerStatus`: instances + their states + readiness → the engine-neutral status
 *     (announcer.ts) for the log, metrics, dashboard and `kubectl passlb status`.
 */
import type { AnnouncerStatus, EngineState, VipAnnounceStatus, VipReadiness } from "./announcer.ts";
import type { KeepalivedInstance } from "./keepalived-config.ts";

export interface InstanceState {
  /** MASTER, BACKUP, FAULT, STOP, or what keepalived wrote; `UNKNOWN` before anything was heard */
  readonly state: string;
  readonly priority: number;
  /** where it was learnt */
  readonly source: "fifo" | "addresses" | "none";
}

export interface NotifyLine {
  readonly kind: "INSTANCE" | "GROUP";
  readonly name: string;
  readonly state: string;
  readonly priority: number;
}

export function parseNotifyLine(line: string): NotifyLine | undefined {
  const m = /^(INSTANCE|GROUP) "([^"]*)" ([A-Z_]+)(?: (\d+))?\s*$/.exec(line);
  if (!m) return undefined;
  return {
    kind: m[1] as NotifyLine["kind"],
    name: m[2]!,
    state: m[3]!,
    priority: m[4] === undefined ? 0 : Number(m[4]),
  };
}

export function stateFromAddresses(
  instances: readonly KeepalivedInstance[],
  onInterface: ReadonlySet<string>,
): Map<string, InstanceState> {
  const out = new Map<string, InstanceState>();
  for (const i of instances) {
    const held = i.vips.filter((v) => onInterface.has(v)).length;
    const state = held === i.vips.length ? "MASTER" : held === 0 ? "BACKUP" : "UNKNOWN";
    out.set(i.name, { state, priority: i.priority + i.trackValue, source: "addresses" });
  }
  return out;
}

const VIP_STATE: Record<string, VipAnnounceStatus["state"]> = { MASTER: "held", BACKUP: "backup" };

export function announcerStatus(input: {
  readonly host: string;
  readonly engine: EngineState;
  readonly detail?: string;
  readonly pid?: number;
  readonly generation: number;
  readonly instances: readonly KeepalivedInstance[];
  readonly states: ReadonlyMap<string, InstanceState>;
  readonly readiness: readonly VipReadiness[];
}): AnnouncerStatus {
  const ready = new Map(input.readiness.map((r) => [r.vip, r]));
  const running = input.engine === "running" || input.engine === "stopping";
  const vips: VipAnnounceStatus[] = [];
  for (const i of input.instances) {
    const s = input.states.get(i.name)?.state ?? "UNKNOWN";
    for (const vip of i.vips) {
      const r = ready.get(vip);
      const notReady = r && !r.ready ? `, not_ready:${r.reason}` : "";
      vips.push({
        vip,
        state: running ? (VIP_STATE[s] ?? "withdrawn") : "withdrawn",
        reason: running ? `vrrp_${s.toLowerCase()}${notReady}` : `engine_${input.engine}${notReady}`,
        preferredHolder: i.order[0]!,
        group: i.name,
      });
    }
  }
  vips.sort((a, b) => (a.vip < b.vip ? -1 : a.vip > b.vip ? 1 : 0));
  return {
    engine: "keepalived",
    host: input.host,
    state: input.engine,
    ...(input.detail === undefined ? {} : { detail: input.detail }),
    ...(input.pid === undefined ? {} : { pid: input.pid }),
    generation: input.generation,
    vips,
    groups: input.instances.map((i) => {
      const s = input.states.get(i.name);
      return {
        name: i.name,
        state: running ? (s?.state ?? "UNKNOWN") : "DOWN",
        priority: s && s.source === "fifo" ? s.priority : i.priority + i.trackValue,
        vips: i.vips.length,
      };
    }),
  };
}
