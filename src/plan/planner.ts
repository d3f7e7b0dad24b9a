/**
 * The planner: a Snapshot in, a LoadBalancerPlan for every Service passlb owns out, with
 * the Services it leaves alone and why. Pure and deterministic.
 *
 * Incremental by memo, not by events: a PlanCache remembers the last inputs of every step
 * by object identity (nodes, Services + config, each Service's slices), so after one
 * EndpointSlice changes only that Service is planned again. Sources keep unchanged
 * objects identical between snapshots for this to pay off; correctness never depends on it.
 */

import { sliceServiceKey, slicesByService } from "../endpoints/merge.ts";
import type { EndpointSlice, Namespace, PasslbConfigSpec, Service } from "../k8s/objects.ts";
import { objectKey, type Snapshot } from "../k8s/snapshot.ts";
import { parsePortRange } from "../k8s/validate.ts";
import { addressPools, type NamespaceLabels } from "./address-pools.ts";
import { assignVips, type VipAssignment } from "./ipam.ts";
import type { LoadBalancerPlan } from "./load-balancer-plan.ts";
import { type NodeTable, nodeTable } from "./node-table.ts";
import { serviceOwnership } from "./ownership.ts";
import { planService } from "./service-plan.ts";
import { statusVips } from "./status-vips.ts";
import { nameHash } from "./subset.ts";

export interface PlanOptions {
  /** the previous plans, by `namespace/name`: subsets stay sticky */
  readonly previous?: ReadonlyMap<string, LoadBalancerPlan>;
  /** `Proxy` when a userspace proxy carries the traffic (Kubernetes' ipMode) */
  readonly ipMode?: "VIP" | "Proxy";
  /**
   * Where VIPs come from: `ipam` (default) runs address management over the pools;
   * `status` takes them from status.loadBalancer.ingress only (an LB host in Kubernetes
   * mode, where the controller assigns them: status-vips.ts).
   */
  readonly vipSource?: "ipam" | "status";
}

export interface SkippedService {
  readonly service: string;
  readonly reason: string;
}

export interface PlanResult {
  /** sorted by `namespace/name` */
  readonly plans: readonly LoadBalancerPlan[];
  readonly skipped: readonly SkippedService[];
}

interface ServiceMemo {
  readonly service: Service;
  readonly slices: readonly EndpointSlice[];
  readonly nodes: NodeTable;
  readonly vips: VipAssignment;
  readonly hcnp: number | undefined;
  readonly previous: LoadBalancerPlan | undefined;
  readonly ipMode: string;
  readonly plan: LoadBalancerPlan;
}

export interface PlanCache {
  nodes?: { input: Snapshot["nodes"]; table: NodeTable };
  services?: {
    input: Snapshot["services"];
    config: PasslbConfigSpec;
    vipSource: "ipam" | "status";
    /** for pool namespace selectors */
    namespaces: Snapshot["namespaces"];
    owned: Service[];
    /** `namespace/name` of each owned Service, same order */
    keys: string[];
    byKey: Map<string, Service>;
    skipped: SkippedService[];
    vips: Map<string, VipAssignment>;
    hcnp: Map<string, number>;
  };
  slices?: { input: Snapshot["endpointSlices"]; byService: Map<string, EndpointSlice[]> };
  perService: Map<string, ServiceMemo>;
  /** the last call's inputs and answer, for the fast path when only slices changed */
  last?: {
    nodes: Snapshot["nodes"];
    services: Snapshot["services"];
    config: PasslbConfigSpec;
    slices: Snapshot["endpointSlices"];
    previous: PlanOptions["previous"];
    ipMode: string;
    vipSource: "ipam" | "status";
    result: PlanResult;
    /** `namespace/name` → index in result.plans */
    index: Map<string, number>;
  };
}

export function createPlanCache(): PlanCache {
  return { perService: new Map() };
}

const NO_SLICES: readonly EndpointSlice[] = [];

export function planSnapshot(
  snapshot: Snapshot,
  options: PlanOptions = {},
  cache: PlanCache = createPlanCache(),
): PlanResult {
  const ipMode = options.ipMode ?? "VIP";
  const vipSource = options.vipSource ?? "ipam";
  const last = cache.last;
  if (
    last &&
    cache.slices &&
    last.nodes === snapshot.nodes &&
    last.services === snapshot.services &&
    last.config === snapshot.config &&
    sameNamespaces(cache.services?.namespaces, snapshot.namespaces) &&
    last.previous === options.previous &&
    last.ipMode === ipMode &&
    last.vipSource === vipSource
  ) {
    if (last.slices === snapshot.endpointSlices) return last.result;
    const changed = patchSliceGroups(last.slices, snapshot.endpointSlices, cache.slices.byService);
    if (changed) {
      cache.slices.input = snapshot.endpointSlices;
      const plans = [...last.result.plans];
      for (const key of changed) {
        const at = last.index.get(key);
        if (at === undefined) continue; // not a Service passlb plans
        plans[at] = planOne(key, snapshot, options, cache);
      }
      const result = { plans, skipped: last.result.skipped };
      cache.last = { ...last, slices: snapshot.endpointSlices, result };
      return result;
    }
  }

  if (cache.nodes?.input !== snapshot.nodes)
    cache.nodes = { input: snapshot.nodes, table: nodeTable(snapshot.nodes) };
  if (
    cache.services?.input !== snapshot.services ||
    cache.services.config !== snapshot.config ||
    cache.services.vipSource !== vipSource ||
    !sameNamespaces(cache.services.namespaces, snapshot.namespaces)
  )
    cache.services = {
      input: snapshot.services,
      config: snapshot.config,
      vipSource,
      namespaces: snapshot.namespaces,
      ...servicesStep(snapshot.services, snapshot.config, vipSource, labelsOf(snapshot.namespaces)),
    };
  if (cache.slices?.input !== snapshot.endpointSlices)
    cache.slices = { input: snapshot.endpointSlices, byService: slicesByService(snapshot.endpointSlices) };

  const plans: LoadBalancerPlan[] = [];
  const index = new Map<string, number>();
  for (const key of cache.services.keys) {
    index.set(key, plans.length);
    plans.push(planOne(key, snapshot, options, cache));
  }
  for (const key of cache.perService.keys()) if (!index.has(key)) cache.perService.delete(key);
  const result = { plans, skipped: cache.services.skipped };
  cache.last = {
    nodes: snapshot.nodes,
    services: snapshot.services,
    config: snapshot.config,
    slices: snapshot.endpointSlices,
    previous: options.previous,
    ipMode,
    vipSource,
    result,
    index,
  };
  return result;
}

/** Plans one owned Service, reusing the memo when none of its inputs changed. The cache's
 * node, Service and slice steps are current when this is called. */
function planOne(key: string, snapshot: Snapshot, options: PlanOptions, cache: PlanCache): LoadBalancerPlan {
  const table = cache.nodes!.table;
  const { byKey, vips, hcnp } = cache.services!;
  const memo = cache.perService.get(key);
  const svc = byKey.get(key)!;
  const slices = cache.slices!.byService.get(key) ?? NO_SLICES;
  const assignment = vips.get(key)!;
  const previous = options.previous?.get(key);
  const ipMode = options.ipMode ?? "VIP";
  if (
    memo &&
    memo.service === svc &&
    memo.nodes === table &&
    memo.vips === assignment &&
    memo.hcnp === hcnp.get(key) &&
    memo.previous === previous &&
    memo.ipMode === ipMode &&
    sameElements(memo.slices, slices)
  )
    return memo.plan;
  const plan = planService({
    service: svc,
    slices,
    nodes: table,
    vips: assignment,
    config: snapshot.config,
    healthCheckNodePort: hcnp.get(key),
    previousMembers: previous ? new Set(previous.members.map((b) => b.node)) : undefined,
    ipMode,
  });
  cache.perService.set(key, {
    service: svc,
    slices,
    nodes: table,
    vips: assignment,
    hcnp: hcnp.get(key),
    previous,
    ipMode,
    plan,
  });
  return plan;
}

/**
 * When the new slice list has the same length as the old one, finds the positions whose
 * object changed, patches the per-Service groups in place (copy-on-write per group) and
 * returns the Services touched; undefined when the lists differ in length (regroup all).
 */
function patchSliceGroups(
  before: readonly EndpointSlice[],
  after: readonly EndpointSlice[],
  groups: Map<string, EndpointSlice[]>,
): Set<string> | undefined {
  if (before.length !== after.length) return undefined;
  const touched = new Set<string>();
  for (let i = 0; i < after.length; i++) {
    const was = before[i]!;
    const now = after[i]!;
    if (was === now) continue;
    const oldKey = sliceServiceKey(was);
    const newKey = sliceServiceKey(now);
    if (oldKey !== undefined) {
      const list = (groups.get(oldKey) ?? []).filter((s) => s !== was);
      if (list.length > 0) groups.set(oldKey, list);
      else groups.delete(oldKey);
      touched.add(oldKey);
    }
    if (newKey !== undefined) {
      groups.set(newKey, [...(groups.get(newKey) ?? []), now]);
      touched.add(newKey);
    }
  }
  return touched;
}

/** Namespaces only matter to pool namespace selectors: two empty lists are the same input. */
function sameNamespaces(a: Snapshot["namespaces"] | undefined, b: Snapshot["namespaces"]): boolean {
  return a === b || (a !== undefined && a.length === 0 && b.length === 0);
}

function sameElements<T>(a: readonly T[], b: readonly T[]): boolean {
  if (a === b) return true;
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

function servicesStep(
  services: readonly Service[],
  config: PasslbConfigSpec,
  vipSource: "ipam" | "status",
  namespaceLabels: NamespaceLabels | undefined,
) {
  const keyed: { key: string; svc: Service }[] = [];
  const skipped: SkippedService[] = [];
  const others: Service[] = [];
  for (const svc of services) {
    if (svc.spec.type !== "LoadBalancer") continue;
    const o = serviceOwnership(svc, config);
    if (o.owned) keyed.push({ key: objectKey(svc.metadata), svc });
    else {
      skipped.push({ service: objectKey(svc.metadata), reason: o.reason });
      if (svc.status?.loadBalancer?.ingress?.length) others.push(svc);
    }
  }
  keyed.sort((a, b) => compare(a.key, b.key));
  skipped.sort((a, b) => compare(a.service, b.service));
  const owned = keyed.map((k) => k.svc);
  const keys = keyed.map((k) => k.key);
  const pools = addressPools(config.pools);
  const vips =
    vipSource === "status"
      ? statusVips(owned, pools)
      : assignVips(owned, pools, { others, ...(namespaceLabels && { namespaceLabels }) });
  const byKey = new Map(keyed.map((k) => [k.key, k.svc]));
  return { owned, keys, byKey, skipped, vips, hcnp: allocateHealthCheckNodePorts(services, owned, config) };
}

const compare = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** Namespace labels for pool namespace selectors from the snapshot's Namespaces (plus the
 * name label the API server sets on each); undefined when the input has none. */
function labelsOf(namespaces: readonly Namespace[]): NamespaceLabels | undefined {
  if (namespaces.length === 0) return undefined;
  const byName = new Map(namespaces.map((n) => [n.metadata.name ?? "", n.metadata.labels ?? {}]));
  return (ns) => ({ ...byName.get(ns), "kubernetes.io/metadata.name": ns });
}

/** Local Services without a healthCheckNodePort (manifests written for a cluster where the
 * API server allocates one): a free port from the node port range, starting at a position
 * hashed from the Service's name so the choice is stable while other Services come and go. */
function allocateHealthCheckNodePorts(
  all: readonly Service[],
  owned: readonly Service[],
  config: PasslbConfigSpec,
): Map<string, number> {
  const range = parsePortRange(config.nodePortRange) ?? { first: 30000, last: 32767 };
  const used = new Set<number>();
  for (const s of all) {
    for (const p of s.spec.ports) if (p.nodePort) used.add(p.nodePort);
    if (s.spec.healthCheckNodePort) used.add(s.spec.healthCheckNodePort);
  }
  const out = new Map<string, number>();
  const size = range.last - range.first + 1;
  for (const svc of owned) {
    if (svc.spec.externalTrafficPolicy !== "Local" || svc.spec.healthCheckNodePort) continue;
    const key = objectKey(svc.metadata);
    const start = nameHash(key) % size;
    for (let k = 0; k < size; k++) {
      const port = range.first + ((start + k) % size);
      if (!used.has(port)) {
        used.add(port);
        out.set(key, port);
        break;
      }
    }
  }
  return out;
}
