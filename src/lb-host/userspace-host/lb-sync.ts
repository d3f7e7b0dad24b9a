/**
 * The userspace LB host's pass: each good read of the input is planned (`ipMode: Proxy`,
 * as Kubernetes defines it for a proxying LB; VIPs from status in Kubernetes mode), the
 * prober gets the new targets, and the proxy's listeners follow; a health change runs the
 * forwarding step again on the same plans. Passes never overlap (one promise chain).
 *
 * The last good rule (docs/dataplane-userspace.md): a read that is not ok (the manifests
 * have a problem: unreadable, invalid YAML, an invalid object) changes nothing — every
 * Service keeps what it has; a degraded read (Kubernetes mode: objects left out because
 * they failed decoding) keeps the last good plan of every Service that vanished from it,
 * since it may be broken rather than deleted. While the API server is away there are no
 * reads and the proxy keeps serving what it has.
 *
 * The proxy is driven as an LbDataplane (lb-dataplane.ts): `apply` with the forwarding state
 * and the config's zones.
 *
 * Does not: open sockets or watch anything itself (the proxy and the source are parts of
 * userspace-host/build-userspace-lb-host.ts).
 */
import type { SourceRead } from "../../cluster/snapshot-source.ts";
import { serviceForwarding } from "../../forwarding/forwarding-state.ts";
import type { Snapshot } from "../../k8s/snapshot.ts";
import type { Finding, LoadBalancerPlan } from "../../plan/load-balancer-plan.ts";
import { createPlanCache, planSnapshot } from "../../plan/planner.ts";
import { loopbackSnapshot } from "../../quickstart/loopback-rewrite.ts";
import { poolUsage } from "../../web/pool-usage.ts";
import type { UserspaceHealth, UserspaceLbSink, UserspaceProxy } from "./lb-host-drivers.ts";
import type { UserspaceLbReporter } from "./reporter.ts";

/** a good read made ready for planning (Kubernetes mode: status addresses, lb-kube.ts) */
export type PrepareRead = (read: Extract<SourceRead, { ok: true }>) => {
  readonly snapshot: Snapshot;
  readonly degraded: boolean;
};

export interface UserspaceLbSyncOptions {
  readonly seed: number;
  readonly vipSource: "ipam" | "status";
  /** passlb up's loopback rewrite on every read (quickstart/loopback-rewrite.ts) */
  readonly loopback: boolean;
  /** reads that are not ok are reported (manifests) or left to the source's own lines (cluster) */
  readonly reportBadReads: boolean;
  readonly prepare: PrepareRead;
  readonly proxy: UserspaceProxy;
  readonly health: () => UserspaceHealth;
  readonly reporter: UserspaceLbReporter;
  readonly sink: UserspaceLbSink;
  readonly now: () => number;
}

export class UserspaceLbSync {
  readonly #o: UserspaceLbSyncOptions;
  readonly #cache = createPlanCache();
  #plans: readonly LoadBalancerPlan[] = [];
  #findings: readonly Finding[] = [];
  #previous = new Map<string, LoadBalancerPlan>();
  /** PasslbConfig's zones of the last good read: the client zones of zonal affinity */
  #zones: Snapshot["config"]["zones"] = [];
  #good = false;
  #pendingSince: number | undefined;
  #chain: Promise<void> = Promise.resolve();

  constructor(options: UserspaceLbSyncOptions) {
    this.#o = options;
  }

  /** the plans served now */
  get plans(): readonly LoadBalancerPlan[] {
    return this.#plans;
  }

  /** what the proxy said in the last pass (a port it could not bind, …) */
  get findings(): readonly Finding[] {
    return this.#findings;
  }

  /** whether any read was good yet */
  get hasGood(): boolean {
    return this.#good;
  }

  /** something changed and a read is coming: the programming-latency clock starts */
  changed(): void {
    this.#pendingSince ??= this.#o.now();
  }

  async read(read: SourceRead): Promise<void> {
    const { reporter } = this.#o;
    if (this.#o.reportBadReads) reporter.readProblems(read.ok ? undefined : read.problems, this.#good);
    if (!read.ok) return;
    reporter.notices(read.notices);
    const next = this.#o.prepare(read);
    const snapshot = this.#o.loopback ? loopbackSnapshot(next.snapshot).snapshot : next.snapshot;
    const options = { ipMode: "Proxy", vipSource: this.#o.vipSource, previous: this.#previous } as const;
    const planned = planSnapshot(snapshot, options, this.#cache).plans;
    this.#plans = next.degraded ? withVanishedKept(planned, this.#previous) : planned;
    this.#previous = new Map(this.#plans.map((p) => [p.service, p]));
    this.#zones = snapshot.config.zones;
    this.#good = true;
    this.#o.sink.metrics.ipPools(poolUsage(snapshot.config.pools, this.#plans));
    reporter.planned(this.#plans);
    this.#o.health().setPlans(this.#plans);
    await this.apply();
  }

  /** the forwarding step on the current plans and health, after any pass still running */
  apply(): Promise<void> {
    this.#chain = this.#chain.then(() => this.#pass());
    return this.#chain;
  }

  /** resolves when no pass runs */
  idle(): Promise<void> {
    return this.#chain;
  }

  async #pass(): Promise<void> {
    const { proxy, sink, seed } = this.#o;
    const since = this.#pendingSince ?? this.#o.now();
    this.#pendingSince = undefined;
    const lookup = this.#o.health().lookup;
    const fw = this.#plans.map((p) => serviceForwarding(p, lookup, { seed }));
    const { findings = [] } = await proxy.apply({ forwarding: fw, zones: this.#zones });
    this.#findings = findings;
    sink.observer.forwarding(fw, lookup);
    sink.metrics.programmed("userspace", (this.#o.now() - since) / 1000);
    sink.observer.setFindings(findings);
  }
}

/** `planned` plus the last good plan of each Service missing from it, by name */
function withVanishedKept(
  planned: readonly LoadBalancerPlan[],
  previous: ReadonlyMap<string, LoadBalancerPlan>,
): readonly LoadBalancerPlan[] {
  const present = new Set(planned.map((p) => p.service));
  const kept = [...previous.values()].filter((p) => !present.has(p.service));
  if (kept.length === 0) return planned;
  return [...planned, ...kept].sort((a, b) => (a.service < b.service ? -1 : 1));
}
