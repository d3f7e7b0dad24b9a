/**
 * `--manage-endpointslices`: the EndpointSlice engine (endpoints/reconciler.ts, a port of
 * Kubernetes' EndpointSlice controller) run by passlb for clusters that have no
 * EndpointSlice controller, with passlb's own managed-by value
 * (`endpointslice.kubernetes.io/managed-by: endpointslice-controller.passlb.io`), so passlb
 * never touches the slices another controller manages and theirs never look like passlb's.
 *
 * The engine is used unchanged: passlb's slices are shown to it under the upstream value
 * and what it writes is relabelled back; slices managed by anyone else are hidden from it.
 * Only Services with a selector, and only Services passlb owns (ownership.ts). Pure.
 */

import { reconcileService } from "../endpoints/reconciler.ts";
import { CONTROLLER_NAME, MANAGED_BY_LABEL } from "../endpoints/service-slices.ts";
import type { SliceFinding } from "../endpoints/slice-writes.ts";
import { nodesByName, podSelector, slicesByService } from "../endpoints/snapshot-slices.ts";
import type { EndpointSlice, Service } from "../k8s/objects.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { DEFAULT_CONFIG, objectKey } from "../k8s/snapshot.ts";
import { serviceOwnership } from "../plan/ownership.ts";

export const PASSLB_SLICE_MANAGER = "endpointslice-controller.passlb.io";

export interface PasslbSliceWrites {
  /** `namespace/name` of the Service */
  readonly service: string;
  readonly create: readonly EndpointSlice[];
  /** replaced by name, with the resourceVersion they were read with */
  readonly update: readonly EndpointSlice[];
  readonly delete: readonly EndpointSlice[];
  readonly findings: readonly SliceFinding[];
}

const relabel = (s: EndpointSlice, to: string): EndpointSlice => ({
  ...s,
  metadata: { ...s.metadata, labels: { ...(s.metadata.labels ?? {}), [MANAGED_BY_LABEL]: to } },
});

/** The slice writes for every owned selector Service of the snapshot that needs any. */
export function passlbSliceWrites(
  snapshot: Snapshot,
  defaultClass: boolean,
  acceptClasses: readonly string[] = [],
): PasslbSliceWrites[] {
  const config = { ...DEFAULT_CONFIG, defaultClass, acceptClasses: [...acceptClasses] };
  const ours = snapshot.endpointSlices.filter(
    (s) => s.metadata.labels?.[MANAGED_BY_LABEL] === PASSLB_SLICE_MANAGER,
  );
  const shown = ours.map((s) => relabel(s, CONTROLLER_NAME));
  const original = new Map(shown.map((s, i) => [s, ours[i]!]));
  const nodes = nodesByName(snapshot.nodes);
  const out: PasslbSliceWrites[] = [];
  const owned = (s: Service) =>
    s.spec.selector != null && !s.metadata.deletionTimestamp && serviceOwnership(s, config).owned;
  const select = podSelector(snapshot.pods);
  const slicesOf = slicesByService(shown);
  for (const service of snapshot.services.filter(owned)) {
    const r = reconcileService({ service, pods: select(service), nodes, slices: slicesOf(service) });
    if (r.create.length + r.update.length + r.delete.length === 0) continue;
    out.push({
      service: objectKey(service.metadata),
      create: r.create.map((s) => relabel(s, PASSLB_SLICE_MANAGER)),
      update: r.update.map((s) => relabel(s, PASSLB_SLICE_MANAGER)),
      delete: r.delete.map((s) => original.get(s) ?? s),
      findings: r.findings,
    });
  }
  return out.sort((a, b) => (a.service < b.service ? -1 : 1));
}
