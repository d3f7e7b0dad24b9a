/**
 * The controller's decision, one pure function: from the Services in a Snapshot, the
 * LoadBalancerIPPools and the options, what to write to the API server — per Service an
 * ordered list of writes with the Events that go with them, and per pool its status.
 * Only what differs is written: an unchanged cluster gives no work at all.
 *
 * Rules (docs/controller.md):
 *   - ownership: plan/ownership.ts (`spec.loadBalancerClass: passlb.io/l4`, or no class
 *     with `--default-class`; only `type: LoadBalancer`);
 *   - addresses: plan/ipam.ts over the enabled pools, exactly as `passlb plan` assigns them
 *     (status first, then requests, then auto-assignment; sharing; dual stack), for owned
 *     Services that are not being deleted; addresses other Services still show in their
 *     status are never handed out; Services that already hold an address are written first;
 *   - ownership also covers the foreign classes of `acceptClasses` (`--accept-class`);
 *   - an owned Service gets the cleanup finalizer first, then its ingress and the
 *     `passlb.io/LoadBalancerReady` condition;
 *   - a Service being deleted, or no longer owned, that carries the finalizer (or passlb's
 *     condition) is released: ingress and condition cleared (unless it is being deleted),
 *     then the finalizer removed — the order Kubernetes' service controller uses.
 * Deliberately not here: the API calls, retries and leader election (the loop).
 */
import { type LoadBalancerIPPool, orderPools } from "../k8s/load-balancer-ip-pool.ts";
import type { Namespace, Service } from "../k8s/objects.ts";
import { DEFAULT_CONFIG, objectKey } from "../k8s/snapshot.ts";
import { addressPools, type NamespaceLabels } from "../plan/address-pools.ts";
import { assignVips, type VipAssignment } from "../plan/ipam.ts";
import { nodePortsMessage, portsWithoutNodePort } from "../plan/node-ports.ts";
import { serviceOwnership } from "../plan/ownership.ts";
import { hasStatusAddress } from "../plan/status-vips.ts";
import { type DesiredCondition, reasonFromCode, SERVICE_READY_CONDITION } from "./conditions.ts";
import { type ControllerEvent, controllerEvent, type EventTarget, issueEvent } from "./controller-events.ts";
import { analysePools, desiredPoolStatus, type PoolAnalysis, poolConflicts } from "./pool-status.ts";
import { applyServiceWrite, hasFinalizer, type IngressEntry, type ServiceWrite } from "./service-writes.ts";

export interface ControllerOptions {
  /** own LoadBalancer Services without a loadBalancerClass */
  readonly defaultClass: boolean;
  /** foreign loadBalancerClasses served as passlb's own (`--accept-class`) */
  readonly acceptClasses?: readonly string[];
  /** `status.loadBalancer.ingress[].ipMode`: `Proxy` when the LB hosts proxy in userspace */
  readonly ipMode: "VIP" | "Proxy";
}

export interface ServiceWork {
  /** `namespace/name` */
  readonly key: string;
  /** the object as read: the writes apply to it (or to a fresh copy after a 409) */
  readonly service: Service;
  readonly action: "ensure" | "release";
  readonly writes: readonly ServiceWrite[];
  /** recorded before the first write */
  readonly before: readonly ControllerEvent[];
  /** recorded once every write succeeded */
  readonly after: readonly ControllerEvent[];
}

export interface PoolWork {
  readonly pool: LoadBalancerIPPool;
  readonly status: NonNullable<LoadBalancerIPPool["status"]>;
}

export interface ControllerWrites {
  /** releases first (their addresses are free in this pass), then ensures; by key */
  readonly services: readonly ServiceWork[];
  readonly pools: readonly PoolWork[];
  /** every owned Service's addresses and issues, by key */
  readonly assignments: ReadonlyMap<string, VipAssignment>;
  /** every pool's size and use per family, as its status says (the `passlb_ip_pool_*` gauges) */
  readonly usage: readonly { pool: string; family: string; size: number; used: number }[];
}

export interface ControllerInput {
  readonly services: readonly Service[];
  readonly pools: readonly LoadBalancerIPPool[];
  /** Namespaces, for pool namespace selectors; without them only the name label is known */
  readonly namespaces?: readonly Namespace[];
  readonly options: ControllerOptions;
  readonly nowMs: number;
}

export function serviceTarget(svc: Service): EventTarget {
  return {
    kind: "Service",
    apiVersion: "v1",
    namespace: svc.metadata.namespace ?? "default",
    name: svc.metadata.name ?? "",
    uid: svc.metadata.uid ?? undefined,
  };
}

const byKey = <T extends { key: string }>(a: T, b: T) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);

export function controllerWrites(input: ControllerInput): ControllerWrites {
  const config = {
    ...DEFAULT_CONFIG,
    defaultClass: input.options.defaultClass,
    acceptClasses: [...(input.options.acceptClasses ?? [])],
  };
  const analysis: PoolAnalysis[] = analysePools(orderPools(input.pools));
  const active = addressPools(analysis.filter((a) => a.active).map((a) => a.pool));

  const owned: Service[] = [];
  const others: Service[] = [];
  const releases: ServiceWork[] = [];
  for (const svc of input.services) {
    const deleting = Boolean(svc.metadata.deletionTimestamp);
    const isOwned = serviceOwnership(svc, config).owned;
    if (isOwned && !deleting) owned.push(svc);
    else {
      const work = releaseWork(svc, deleting, input.nowMs);
      if (work) releases.push(work);
      // an address another implementation's Service shows in status is never handed out
      // (plan/address-ledger.ts); passlb's own releases are written first, so theirs are free
      else if (svc.spec.type === "LoadBalancer" && svc.status?.loadBalancer?.ingress?.length)
        others.push(svc);
    }
  }
  const namespaceLabels = input.namespaces?.length ? labelsOf(input.namespaces) : undefined;
  const assignments = withModeIssues(
    assignVips(owned, active, { others, ...(namespaceLabels && { namespaceLabels }) }),
    owned,
    input.options.ipMode,
  );
  const ensures: (ServiceWork & { holds: boolean })[] = [];
  for (const svc of owned) {
    const key = objectKey(svc.metadata);
    const work = ensureWork(svc, key, assignments.get(key)!, input.options, input.nowMs);
    if (work) ensures.push({ ...work, holds: hasStatusAddress(svc) });
  }
  // Services that already hold addresses are written first (MetalLB's service controller
  // reconciles them first on start-up, so none is "stolen"), then the others, by key
  ensures.sort((a, b) => (a.holds === b.holds ? byKey(a, b) : a.holds ? -1 : 1));

  const conflicts = poolConflicts(analysis, owned, assignments);
  const pools: PoolWork[] = [];
  const usage: ControllerWrites["usage"][number][] = [];
  for (const a of analysis) {
    const { status, changed } = desiredPoolStatus(
      a,
      assignments,
      conflicts.get(a.resource.metadata.name ?? "") ?? [],
      input.nowMs,
    );
    if (changed) pools.push({ pool: a.resource, status });
    for (const [family, u] of [
      ["IPv4", status.ipv4],
      ["IPv6", status.ipv6],
    ] as const)
      if (u)
        usage.push({ pool: a.resource.metadata.name ?? "", family, size: sizeOf(u.total), used: u.used });
  }
  return {
    services: [...releases.sort(byKey), ...ensures.map(({ holds: _, ...work }) => work)],
    pools,
    assignments,
    usage,
  };
}

/** a pool status's decimal total as a gauge value (an IPv6 /64 capped at 2^53 − 1) */
function sizeOf(total: string): number {
  const n = BigInt(total);
  return n > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(n);
}

/** A namespace's labels by name, plus the name label the API server sets on each. */
function labelsOf(namespaces: readonly Namespace[]): NamespaceLabels {
  const byName = new Map(namespaces.map((n) => [n.metadata.name ?? "", n.metadata.labels ?? {}]));
  return (ns) => ({ ...byName.get(ns), "kubernetes.io/metadata.name": ns });
}

/** The mode's own findings added to the address issues: a Proxy-mode Service whose ports
 * have no NodePorts gets a condition note and a Warning Event (plan/node-ports.ts). */
function withModeIssues(
  assignments: Map<string, VipAssignment>,
  owned: readonly Service[],
  ipMode: "VIP" | "Proxy",
): Map<string, VipAssignment> {
  if (ipMode !== "Proxy") return assignments;
  for (const svc of owned) {
    const missing = portsWithoutNodePort(svc, ipMode);
    if (missing.length === 0) continue;
    const key = objectKey(svc.metadata);
    const a = assignments.get(key);
    if (!a) continue;
    assignments.set(key, {
      ...a,
      issues: [
        ...a.issues,
        {
          code: "node_ports_required",
          severity: "warning",
          subject: `Service ${key}`,
          message: nodePortsMessage(missing),
        },
      ],
    });
  }
  return assignments;
}

/** Issues about leaving the address in status: true only until the new one is written, so
 * they are Events but not part of the condition (which would change again next pass). */
const MOVE_ISSUES: ReadonlySet<string> = new Set(["address_conflict", "status_address_not_in_pool"]);

/** Errors that make the Service not ready even when it holds an address: dual stack
 * missing, or a conflicting request refused (the address in status is kept meanwhile). */
const NOT_READY: ReadonlySet<string> = new Set([
  "dual_stack_unavailable",
  "conflicting_ip_request",
  "conflicting_pool_request",
  "conflicting_sharing_key",
]);

/** The Service's condition for its assignment: True with the addresses, or False with the
 * first error's code as the reason. */
export function readyCondition(svc: Service, a: VipAssignment): DesiredCondition {
  const g = svc.metadata.generation;
  const gen = g === undefined ? {} : { observedGeneration: g };
  const errors = a.issues.filter((i) => i.severity === "error");
  const notes = a.issues
    .filter((i) => i.severity !== "error" && !MOVE_ISSUES.has(i.code))
    .map((i) => i.message);
  if (a.vips.length === 0 || errors.some((e) => NOT_READY.has(e.code)))
    return {
      type: SERVICE_READY_CONDITION,
      status: "False",
      reason: errors[0] ? reasonFromCode(errors[0].code) : "NoAddress",
      message: (errors.length > 0 ? errors.map((e) => e.message) : ["no address could be assigned"]).join(
        "; ",
      ),
      ...gen,
    };
  const addresses = a.vips.map((v) => `${v.address} (pool ${v.pool ?? "none"})`).join(", ");
  return {
    type: SERVICE_READY_CONDITION,
    status: "True",
    reason: "AddressAssigned",
    message: [addresses, ...errors.map((e) => e.message), ...notes].join("; "),
    ...gen,
  };
}

function ensureWork(
  svc: Service,
  key: string,
  a: VipAssignment,
  options: ControllerOptions,
  nowMs: number,
): ServiceWork | undefined {
  const writes: ServiceWrite[] = [];
  if (!hasFinalizer(svc)) writes.push({ op: "add_finalizer" });
  const ingress: IngressEntry[] = a.vips.map((v) => ({ ip: v.address, ipMode: options.ipMode }));
  const condition = readyCondition(svc, a);
  const status: ServiceWrite = { op: "status", ingress, condition };
  const statusChanges = applyServiceWrite(svc, status, nowMs) !== undefined;
  if (statusChanges) writes.push(status);
  if (writes.length === 0) return undefined;
  const target = serviceTarget(svc);
  const before: ControllerEvent[] = [];
  const after: ControllerEvent[] = [];
  if (statusChanges) {
    const addresses = ingress.map((i) => i.ip).join(", ");
    if (ingress.length > 0) {
      before.push(controllerEvent(target, "EnsuringLoadBalancer", "Ensuring load balancer"));
      after.push(controllerEvent(target, "EnsuredLoadBalancer", `Ensured load balancer: ${addresses}`));
    }
    if (condition.status === "False")
      after.push(
        controllerEvent(
          target,
          "SyncLoadBalancerFailed",
          `Error syncing load balancer: ${condition.message}`,
        ),
      );
    for (const issue of a.issues) after.push(issueEvent(target, issue));
  }
  return { key, service: svc, action: "ensure", writes, before, after };
}

function releaseWork(svc: Service, deleting: boolean, nowMs: number): ServiceWork | undefined {
  const ours =
    hasFinalizer(svc) || (svc.status?.conditions ?? []).some((c) => c.type === SERVICE_READY_CONDITION);
  if (!ours) return undefined;
  const writes: ServiceWrite[] = [];
  const clear: ServiceWrite = { op: "status", ingress: [], condition: null };
  if (!deleting && applyServiceWrite(svc, clear, nowMs) !== undefined) writes.push(clear);
  if (hasFinalizer(svc)) writes.push({ op: "remove_finalizer" });
  if (writes.length === 0) return undefined;
  const target = serviceTarget(svc);
  const why = deleting ? "the Service is being deleted" : "passlb no longer owns the Service";
  return {
    key: objectKey(svc.metadata),
    service: svc,
    action: "release",
    writes,
    before: [controllerEvent(target, "DeletingLoadBalancer", `Deleting load balancer: ${why}`)],
    after: [controllerEvent(target, "DeletedLoadBalancer", "Deleted load balancer: the address is released")],
  };
}
