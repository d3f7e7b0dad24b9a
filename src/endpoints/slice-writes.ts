/**
 * The result of reconciling one Service (or Endpoints): the EndpointSlices the controller
 * would create, update and delete, in the order it writes them (creates, then updates, then
 * deletes — kubernetes/endpointslice reconciler.go `finalize`), plus findings as data.
 *
 * `applySliceWrites` plays the API server's part for tests and for standalone mode: it gives
 * creates a name from an injected generator and replaces or removes the rest by name. It
 * does not bump resourceVersions or validate; nothing here is time- or random-dependent.
 */
import type { EndpointSlice } from "../k8s/objects.ts";

export type SliceFindingSeverity = "error" | "warning" | "info";

/** A finding about slices; codes are stable snake_case (docs/endpointslices.md lists them). */
export interface SliceFinding {
  readonly code: string;
  readonly severity: SliceFindingSeverity;
  /** `Service ns/name` or `Endpoints ns/name` */
  readonly subject: string;
  readonly message: string;
}

export interface SliceWrites {
  readonly create: EndpointSlice[];
  readonly update: EndpointSlice[];
  readonly delete: EndpointSlice[];
}

export const writeCount = (w: SliceWrites): number => w.create.length + w.update.length + w.delete.length;

const keyOf = (s: EndpointSlice) => `${s.metadata.namespace ?? "default"}/${s.metadata.name ?? ""}`;

/** The slices after the writes are applied; `nameFor` names each created slice (it is
 * given the slice and must return a name not yet taken). */
export function applySliceWrites(
  existing: readonly EndpointSlice[],
  writes: SliceWrites,
  nameFor: (slice: EndpointSlice, taken: ReadonlySet<string>) => string,
): EndpointSlice[] {
  const byKey = new Map<string, EndpointSlice>();
  for (const s of existing) byKey.set(keyOf(s), s);
  const taken = new Set([...byKey.values()].map((s) => s.metadata.name ?? ""));
  for (const s of writes.create) {
    const name = nameFor(s, taken);
    taken.add(name);
    const named = { ...s, metadata: { ...s.metadata, name } };
    byKey.set(keyOf(named), named);
  }
  for (const s of writes.update) byKey.set(keyOf(s), s);
  for (const s of writes.delete) byKey.delete(keyOf(s));
  return [...byKey.values()];
}
