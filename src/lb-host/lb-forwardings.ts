/**
 * The LB's forwarding step, kept across passes: snapshot → plans (planSnapshot with the
 * plan cache and sticky subsets) → forwarding per Service (health applied), reusing every
 * object that did not change so that the next steps (desired-state.ts, the diff) can skip
 * by identity.
 *
 * - Backend selections are shared: Services with the same members (node, weight, zone,
 *   addresses) behind an equal health check get one selection object per pass, and the
 *   last pass's object while those members' health reads the same. Under eTP Cluster every
 *   Service sits on the same nodes behind the same kube-proxy check, so a node's health flip
 *   costs one selection and one Maglev table, not one per Service. This relies on health
 *   depending on the check, the node and the address families only (ProberHealth probes
 *   one target per check definition, node and family, shared by every Service that uses
 *   it): Services of other families do not share (a dual-stack Service whose IPv6 checks
 *   all failed fails open; an IPv4-only one on the same nodes must not follow it).
 * - A Service's forwarding object is reused while its plan object and selections are; when
 *   the health source's version has not moved since the last pass, a Service whose plan
 *   object is the same is not looked at any further (no health lookups at all), so an
 *   endpoint change costs that Service, not every Service.
 * - Bad input never corrupts what works: a Service whose plan has error-level issues, or
 *   whose forwarding cannot be built, keeps its last good forwarding; while the input is
 *   degraded, Services that vanished from it keep theirs too, and so does a Service whose
 *   VIPs the degraded input would move (another Service vanishing frees addresses).
 *
 * Does not: render or apply anything (lb-controller.ts owns the pass).
 */

import {
  type BackendSelection,
  backendSelection,
  type ForwardingOptions,
  type HealthLookup,
  listenerChecks,
  type ServiceForwarding,
  serviceForwarding,
} from "../forwarding/forwarding-state.ts";
import { type MaglevInput, type MaglevTable, maglevTable } from "../forwarding/maglev.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { HealthCheck, LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { createPlanCache, planSnapshot } from "../plan/planner.ts";

export interface LbForwardingsOptions {
  readonly seed: number;
  readonly sizeFor?: (backends: number) => number;
  /** where VIPs come from (planner.ts PlanOptions): `status` on an LB host in Kubernetes mode */
  readonly vipSource?: "ipam" | "status";
  /** a Service kept its last good forwarding (its plan has errors, or building failed) */
  readonly onKept?: (service: string, reason: string) => void;
}

const STATE_CODE = { healthy: "h", unhealthy: "x", unknown: "?" } as const;

export class LbForwardings {
  readonly #o: LbForwardingsOptions;
  readonly #planCache = createPlanCache();
  #plans = new Map<string, LoadBalancerPlan>();
  #lastGood = new Map<string, ServiceForwarding>();
  #tables = new Map<string, MaglevTable>();
  #selections = new Map<string, { signature: string; selection: BackendSelection }>();
  #healthVersion: number | undefined;
  #lastPlans: readonly LoadBalancerPlan[] | undefined;
  /** plan → short id of its membership (interned), so equal memberships compare as numbers */
  readonly #memberIds = new WeakMap<LoadBalancerPlan, number>();
  readonly #memberKeys = new Map<string, number>();
  readonly #listIds = new WeakMap<LoadBalancerPlan["members"], { plain?: number; zonal?: number }>();
  readonly #checkKeys = new WeakMap<HealthCheck, string>();
  readonly #listenerChecks = new WeakMap<LoadBalancerPlan, (HealthCheck | undefined)[]>();
  readonly #selectionKeys = new WeakMap<LoadBalancerPlan, Map<HealthCheck | undefined, string>>();
  readonly #keyStrings = new Map<string, string>();

  constructor(options: LbForwardingsOptions) {
    this.#o = options;
  }

  /** the forwarding state last built, per Service */
  get lastGood(): readonly ServiceForwarding[] {
    return [...this.#lastGood.values()];
  }

  /** `healthVersion`: changes whenever any health answer may have (undefined: unknown). */
  update(
    snapshot: Snapshot,
    degraded: boolean,
    health: HealthLookup,
    healthVersion?: number,
  ): ServiceForwarding[] {
    const vipSource = this.#o.vipSource ?? "ipam";
    let { plans } = planSnapshot(snapshot, { previous: this.#plans, vipSource }, this.#planCache);
    if (this.#plans.size === 0 && plans.length > 0) {
      // first pass: plan once more with these plans as the previous ones, so the planner's
      // memo (keyed on the previous plan) settles now rather than on the next change
      this.#plans = new Map(plans.map((p) => [p.service, p]));
      plans = planSnapshot(snapshot, { previous: this.#plans, vipSource }, this.#planCache).plans;
    }
    const healthSame = healthVersion !== undefined && healthVersion === this.#healthVersion;
    this.#healthVersion = healthVersion;
    // equal Maglev inputs share one table object, across passes (pruned when it outgrows
    // what the Services can use)
    if (this.#tables.size > 4 * plans.length + 64) this.#tables = new Map();
    if (this.#keyStrings.size > 4 * plans.length + 64) this.#keyStrings.clear();
    const tables = this.#tables;
    const tableFor = (input: MaglevInput): MaglevTable => {
      const key = `${input.size}|${input.seed}|${input.backends.map((b) => `${b.name}:${b.weight}`).join(",")}`;
      let table = tables.get(key);
      if (!table) {
        table = maglevTable(input);
        tables.set(key, table);
      }
      return table;
    };
    // selections: kept as they are while health has not moved; otherwise re-read, keeping
    // the old object where the members' health reads the same
    const before = healthSame ? undefined : this.#selections;
    if (!healthSame) this.#selections = new Map();
    const selections = this.#selections;
    const select = (
      plan: LoadBalancerPlan,
      check: HealthCheck | undefined,
      compute: () => BackendSelection,
    ) => {
      const key = this.#selectionKey(plan, check);
      const now = selections.get(key);
      if (now) return now.selection;
      const signature = check ? healthSignature(plan, check, health) : "";
      const old = before?.get(key);
      const selection = old && old.signature === signature ? old.selection : { ...compute(), group: key };
      selections.set(key, { signature, selection });
      return selection;
    };
    const options = {
      seed: this.#o.seed,
      tableFor,
      select,
      ...(this.#o.sizeFor && { sizeFor: this.#o.sizeFor }),
    };
    const forwardings = new Map<string, ServiceForwarding>();
    for (const plan of plans) {
      const last = this.#lastGood.get(plan.service);
      if (healthSame && last?.plan === plan) {
        forwardings.set(plan.service, last);
        continue;
      }
      const error = plan.issues.find((i) => i.severity === "error");
      if (degraded && last && !sameVips(last.plan, plan)) {
        // the planner hands out addresses in order: a Service missing from a degraded input
        // frees its VIP and moves every Service after it. The agents keep their whole last
        // good state while the input has problems (agent-command.ts), so moving here would
        // send the VIP's traffic where no node translates it (issue 16, broken manifest)
        this.#o.onKept?.(plan.service, "input_invalid_vip_moved");
        forwardings.set(plan.service, last);
        continue;
      }
      if (error && last) {
        this.#o.onKept?.(plan.service, error.code);
        forwardings.set(plan.service, last);
        continue;
      }
      try {
        if (last?.plan === plan) {
          // the same plan, health moved: only the selections can differ
          forwardings.set(plan.service, this.#reselect(last, health, options, select));
          continue;
        }
        const built = serviceForwarding(plan, health, options);
        forwardings.set(plan.service, last && sameForwarding(last, built) ? last : built);
      } catch (e) {
        this.#o.onKept?.(plan.service, (e as Error).message);
        if (last) forwardings.set(plan.service, last);
      }
    }
    if (degraded)
      for (const [service, last] of this.#lastGood)
        if (!forwardings.has(service)) {
          this.#o.onKept?.(service, "input_invalid");
          forwardings.set(service, last);
        }
    // the planner only reads the previous members (sticky subsets) and memoises on the
    // previous plan's identity (and on the map's, for its fast path): keep the stored plan
    // while its members stay the same, and the map itself
    const lastPlans = this.#lastPlans;
    if (
      lastPlans &&
      lastPlans.length === plans.length &&
      plans.every((p, i) => p.service === lastPlans[i]!.service)
    ) {
      // same Services in the same order (the planner's fast path): only replaced plans
      for (let i = 0; i < plans.length; i++) if (plans[i] !== lastPlans[i]) this.#remember(plans[i]!);
    } else if (plans !== lastPlans) {
      const names = new Set<string>();
      for (const p of plans) {
        names.add(p.service);
        this.#remember(p);
      }
      for (const name of this.#plans.keys()) if (!names.has(name)) this.#plans.delete(name);
    }
    this.#lastPlans = plans;
    this.#lastGood = forwardings;
    return [...forwardings.values()];
  }

  /** `last` with each listener's selection read again (its own object where unchanged):
   * what serviceForwarding would give for the same plan, without building it anew. */
  #reselect(
    last: ServiceForwarding,
    health: HealthLookup,
    options: ForwardingOptions,
    select: NonNullable<ForwardingOptions["select"]>,
  ): ServiceForwarding {
    const plan = last.plan;
    let checks = this.#listenerChecks.get(plan);
    if (!checks) {
      checks = listenerChecks(plan);
      this.#listenerChecks.set(plan, checks);
    }
    let same = true;
    const listeners = last.listeners.map((l, i) => {
      const check = checks[i];
      const sel = select(plan, check, () => backendSelection(plan, check, health, options));
      if (
        sel.table === l.table &&
        sel.backends === l.backends &&
        sel.zoneTables === l.zoneTables &&
        sel.failOpen === l.failOpen
      )
        return l;
      same = false;
      return { listener: l.listener, protocol: l.protocol, port: l.port, ...sel };
    });
    return same ? last : { service: last.service, plan, listeners };
  }

  /** the name of the selection a plan's listener under `check` shares: its members, its
   * families (a check is probed once per family the plan serves, so a dual-stack Service's
   * health is not an IPv4-only one's on the same nodes) and the check — one string per plan
   * and check, kept with the plan (a flip looks every Service up again) */
  #selectionKey(plan: LoadBalancerPlan, check: HealthCheck | undefined): string {
    let keys = this.#selectionKeys.get(plan);
    if (!keys) {
      keys = new Map();
      this.#selectionKeys.set(plan, keys);
    }
    let key = keys.get(check);
    if (key === undefined) {
      key = `${this.#memberId(plan)}#${plan.ipFamilies.join(",")}#${check ? this.#checkKey(check) : "-"}`;
      // interned: Services with equal keys share one string (a Map key hashed once)
      const interned = this.#keyStrings.get(key);
      if (interned === undefined) this.#keyStrings.set(key, key);
      else key = interned;
      keys.set(check, key);
    }
    return key;
  }

  #remember(p: LoadBalancerPlan): void {
    const stored = this.#plans.get(p.service);
    if (stored !== p && !(stored && sameMembers(stored, p))) this.#plans.set(p.service, p);
  }

  #memberId(plan: LoadBalancerPlan): number {
    let id = this.#memberIds.get(plan);
    if (id !== undefined) return id;
    // plans on the same nodes share one member list (the planner's eTP Cluster list): its
    // key is built once, not once per Service
    const byList = this.#listIds.get(plan.members);
    id = plan.zonalAffinity ? byList?.zonal : byList?.plain;
    if (id !== undefined) {
      this.#memberIds.set(plan, id);
      return id;
    }
    let key = plan.zonalAffinity ? "z" : "";
    for (const m of plan.members)
      key += `${m.node}\u0000${m.weight}\u0000${m.zone}\u0000${m.addresses.IPv4 ?? ""}\u0000${m.addresses.IPv6 ?? ""}\u0001`;
    id = this.#memberKeys.get(key);
    if (id === undefined) {
      id = this.#memberKeys.size;
      this.#memberKeys.set(key, id);
    }
    this.#memberIds.set(plan, id);
    const ids = byList ?? {};
    if (plan.zonalAffinity) ids.zonal = id;
    else ids.plain = id;
    if (!byList) this.#listIds.set(plan.members, ids);
    return id;
  }

  #checkKey(check: HealthCheck): string {
    let key = this.#checkKeys.get(check);
    if (key === undefined) {
      const { id, protocol, port, path, readsWeight, intervalSeconds, timeoutSeconds } = check;
      const { healthyThreshold, unhealthyThreshold } = check;
      key = JSON.stringify([
        id,
        protocol,
        port,
        path,
        readsWeight,
        intervalSeconds,
        timeoutSeconds,
        healthyThreshold,
        unhealthyThreshold,
      ]);
      this.#checkKeys.set(check, key);
    }
    return key;
  }
}

/** Everything health says about a plan's members under one check, as a string. */
function healthSignature(plan: LoadBalancerPlan, check: HealthCheck, health: HealthLookup): string {
  let out = "";
  for (const m of plan.members) {
    const h = health(plan.service, check.id, m.node);
    out += `${STATE_CODE[h.state]}${h.weight ?? ""};`;
  }
  return out;
}

/** Same plan object and the same selections per listener: nothing to rebuild downstream. */
function sameForwarding(a: ServiceForwarding, b: ServiceForwarding): boolean {
  if (a.plan !== b.plan || a.listeners.length !== b.listeners.length) return false;
  return a.listeners.every((l, i) => {
    const o = b.listeners[i]!;
    return l.table === o.table && l.backends === o.backends && l.zoneTables === o.zoneTables;
  });
}

function sameMembers(a: LoadBalancerPlan, b: LoadBalancerPlan): boolean {
  return a.members.length === b.members.length && a.members.every((m, i) => m.node === b.members[i]!.node);
}

/** Whether two plans of a Service have the same VIPs. */
function sameVips(a: LoadBalancerPlan, b: LoadBalancerPlan): boolean {
  if (a === b) return true;
  if (a.vips.length !== b.vips.length) return false;
  return a.vips.every((v, i) => v.address === b.vips[i]!.address && v.family === b.vips[i]!.family);
}
