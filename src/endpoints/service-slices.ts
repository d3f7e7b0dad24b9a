/**
 * What the EndpointSlice controller derives from a Service alone: which address families it
 * serves, whether it is headless, the labels its slices carry, ownership, and the shape of a
 * new slice (upstream kubernetes/endpointslice
 * utils.go `getAddressTypesForService`, `ownedBy`, `setEndpointSliceLabels`, `newEndpointSlice`).
 *
 * One deliberate addition for manifests: a Service whose `spec.clusterIP` is absent (the API
 * server never stores that; it allocates one) is treated as the allocated, non-headless Service
 * it will become — families from `ipFamilies`, else IPv4. An explicit `None` or `""` is headless,
 * as upstream.
 */
import type { EndpointSlice, Service } from "../k8s/objects.ts";
import { SERVICE_NAME_LABEL } from "./merge.ts";

export const MANAGED_BY_LABEL = "endpointslice.kubernetes.io/managed-by";
export const HEADLESS_LABEL = "service.kubernetes.io/headless";
export const SKIP_MIRROR_LABEL = "endpointslice.kubernetes.io/skip-mirror";
export const CONTROLLER_NAME = "endpointslice-controller.k8s.io";
export const MIRRORING_CONTROLLER_NAME = "endpointslicemirroring-controller.k8s.io";
export const TRIGGER_TIME_ANNOTATION = "endpoints.kubernetes.io/last-change-trigger-time";

export type AddressType = "IPv4" | "IPv6";

const RESERVED = new Set([SERVICE_NAME_LABEL, MANAGED_BY_LABEL, HEADLESS_LABEL]);

/** Whether the Service has a cluster IP (upstream `IsServiceIPSet`), with absent = allocated. */
export function isServiceIpSet(service: Service): boolean {
  const ip = service.spec.clusterIP;
  return ip === undefined || (ip !== "None" && ip !== "");
}

/** The address types the Service's slices use, in a stable order (§1.2 step 1). */
export function addressTypesForService(service: Service): AddressType[] {
  const fromFamilies = [...new Set(service.spec.ipFamilies ?? [])];
  if (fromFamilies.length > 0) return fromFamilies;
  const ip = service.spec.clusterIP;
  if (ip === undefined) {
    const policy = service.spec.ipFamilyPolicy;
    return policy === "RequireDualStack" ? ["IPv4", "IPv6"] : ["IPv4"];
  }
  if (ip !== "" && ip !== "None") return [ip.includes(":") ? "IPv6" : "IPv4"];
  return ["IPv4", "IPv6"]; // headless without families: dual-stack
}

/** Owned = an ownerReference with the Service's uid, kind Service, apiVersion v1 (PR #94730). */
export function ownedBy(slice: EndpointSlice, service: Service): boolean {
  return (slice.metadata.ownerReferences ?? []).some(
    // a manifest may lack a uid; new slices then carry "" and must still count as owned
    (o) => o.uid === (service.metadata.uid ?? "") && o.kind === "Service" && o.apiVersion === "v1",
  );
}

function userLabels(labels: Readonly<Record<string, string>> | null | undefined): Map<string, string> {
  const out = new Map<string, string>();
  for (const [k, v] of Object.entries(labels ?? {})) if (!RESERVED.has(k)) out.set(k, v);
  return out;
}

/** The labels a slice of this Service must carry. */
export function sliceLabels(service: Service): Record<string, string> {
  const labels: Record<string, string> = Object.fromEntries(userLabels(service.metadata.labels));
  if (!isServiceIpSet(service)) labels[HEADLESS_LABEL] = "";
  labels[SERVICE_NAME_LABEL] = service.metadata.name ?? "";
  labels[MANAGED_BY_LABEL] = CONTROLLER_NAME;
  return labels;
}

/** Whether the slice's non-reserved labels differ from the Service's (reserved keys never count). */
export function labelsChanged(slice: EndpointSlice, service: Service): boolean {
  const a = userLabels(slice.metadata.labels);
  const b = userLabels(service.metadata.labels);
  if (a.size !== b.size) return true;
  for (const [k, v] of a) if (b.get(k) !== v) return true;
  return false;
}

/** generateName for a slice of `name`: `<name>-` (upstream `getEndpointSlicePrefix`). */
export function generateNameFor(name: string): string {
  const prefix = `${name}-`;
  return /^[a-z0-9]([-a-z0-9.]*)?$/.test(prefix) && prefix.length <= 253 ? prefix : name;
}

/** A new, empty slice of the Service for one address type and port list (§1.6). */
export function newServiceSlice(
  service: Service,
  addressType: AddressType,
  ports: EndpointSlice["ports"],
): EndpointSlice {
  const name = service.metadata.name ?? "";
  return {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: {
      generateName: generateNameFor(name),
      namespace: service.metadata.namespace ?? "default",
      labels: sliceLabels(service),
      ownerReferences: [
        {
          apiVersion: "v1",
          kind: "Service",
          name,
          uid: service.metadata.uid ?? "",
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    addressType,
    endpoints: [],
    ports: ports ?? [],
  };
}
