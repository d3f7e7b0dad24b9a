/**
 * A Snapshot is everything passlb knows about the cluster at one moment: plain decoded
 * objects, no indexes, no I/O. Every source (manifest folder, kube API, memory) produces
 * one; every pure step consumes one.
 */
import type { EndpointSlice, Endpoints, Namespace, Node, PasslbConfigSpec, Pod, Service } from "./objects.ts";
import { PasslbConfigSchema } from "./objects.ts";

export interface Snapshot {
  readonly services: readonly Service[];
  readonly nodes: readonly Node[];
  readonly pods: readonly Pod[];
  readonly endpointSlices: readonly EndpointSlice[];
  readonly endpoints: readonly Endpoints[];
  readonly namespaces: readonly Namespace[];
  /** the effective PasslbConfig spec (defaults when the input had none) */
  readonly config: PasslbConfigSpec;
}

export const DEFAULT_CONFIG: PasslbConfigSpec = PasslbConfigSchema.shape.spec.parse(undefined);

export function emptySnapshot(config: PasslbConfigSpec = DEFAULT_CONFIG): Snapshot {
  return { services: [], nodes: [], pods: [], endpointSlices: [], endpoints: [], namespaces: [], config };
}

/** `namespace/name` for namespaced objects (namespace defaults to "default"), `name` otherwise. */
export function objectKey(meta: { namespace?: string | undefined; name?: string | undefined }): string {
  return `${meta.namespace ?? "default"}/${meta.name ?? ""}`;
}
