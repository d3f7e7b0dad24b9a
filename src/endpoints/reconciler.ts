/**
 * The EndpointSlice controller for one selector Service: Pods + Nodes + the Service's
 * existing slices → the slices to create, update and delete
 * (upstream kubernetes/endpointslice reconciler.go `Reconcile`, `reconcileByAddressType`,
 * `finalize`, `placeholderSliceCompare`; kubernetes pkg/controller/endpointslice `syncService`).
 *
 * Per address type: unowned slices are deleted; owned ones are grouped by port list and
 * packed (`pack-slices.ts`); groups no longer desired are deleted; a placeholder keeps a
 * family from having no slice; hints are reconciled; then pending creates take over the
 * names of pending deletes (one update instead of a create and a delete). Slices of a type
 * the Service no longer serves are deleted last and never recycled.
 *
 * It does not select Pods (pass the Service's Pods) and does not talk to an API server.
 * `triggerTime` is an input: the last-change-trigger-time annotation is set to it on every
 * written slice, or removed when it is absent, as upstream does with a zero time.
 */
import type { EndpointSlice, Node, Pod, Service } from "../k8s/objects.ts";
import { desiredEndpoints, type PortGroup } from "./desired-endpoints.ts";
import { portMapKey } from "./endpoint-set.ts";
import { SERVICE_NAME_LABEL } from "./merge.ts";
import { packSlices } from "./pack-slices.ts";
import {
  type AddressType,
  addressTypesForService,
  CONTROLLER_NAME,
  MANAGED_BY_LABEL,
  newServiceSlice,
  ownedBy,
  TRIGGER_TIME_ANNOTATION,
} from "./service-slices.ts";
import { reconcileHints, usesTopologyCache } from "./slice-hints.ts";
import { sliceWriteFindings } from "./slice-validation.ts";
import type { SliceFinding, SliceWrites } from "./slice-writes.ts";

export const DEFAULT_MAX_ENDPOINTS_PER_SLICE = 100;

export interface ReconcileOptions {
  /** 1..1000, default 100 (kube-controller-manager --max-endpoints-per-slice) */
  readonly maxEndpointsPerSlice?: number;
  /** RFC 3339 time of the change that triggered this sync; absent removes the annotation */
  readonly triggerTime?: string;
  /** the PreferSameTrafficDistribution option (PreferSameZone/PreferSameNode hints); default true */
  readonly preferSameTrafficDistribution?: boolean;
}

export interface ReconcileInput {
  readonly service: Service;
  /** the Pods the Service selects */
  readonly pods: readonly Pod[];
  readonly nodes: ReadonlyMap<string, Node>;
  /** slices in the Service's namespace; only the controller's slices of this Service are used */
  readonly slices: readonly EndpointSlice[];
}

export interface ReconcileResult extends SliceWrites {
  readonly findings: SliceFinding[];
}

/** The slices this controller manages for the Service (both labels, not being deleted), by name. */
export function controllerSlicesOf(service: Service, slices: readonly EndpointSlice[]): EndpointSlice[] {
  const ns = service.metadata.namespace ?? "default";
  return slices
    .filter(
      (s) =>
        (s.metadata.namespace ?? "default") === ns &&
        s.metadata.labels?.[SERVICE_NAME_LABEL] === service.metadata.name &&
        s.metadata.labels?.[MANAGED_BY_LABEL] === CONTROLLER_NAME &&
        !s.metadata.deletionTimestamp,
    )
    .sort((a, b) => ((a.metadata.name ?? "") < (b.metadata.name ?? "") ? -1 : 1));
}

const emptyish = (v: readonly unknown[] | null | undefined) => !v || v.length === 0;

/** Upstream `placeholderSliceCompare`: namespace, labels, addressType, ports, endpoints. */
function isPlaceholderLike(slice: EndpointSlice, placeholder: EndpointSlice): boolean {
  const a = slice.metadata.labels ?? {};
  const b = placeholder.metadata.labels ?? {};
  const sameLabels =
    Object.keys(a).length === Object.keys(b).length && Object.entries(b).every(([k, v]) => a[k] === v);
  return (
    sameLabels &&
    (slice.metadata.namespace ?? "default") === placeholder.metadata.namespace &&
    slice.addressType === placeholder.addressType &&
    emptyish(slice.ports) &&
    emptyish(slice.endpoints)
  );
}

function withTriggerTime(slice: EndpointSlice, triggerTime: string | undefined): EndpointSlice {
  const annotations = { ...(slice.metadata.annotations ?? {}) };
  if (triggerTime === undefined) {
    if (!(TRIGGER_TIME_ANNOTATION in annotations)) return slice;
    delete annotations[TRIGGER_TIME_ANNOTATION];
  } else annotations[TRIGGER_TIME_ANNOTATION] = triggerTime;
  const metadata = { ...slice.metadata };
  if (Object.keys(annotations).length > 0) metadata.annotations = annotations;
  else delete metadata.annotations;
  return { ...slice, metadata };
}

function reconcileType(
  service: Service,
  type: AddressType,
  existing: readonly EndpointSlice[],
  desired: ReadonlyMap<string, PortGroup>,
  options: ReconcileOptions,
): SliceWrites {
  const max = options.maxEndpointsPerSlice ?? DEFAULT_MAX_ENDPOINTS_PER_SLICE;
  let create: EndpointSlice[] = [];
  let update: EndpointSlice[] = [];
  const del: EndpointSlice[] = [];
  let unchanged: EndpointSlice[] = [];
  const owned = new Map<string, EndpointSlice[]>();
  for (const s of existing) {
    if (!ownedBy(s, service)) {
      del.push(s);
      continue;
    }
    const key = portMapKey(s.ports);
    const group = owned.get(key);
    if (group) group.push(s);
    else owned.set(key, [s]);
  }
  for (const [key, group] of desired) {
    const r = packSlices({
      service,
      addressType: type,
      ports: group.ports,
      existing: owned.get(key) ?? [],
      desired: group.desired,
      maxEndpointsPerSlice: max,
    });
    create.push(...r.create);
    update.push(...r.update);
    del.push(...r.delete);
    unchanged.push(...r.unchanged);
  }
  for (const [key, group] of owned) if (!desired.has(key)) del.push(...group);

  // A family never goes without a slice: keep an existing placeholder or create one.
  if (create.length === 0 && del.length === existing.length) {
    const placeholder = newServiceSlice(service, type, []);
    if (del.length === 1 && isPlaceholderLike(del[0]!, placeholder)) del.length = 0;
    else create.push(placeholder);
  }

  if (!usesTopologyCache(service))
    ({ create, update, unchanged } = reconcileHints(service, options.preferSameTrafficDistribution ?? true, {
      create,
      update,
      unchanged,
    }));

  // Recycling: the last pending create takes the name of an owned slice of this type being deleted.
  for (let i = 0; i < del.length && create.length > 0; ) {
    const victim = del[i]!;
    if (victim.addressType === type && ownedBy(victim, service)) {
      const recycled = create.pop()!;
      update.push({ ...recycled, metadata: { ...recycled.metadata, name: victim.metadata.name ?? "" } });
      del.splice(i, 1);
    } else i++;
  }
  if (service.metadata.deletionTimestamp) create = [];
  const stamp = (s: EndpointSlice) => withTriggerTime(s, options.triggerTime);
  return { create: create.map(stamp), update: update.map(stamp), delete: del };
}

export function reconcileService(input: ReconcileInput, options: ReconcileOptions = {}): ReconcileResult {
  const { service } = input;
  const none: ReconcileResult = { create: [], update: [], delete: [], findings: [] };
  if (service.spec.type === "ExternalName" || service.spec.selector == null) return none;
  const max = options.maxEndpointsPerSlice ?? DEFAULT_MAX_ENDPOINTS_PER_SLICE;
  if (!Number.isInteger(max) || max < 1 || max > 1000)
    throw new RangeError(`maxEndpointsPerSlice must be an integer from 1 to 1000 (got ${max})`);
  const types = addressTypesForService(service);
  const existing = controllerSlicesOf(service, input.slices);
  const desired = desiredEndpoints(service, input.pods, input.nodes, types);
  const findings = [...desired.findings];
  const subject = `Service ${service.metadata.namespace ?? "default"}/${service.metadata.name ?? ""}`;
  if (usesTopologyCache(service))
    findings.push({
      code: "endpointslice_topology_hints_not_modelled",
      severity: "info",
      subject,
      message:
        "the Service asks for topology-aware hints (topology-mode: Auto); passlb does not model the CPU-proportional hint allocation and leaves hints as they are",
    });
  const out = { create: [] as EndpointSlice[], update: [] as EndpointSlice[], delete: [] as EndpointSlice[] };
  for (const type of types) {
    const r = reconcileType(
      service,
      type,
      existing.filter((s) => s.addressType === type),
      desired.byType.get(type)!,
      options,
    );
    out.create.push(...r.create);
    out.update.push(...r.update);
    out.delete.push(...r.delete);
  }
  // Slices of a type the Service does not serve (including legacy ones) go last, never recycled.
  out.delete.push(...existing.filter((s) => !types.includes(s.addressType as AddressType)));
  findings.push(...sliceWriteFindings(subject, [...out.create, ...out.update]));
  return { ...out, findings };
}
