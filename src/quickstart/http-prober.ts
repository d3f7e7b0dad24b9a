/**
 * Adapter: a small health prober for `passlb up` — every health check of every plan,
 * against every member node, feeding the `HealthLookup` that forwarding-state.ts consumes.
 * Thresholds as the plan says (healthyThreshold successes to turn healthy,
 * unhealthyThreshold failures to turn unhealthy; GCP health check semantics); an HTTP 200
 * is a success, and `X-Load-Balancing-Endpoint-Weight` is read when the check reads weights.
 *
 * A stand-in with the interface the health branch's Prober (src/health/prober.ts) feeds:
 * `setPlans`, a lookup, a change callback, `close`. `intervalMs` may override the plans'
 * intervals so a demo reacts in seconds rather than GKE's 8 s × 3.
 */
import { request } from "node:http";
import { connect } from "node:net";
import type { HealthLookup, HealthState } from "../dataplane/forwarding-state.ts";
import type { HealthCheck, LoadBalancerPlan } from "../plan/load-balancer-plan.ts";

interface Target {
  readonly key: string;
  readonly check: HealthCheck;
  readonly host: string;
  state: HealthState;
  weight: number | undefined;
  successes: number;
  failures: number;
  inFlight: boolean;
  nextDue: number;
}

export interface HttpProberOptions {
  readonly intervalMs?: number;
  readonly now?: () => number;
  readonly onChange: () => void;
}

export class HttpProber {
  readonly #o: HttpProberOptions;
  readonly #now: () => number;
  readonly #targets = new Map<string, Target>();
  /** `service|checkId|node` → target key */
  readonly #index = new Map<string, string>();
  #timer: ReturnType<typeof setInterval> | undefined;
  #inFlight = new Set<Promise<void>>();

  constructor(options: HttpProberOptions) {
    this.#o = options;
    this.#now = options.now ?? Date.now;
  }

  readonly lookup: HealthLookup = (service, checkId, node) => {
    const k = this.#index.get(`${service}|${checkId}|${node}`);
    const t = k === undefined ? undefined : this.#targets.get(k);
    if (!t) return { state: "unknown" };
    return t.weight === undefined ? { state: t.state } : { state: t.state, weight: t.weight };
  };

  /** node name → state of its targets, for the live view */
  nodeStates(
    service: string,
    checkId: string,
    node: string,
  ): { state: HealthState; weight: number | undefined } {
    const h = this.lookup(service, checkId, node);
    return { state: h.state, weight: h.weight };
  }

  setPlans(plans: readonly LoadBalancerPlan[]): void {
    this.#index.clear();
    const keep = new Set<string>();
    for (const plan of plans)
      for (const check of plan.healthChecks)
        for (const m of plan.members) {
          const host = m.addresses.IPv4 ?? m.addresses.IPv6;
          if (!host) continue;
          const key = `${check.protocol} ${host}:${check.port}${check.path ?? ""} ${check.readsWeight}`;
          this.#index.set(`${plan.service}|${check.id}|${m.node}`, key);
          keep.add(key);
          if (!this.#targets.has(key))
            this.#targets.set(key, {
              key,
              check,
              host,
              state: "unknown",
              weight: undefined,
              successes: 0,
              failures: 0,
              inFlight: false,
              nextDue: 0,
            });
        }
    for (const k of this.#targets.keys()) if (!keep.has(k)) this.#targets.delete(k);
    if (!this.#timer) {
      this.#timer = setInterval(() => this.#tick(), 100);
      this.#timer.unref();
    }
    this.#tick();
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = undefined;
    this.#targets.clear();
    await Promise.all(this.#inFlight);
  }

  #tick(): void {
    const now = this.#now();
    for (const t of this.#targets.values()) {
      if (t.inFlight || t.nextDue > now) continue;
      const interval = this.#o.intervalMs ?? t.check.intervalSeconds * 1000;
      t.nextDue = now + interval;
      t.inFlight = true;
      const p = probe(t, Math.min(t.check.timeoutSeconds * 1000, interval)).then((r) => {
        t.inFlight = false;
        this.#inFlight.delete(p);
        if (!this.#targets.has(t.key)) return;
        this.#record(t, r);
      });
      this.#inFlight.add(p);
    }
  }

  #record(t: Target, r: { ok: boolean; weight: number | undefined }): void {
    const before = `${t.state}/${t.weight}`;
    if (r.ok) {
      t.successes++;
      t.failures = 0;
      if (t.successes >= t.check.healthyThreshold) t.state = "healthy";
    } else {
      t.failures++;
      t.successes = 0;
      if (t.failures >= t.check.unhealthyThreshold || t.state === "unknown") t.state = "unhealthy";
    }
    if (t.check.readsWeight && r.weight !== undefined) t.weight = r.weight;
    if (`${t.state}/${t.weight}` !== before) this.#o.onChange();
  }
}

function probe(t: Target, timeoutMs: number): Promise<{ ok: boolean; weight: number | undefined }> {
  return new Promise((resolve) => {
    let done = false;
    const finish = (ok: boolean, weight?: number) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      resolve({ ok, weight });
    };
    const timer = setTimeout(() => {
      finish(false);
      sock?.destroy();
      req?.destroy();
    }, timeoutMs);
    let sock: ReturnType<typeof connect> | undefined;
    let req: ReturnType<typeof request> | undefined;
    if (t.check.protocol === "TCP") {
      sock = connect({ host: t.host, port: t.check.port }, () => {
        finish(true);
        sock?.destroy();
      });
      sock.on("error", () => finish(false));
      return;
    }
    req = request(
      { host: t.host, port: t.check.port, path: t.check.path ?? "/", method: "GET", agent: false },
      (res) => {
        const w = Number(res.headers["x-load-balancing-endpoint-weight"]);
        finish(res.statusCode === 200, Number.isFinite(w) ? w : undefined);
        res.resume();
        res.on("end", () => req?.destroy());
      },
    );
    req.on("error", () => finish(false));
    req.end();
  });
}
