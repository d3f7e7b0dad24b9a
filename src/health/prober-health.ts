/**
 * Adapter: the health prober (src/health/prober.ts) as the `HealthLookup` the forwarding
 * state consumes. Targets come from the plans (state-probe-targets.ts: one target per
 * check, node address and family, shared by every Service that uses it); a lookup for
 * (Service, check, node) reads the state of that node's target. Any transition or weight
 * change calls `onChange`, so the caller rebuilds its forwarding state.
 *
 * `intervalMs` may replace the plans' intervals (and caps the timeouts) so that a demo
 * reacts in seconds rather than GKE's 8 s × 3; thresholds stay as planned.
 *
 * `tunnel` (the LB host's `--encap-check`): one more target per routed node address
 * (health/state-tunnel-targets.ts), probed by `tunnel.probe` through the tunnel; a user
 * whose tunnel target is unhealthy reads `unhealthy` with the reason `tunnel_check_failed`.
 * `tunnelAddresses()` tells the routing adapter which addresses need a check route.
 */
import type { HealthLookup, MemberHealth } from "../forwarding/forwarding-state.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { realClock } from "./clock.ts";
import { probeOnce } from "./probe-once.ts";
import { type ProbeFn, Prober, type ProberEvent } from "./prober.ts";
import { type ProbeTarget, probeTargets } from "./state-probe-targets.ts";
import { TUNNEL_CHECK_FAILED, tunnelTargets } from "./state-tunnel-targets.ts";

export interface ProberHealthOptions {
  readonly intervalMs?: number;
  readonly seed?: number;
  readonly onChange: () => void;
  /** each transition or weight change, for logs and metrics (src/web/observer.ts) */
  readonly onEvent?: (event: ProberEvent) => void;
  /** each finished probe: the node probed, the verdict and how long it took */
  readonly onProbe?: (node: string, ok: boolean, seconds: number) => void;
  /** the tunnel check: which node addresses are reached through the tunnel, and its probe */
  readonly tunnel?: { readonly routed: (address: string) => boolean; readonly probe: ProbeFn };
}

export class ProberHealth {
  readonly #o: ProberHealthOptions;
  readonly #prober: Prober;
  /** `service|check|node` → target keys (one per address family) */
  #index = new Map<string, string[]>();
  /** target key → the node it probes */
  #nodes = new Map<string, string>();
  /** target keys of tunnel checks */
  #tunnelKeys = new Set<string>();
  #tunnelAddresses: string[] = [];

  constructor(options: ProberHealthOptions) {
    this.#o = options;
    this.#prober = new Prober({
      clock: realClock(),
      probe: (t) => (t.via === "tunnel" && options.tunnel ? options.tunnel.probe(t) : probeOnce(t)),
      seed: options.seed ?? 1,
      maxConcurrent: 64,
      onEvent: (e) => {
        this.#o.onEvent?.(e);
        this.#o.onChange();
      },
      onProbe: (r) => {
        const node = this.#nodes.get(r.key);
        if (node !== undefined) this.#o.onProbe?.(node, r.outcome.ok, (r.finishedAt - r.startedAt) / 1000);
      },
    });
  }

  readonly lookup: HealthLookup = (service, checkId, node): MemberHealth => {
    const keys = this.#index.get(`${service}|${checkId}|${node}`);
    if (!keys) return { state: "unknown" };
    let worst: MemberHealth = { state: "healthy" };
    let tunnelFailed = false;
    let awaiting = false;
    for (const k of keys) {
      const h = this.#prober.healthOf(k);
      const state = h?.state ?? "unknown";
      if (state === "unhealthy" && this.#tunnelKeys.has(k)) tunnelFailed = true;
      if (state === "unhealthy" || (state === "unknown" && worst.state === "healthy"))
        worst = h?.weight === undefined ? { state } : { state, weight: h.weight };
      else if (worst.weight === undefined && h?.weight !== undefined)
        worst = { state: worst.state, weight: h.weight };
      if (state === "unknown" && h?.admitsBeforeVerdict === false) awaiting = true;
    }
    if (tunnelFailed) return { ...worst, state: "unhealthy", reason: TUNNEL_CHECK_FAILED };
    return awaiting && worst.state === "unknown" ? { ...worst, awaitingVerdict: true } : worst;
  };

  /** the node addresses with a tunnel check (both families), sorted */
  tunnelAddresses(): readonly string[] {
    return this.#tunnelAddresses;
  }

  setPlans(plans: readonly LoadBalancerPlan[]): void {
    const every = this.#o.intervalMs;
    const plain: ProbeTarget[] = probeTargets(plans).map((t) =>
      every === undefined ? t : { ...t, intervalMs: every, timeoutMs: Math.min(t.timeoutMs, every) },
    );
    const tunnel = this.#o.tunnel ? tunnelTargets(plain, this.#o.tunnel.routed) : [];
    const targets = [...plain, ...tunnel];
    this.#tunnelKeys = new Set(tunnel.map((t) => t.key));
    this.#tunnelAddresses = [...new Set(tunnel.map((t) => t.address))].sort();
    const index = new Map<string, string[]>();
    for (const t of targets)
      for (const u of t.users) {
        const k = `${u.service}|${u.check}|${u.node}`;
        const list = index.get(k);
        if (list) list.push(t.key);
        else index.set(k, [t.key]);
      }
    this.#index = index;
    this.#nodes = new Map(targets.flatMap((t) => (t.users[0] ? [[t.key, t.users[0].node] as const] : [])));
    this.#prober.setTargets(targets);
  }

  close(): Promise<void> {
    return this.#prober.close();
  }
}
