/**
 * `passlb lb --announce l2|bgp`: the announcement checked from the wire beside the engine
 * (docs/vip-announce.md "Checked from the wire"). Wiring only: L2 runs the ARP/NDP checker
 * (announce/wire-checker.ts) and the VRRP watch (announce/vrrp-watch.ts); BGP compares
 * BIRD's export tables with the engine's announced VIPs (announce/bgp/bird-export-check.ts)
 * every `--wire-check-ms`. Each change is reported once through `report` (the log, the
 * dashboard's events, an Event on the Services of the VIP in cluster mode); the current
 * state rides along in the engine's status as `wire` (metrics, `/api/v1/state`, `kubectl
 * passlb status`).
 */
import type { AnnouncerStatus, PeerAddresses } from "../announce/announcer.ts";
import { exportProblems, readBirdExports } from "../announce/bgp/bird-export-check.ts";
import { kernelVipAddresses } from "../announce/vip-addresses.ts";
import type { ForeignSpeaker, VridRange } from "../announce/vrrp-adverts.ts";
import { VrrpWatch } from "../announce/vrrp-watch.ts";
import { WireChecker } from "../announce/wire-checker.ts";
import type { WireReport, WireVipCheck } from "../announce/wire-verdict.ts";

export interface WireFinding {
  readonly severity: "warning" | "info";
  /** stable code: the problem, `wire_ok`, `vrrp_foreign_speaker`, `vrrp_foreign_speaker_gone`, `wire_check_error` */
  readonly reason: string;
  readonly message: string;
  /** the VIPs concerned (their Services get the Event) */
  readonly vips?: readonly string[];
}

export interface WireChecks {
  /** the engine's status with `wire` added */
  status(base: AnnouncerStatus): AnnouncerStatus;
  /** a failover happened: check again soon */
  failover(): void;
  stop(): Promise<void>;
}

type Common = {
  readonly periodMs: number;
  readonly engine: () => AnnouncerStatus;
  readonly report: (f: WireFinding) => void;
  readonly now?: () => number;
};

function verdictFinding(c: WireVipCheck, before: WireVipCheck | undefined): WireFinding | undefined {
  if (c.problem) return { severity: "warning", reason: c.problem, message: c.message, vips: [c.vip] };
  if (before?.problem) return { severity: "info", reason: "wire_ok", message: c.message, vips: [c.vip] };
  return undefined;
}

export function l2WireChecks(
  options: Common & {
    readonly self: string;
    readonly interface: string;
    readonly peers: () => PeerAddresses;
    readonly vridRange: VridRange;
    readonly vrrpWatch: boolean;
    /** tests: run the tools in a namespace */
    readonly netns?: string;
  },
): WireChecks {
  const prefix = options.netns ? ["ip", "netns", "exec", options.netns] : [];
  const addresses = kernelVipAddresses({
    interface: options.interface,
    ...(options.netns && { netns: options.netns }),
  });
  let first = false;
  let rounds = 0;
  const checker = new WireChecker({
    self: options.self,
    interface: options.interface,
    peers: options.peers,
    targets: () =>
      options.engine().vips.map((v) => ({
        vip: v.vip,
        family: v.vip.includes(":") ? ("IPv6" as const) : ("IPv4" as const),
        ...(v.preferredHolder !== undefined && { preferred: v.preferredHolder }),
      })),
    onInterface: () => addresses.onInterface(),
    periodMs: options.periodMs,
    prefix,
    ...(options.now && { now: options.now }),
    onChange: (c, before) => {
      const f = verdictFinding(c, before);
      if (f) options.report(f);
    },
    onError: (message) => options.report({ severity: "warning", reason: "wire_check_error", message }),
    onRound: (r) => {
      // once, after the first round with nothing waiting for confirmation (or the fifth)
      if (first || (r.pending.length > 0 && ++rounds < 5)) return;
      first = true;
      const bad = r.vips.filter((c) => c.problem !== null).length;
      options.report({
        severity: "info",
        reason: "wire_checked",
        message: `first check: ${r.vips.length} VIPs asked on ${options.interface}, ${bad === 0 ? "each answered by one LB host" : `${bad} disagree`} (again every ${options.periodMs} ms and after each failover)`,
      });
    },
  });
  // keepalived-config.ts names instances passlb_v4_<VRID> / passlb_v6_<VRID>
  const vipsOfVrid = (s: ForeignSpeaker) =>
    options
      .engine()
      .vips.filter((v) => v.group === `passlb_${s.family === "IPv4" ? "v4" : "v6"}_${s.vrid}`)
      .map((v) => v.vip);
  const speaker = (s: ForeignSpeaker) =>
    `${s.source} (${s.mac}) advertises VRID ${s.vrid} (${s.family}, priority ${s.priority}) on ${s.interface}, inside --vrid-range ${options.vridRange.first}-${options.vridRange.last}`;
  const watch = options.vrrpWatch
    ? new VrrpWatch({
        interface: options.interface,
        range: options.vridRange,
        ours: () =>
          new Set(
            [...options.peers().values()].flatMap((a) => [a.IPv4, a.IPv6].filter((x) => x !== undefined)),
          ),
        prefix,
        ...(options.now && { now: options.now }),
        // the Services of the VIPs in the instance that uses that VRID get the Event
        onForeign: (s) =>
          options.report({
            severity: "warning",
            reason: "vrrp_foreign_speaker",
            message: `foreign VRRP speaker: ${speaker(s)}; passlb's keepalived ignores it (unicast, vrrp_check_unicast_src), renumber one side`,
            vips: vipsOfVrid(s),
          }),
        onGone: (s) =>
          options.report({
            severity: "info",
            reason: "vrrp_foreign_speaker_gone",
            message: `foreign VRRP speaker gone: ${speaker(s)}`,
            vips: vipsOfVrid(s),
          }),
        onError: (message) => options.report({ severity: "warning", reason: "wire_check_error", message }),
      })
    : undefined;
  checker.start();
  watch?.start();
  return {
    status: (base) => {
      const r = checker.report();
      const wire: WireReport = { ...r, ...(watch && { vrrp: watch.report() }) };
      return { ...base, wire };
    },
    failover: () => checker.checkSoon(),
    stop: async () => {
      watch?.stop();
      await checker.stop();
    },
  };
}

export function bgpWireChecks(
  options: Common & { readonly socket: string; readonly birdc?: readonly string[] },
): WireChecks {
  let last: WireReport = { checkedAt: null, periodMs: options.periodMs, vips: [], errors: [] };
  let running: Promise<void> | undefined;
  const round = async () => {
    const status = options.engine();
    const sessions = await readBirdExports(options.socket, options.birdc);
    if (sessions === undefined) {
      const message = `birdc on ${options.socket} does not answer: exports not compared`;
      if (!last.errors.includes(message))
        options.report({ severity: "warning", reason: "wire_check_error", message });
      last = { ...last, errors: [message] };
      return;
    }
    const checks = exportProblems({
      announced: status.vips.filter((v) => v.state === "held").map((v) => v.vip),
      known: status.vips.map((v) => v.vip),
      sessions,
    });
    // as for L2 (wire-checker.ts `#confirm`): a change counts when the next round, 1 s
    // later, agrees (BIRD learns a new route from table 4242 a moment after passlb adds it)
    const before = new Map(last.vips.map((c) => [c.vip, c]));
    const confirmed: WireVipCheck[] = [];
    let again = false;
    for (const c of checks) {
      const b = before.get(c.vip);
      if ((b === undefined && c.problem === null) || b?.problem === c.problem) {
        pending.delete(c.vip);
        confirmed.push(c);
      } else if (pending.get(c.vip) === c.problem) {
        pending.delete(c.vip);
        const f = verdictFinding(c, b);
        if (f) options.report(f);
        confirmed.push(c);
      } else {
        pending.set(c.vip, c.problem);
        if (b) confirmed.push(b);
        again = true;
      }
    }
    for (const vip of [...pending.keys()]) if (!checks.some((c) => c.vip === vip)) pending.delete(vip);
    if (again) later(1000);
    last = {
      checkedAt: (options.now ?? Date.now)(),
      periodMs: options.periodMs,
      vips: confirmed,
      errors: [],
    };
  };
  const pending = new Map<string, WireVipCheck["problem"]>();
  const tick = () => {
    running ??= round().finally(() => {
      running = undefined;
    });
    return running;
  };
  const timer = options.periodMs > 0 ? setInterval(() => void tick(), options.periodMs) : undefined;
  timer?.unref();
  let soon: ReturnType<typeof setTimeout> | undefined;
  function later(ms: number) {
    clearTimeout(soon);
    soon = setTimeout(() => void tick(), ms);
    soon.unref();
  }
  later(2000); // a first comparison once the sessions had a moment to come up
  return {
    status: (base) => ({ ...base, wire: last }),
    failover: () => later(500),
    stop: async () => {
      clearInterval(timer);
      clearTimeout(soon);
      await running;
    },
  };
}

/** The checks for `passlb lb`'s engine; undefined with `--wire-check-ms 0` and no VRRP watch. */
export function wireChecksFor(
  options: Omit<Common, "periodMs"> & {
    readonly periodMs: number;
    readonly l2?: {
      readonly self: string;
      readonly interface: string;
      readonly peers: () => PeerAddresses;
      readonly vridRange: VridRange;
      readonly vrrpWatch: boolean;
    };
    readonly bgpSocket?: string;
  },
): WireChecks | undefined {
  if (options.l2) {
    if (options.periodMs === 0 && !options.l2.vrrpWatch) return undefined;
    return l2WireChecks({ ...options, ...options.l2 });
  }
  if (options.bgpSocket && options.periodMs > 0)
    return bgpWireChecks({ ...options, socket: options.bgpSocket });
  return undefined;
}
