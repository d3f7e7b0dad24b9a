/**
 * The slice controllers over a whole Snapshot: which Pods each Service selects, the
 * EndpointSlice controller for every selector Service, the mirroring controller for every
 * Endpoints object, and standalone mode's `slicesForSnapshot`
 * (kubernetes/endpointslice reconciler.go, pkg/controller/endpointslicemirroring). Results are sorted by `namespace/name`, so output can be diffed.
 *
 * `slicesForSnapshot` is what the planner calls when there is no kube-controller-manager:
 * every selector Service without a slice in the input gets the slices the controller would
 * create (named as the API server would, deterministically); every selector-less Service with
 * an Endpoints object and no slice gets the mirrored ones. Services whose slices are in the
 * input keep them untouched: the input is the truth.
 */
import type { EndpointSlice, Endpoints, Node, Pod, Service } from "../k8s/objects.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { deterministicSliceNames } from "./generated-name.ts";
import { SERVICE_NAME_LABEL } from "./merge.ts";
import { mirrorEndpoints, mirroredSlicesOf } from "./mirroring.ts";
import { type ReconcileOptions, reconcileService } from "./reconciler.ts";
import { applySliceWrites, type SliceFinding, type SliceWrites } from "./slice-writes.ts";

export interface ServiceSliceWrites extends SliceWrites {
  /** `namespace/name` */
  readonly service: string;
  readonly findings: SliceFinding[];
}

export interface SnapshotSliceOptions extends ReconcileOptions {
  readonly maxEndpointsPerSubset?: number;
  /** names created slices; default: deterministic generateName suffixes */
  readonly nameFor?: (slice: EndpointSlice, taken: ReadonlySet<string>) => string;
}

const ns = (o: { metadata: { namespace?: string | undefined } }) => o.metadata.namespace ?? "default";
const key = (o: { metadata: { namespace?: string | undefined; name?: string | undefined } }) =>
  `${ns(o)}/${o.metadata.name ?? ""}`;
const byKey = <T extends { metadata: { namespace?: string | undefined; name?: string | undefined } }>(
  list: readonly T[],
) => [...list].sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));

/** The Pods a Service selects: same namespace, every selector label equal (an empty selector
 * selects every Pod of the namespace, as a label selector does). */
export function selectPods(service: Service, pods: readonly Pod[]): Pod[] {
  const selector = Object.entries(service.spec.selector ?? {});
  return pods.filter(
    (p) => ns(p) === ns(service) && selector.every(([k, v]) => p.metadata.labels?.[k] === v),
  );
}

/**
 * `selectPods` for many Services over one Pod list: the Pods are grouped by namespace once,
 * and per namespace and label key by value on first use, so a Service's selection looks at
 * the Pods carrying its selector's first label value instead of every Pod (10,000 Services
 * over 100,000 Pods would otherwise be 10⁹ label reads per pass). Same Pods, same order.
 */
export function podSelector(pods: readonly Pod[]): (service: Service) => Pod[] {
  const byNamespace = new Map<string, Pod[]>();
  for (const p of pods) {
    const list = byNamespace.get(ns(p));
    if (list) list.push(p);
    else byNamespace.set(ns(p), [p]);
  }
  /** `namespace\0label key` → label value → Pods, in input order */
  const byLabel = new Map<string, Map<string, Pod[]>>();
  return (service) => {
    const inNamespace = byNamespace.get(ns(service)) ?? [];
    const selector = Object.entries(service.spec.selector ?? {});
    const first = selector[0];
    if (!first) return [...inNamespace];
    const indexKey = `${ns(service)}\0${first[0]}`;
    let index = byLabel.get(indexKey);
    if (!index) {
      index = new Map();
      for (const p of inNamespace) {
        const v = p.metadata.labels?.[first[0]];
        if (typeof v !== "string") continue;
        const list = index.get(v);
        if (list) list.push(p);
        else index.set(v, [p]);
      }
      byLabel.set(indexKey, index);
    }
    return (index.get(first[1]) ?? []).filter((p) =>
      selector.every(([k, v]) => p.metadata.labels?.[k] === v),
    );
  };
}

/**
 * The slices of `slices` that may belong to each Service — those in its namespace labelled
 * with its name — grouped once, for the reconciler's `slices` input (which keeps only the
 * controller's own among them: controllerSlicesOf). Per Service the candidates, not every
 * slice of the cluster.
 */
export function slicesByService(slices: readonly EndpointSlice[]): (service: Service) => EndpointSlice[] {
  const byService = new Map<string, EndpointSlice[]>();
  for (const s of slices) {
    const name = s.metadata.labels?.[SERVICE_NAME_LABEL];
    if (typeof name !== "string") continue;
    const k = `${ns(s)}/${name}`;
    const list = byService.get(k);
    if (list) list.push(s);
    else byService.set(k, [s]);
  }
  return (service) => byService.get(key(service)) ?? [];
}

const nodeMaps = new WeakMap<readonly Node[], Map<string, Node>>();

/** Nodes by name; the same Map for the same Node list, so the reconciler's per-Service memo
 * (desired-endpoints.ts, keyed on the Map) carries over from one pass to the next. */
export function nodesByName(nodes: readonly Node[]): ReadonlyMap<string, Node> {
  let m = nodeMaps.get(nodes);
  if (!m) {
    m = new Map(nodes.map((n) => [n.metadata.name ?? "", n]));
    nodeMaps.set(nodes, m);
  }
  return m;
}

const hasSelector = (s: Service) => s.spec.type !== "ExternalName" && s.spec.selector != null;

/** The EndpointSlice controller's writes for every selector Service of the snapshot. */
export function reconcileSnapshot(snapshot: Snapshot, options: ReconcileOptions = {}): ServiceSliceWrites[] {
  const nodes = nodesByName(snapshot.nodes);
  const select = podSelector(snapshot.pods);
  const slicesOf = slicesByService(snapshot.endpointSlices);
  return byKey(snapshot.services.filter(hasSelector)).map((service) => ({
    service: key(service),
    ...reconcileService({ service, pods: select(service), nodes, slices: slicesOf(service) }, options),
  }));
}

/** The mirroring controller's writes for every Endpoints object, and for mirrored slices
 * whose Endpoints object is gone. */
export function mirrorSnapshot(
  snapshot: Snapshot,
  options: { maxEndpointsPerSubset?: number } = {},
): ServiceSliceWrites[] {
  const services = new Map(snapshot.services.map((s) => [key(s), s]));
  const endpoints = new Map<string, Endpoints | undefined>(snapshot.endpoints.map((e) => [key(e), e]));
  for (const s of snapshot.endpointSlices) {
    const name = s.metadata.labels?.[SERVICE_NAME_LABEL];
    if (name && mirroredSlicesOf(ns(s), name, [s]).length > 0 && !endpoints.has(`${ns(s)}/${name}`))
      endpoints.set(`${ns(s)}/${name}`, undefined);
  }
  return [...endpoints.keys()].sort().map((k) => {
    const [namespace = "default", name = ""] = k.split("/");
    const r = mirrorEndpoints(
      {
        endpoints: endpoints.get(k),
        service: services.get(k),
        slices: snapshot.endpointSlices,
        namespace,
        name,
      },
      options,
    );
    return { service: k, ...r };
  });
}

/** The snapshot's slices plus those the controllers would create where the input has none. */
export function slicesForSnapshot(
  snapshot: Snapshot,
  options: SnapshotSliceOptions = {},
): { endpointSlices: EndpointSlice[]; findings: SliceFinding[] } {
  const withSlices = new Set<string>();
  for (const s of snapshot.endpointSlices) {
    const name = s.metadata.labels?.[SERVICE_NAME_LABEL];
    if (name) withSlices.add(`${ns(s)}/${name}`);
  }
  const nameFor = options.nameFor ?? deterministicSliceNames();
  const nodes = nodesByName(snapshot.nodes);
  const endpointsByKey = new Map(snapshot.endpoints.map((e) => [key(e), e]));
  const create: EndpointSlice[] = [];
  const findings: SliceFinding[] = [];
  const select = podSelector(snapshot.pods);
  for (const service of byKey(snapshot.services)) {
    const k = key(service);
    if (withSlices.has(k) || service.spec.type === "ExternalName") continue;
    let result: SliceWrites & { findings: SliceFinding[] };
    if (service.spec.selector != null) {
      const pods = select(service);
      result = reconcileService({ service, pods, nodes, slices: [] }, options);
    } else {
      const endpoints = endpointsByKey.get(k);
      if (!endpoints) continue;
      const [namespace = "default", name = ""] = k.split("/");
      result = mirrorEndpoints({ endpoints, service, slices: [], namespace, name }, options);
    }
    findings.push(...result.findings);
    create.push(...result.create);
  }
  const endpointSlices = applySliceWrites(
    snapshot.endpointSlices,
    { create, update: [], delete: [] },
    nameFor,
  );
  return { endpointSlices, findings };
}
