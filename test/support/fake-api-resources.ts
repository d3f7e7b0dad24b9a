/**
 * Test-only: the resource table of the fake Kubernetes API server (fake-api-server.ts) —
 * which group/version/resource it serves, the kind, whether it is namespaced and whether it
 * has a /status subresource — and the discovery documents built from it
 * (Kubernetes API concepts: "API groups and versioning", APIResourceList).
 *
 * - The custom resource comes from the CRD in deploy/ (fake-api-schema.ts), so its scope and
 *   status subresource are the ones the CRD declares.
 * - Field selectors: the labels each resource's conversion funcs accept
 *   (kubernetes pkg/apis/core/v1/conversion.go: Pod, Node, Event, Namespace, Service; the
 *   others get apimachinery's DefaultMetaV1FieldSelectorConversion, metadata.name and
 *   metadata.namespace; custom resources the same, apiextensions-apiserver
 *   customresource_handler.go). Any other label is a 400 `field label not supported: X`.
 * - Status strategies (pkg/registry/*\/strategy.go PrepareForUpdate): a write to /status keeps
 *   everything of the stored object but status — except a Service's metadata, which
 *   serviceStatusStrategy does not reset (pkg/registry/core/service/strategy.go resets only
 *   the spec); a custom resource's status write resets metadata too
 *   (apiextensions-apiserver pkg/registry/customresource/status_strategy.go).
 *
 * Deliberately only the resources passlb reads or writes; anything else is a 404.
 */
import { loadCrds } from "./fake-api-schema.ts";

export interface FakeResource {
  /** "" for the core group */
  readonly group: string;
  readonly version: string;
  /** plural, lower case: the URL segment */
  readonly resource: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly status: boolean;
  /** custom resources keep kind/apiVersion on list items; built-in lists drop them */
  readonly custom: boolean;
  /** the field selector labels the real server accepts */
  readonly fieldLabels: readonly string[];
  /** a /status write keeps the incoming metadata (Service) instead of the stored one */
  readonly statusKeepsMetadata: boolean;
}

const META_LABELS = ["metadata.name", "metadata.namespace"];

function r(
  group: string,
  version: string,
  resource: string,
  kind: string,
  namespaced: boolean,
  status: boolean,
  fieldLabels: readonly string[] = META_LABELS,
  statusKeepsMetadata = false,
): FakeResource {
  return {
    group,
    version,
    resource,
    kind,
    namespaced,
    status,
    custom: false,
    fieldLabels,
    statusKeepsMetadata,
  };
}

const CUSTOM: FakeResource[] = loadCrds().map((c) => ({
  group: c.group,
  version: c.version,
  resource: c.plural,
  kind: c.kind,
  namespaced: c.namespaced,
  status: c.status,
  custom: true,
  fieldLabels: c.namespaced ? META_LABELS : ["metadata.name"],
  statusKeepsMetadata: false,
}));

export const FAKE_RESOURCES: readonly FakeResource[] = [
  r("", "v1", "services", "Service", true, true, [...META_LABELS, "spec.clusterIP", "spec.type"], true),
  r("", "v1", "nodes", "Node", false, true, ["metadata.name", "spec.unschedulable"]),
  r("", "v1", "pods", "Pod", true, true, [
    ...META_LABELS,
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.podIPs",
    "status.nominatedNodeName",
  ]),
  r("", "v1", "namespaces", "Namespace", false, true, ["metadata.name", "status.phase"]),
  r("", "v1", "endpoints", "Endpoints", true, false),
  // Secret field labels: kubernetes pkg/apis/core/v1/conversion.go (metadata.*, type)
  r("", "v1", "secrets", "Secret", true, false, [...META_LABELS, "type"]),
  r("", "v1", "events", "Event", true, false, [
    "involvedObject.kind",
    "involvedObject.namespace",
    "involvedObject.name",
    "involvedObject.uid",
    "involvedObject.apiVersion",
    "involvedObject.resourceVersion",
    "involvedObject.fieldPath",
    "reason",
    "reportingComponent",
    "source",
    "type",
    ...META_LABELS,
  ]),
  r("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", true, false),
  r("coordination.k8s.io", "v1", "leases", "Lease", true, false),
  r("events.k8s.io", "v1", "events", "Event", true, false),
  ...CUSTOM,
];

export function apiVersionOf(res: FakeResource): string {
  return res.group === "" ? res.version : `${res.group}/${res.version}`;
}

/** "services", "discovery.k8s.io/endpointslices": the key a store and a counter use */
export function resourceKey(res: FakeResource): string {
  return res.group === "" ? res.resource : `${res.group}/${res.resource}`;
}

export function findResource(group: string, version: string, resource: string): FakeResource | undefined {
  return FAKE_RESOURCES.find((x) => x.group === group && x.version === version && x.resource === resource);
}

/** The resource of an object by its apiVersion and kind (for the test hooks). */
export function resourceOfObject(apiVersion: string, kind: string): FakeResource | undefined {
  return FAKE_RESOURCES.find((x) => apiVersionOf(x) === apiVersion && x.kind === kind);
}

export function discoveryDocument(path: string, served: readonly FakeResource[] = FAKE_RESOURCES): unknown {
  if (path === "/version") {
    return { major: "1", minor: "33", gitVersion: "v1.33.0-passlb-fake", platform: "linux/amd64" };
  }
  if (path === "/api") return { kind: "APIVersions", versions: ["v1"], serverAddressByClientCIDRs: [] };
  if (path === "/apis") {
    const groups = [...new Set(served.filter((x) => x.group !== "").map((x) => x.group))];
    return {
      kind: "APIGroupList",
      apiVersion: "v1",
      groups: groups.map((name) => {
        const versions = [...new Set(served.filter((x) => x.group === name).map((x) => x.version))];
        const list = versions.map((v) => ({ groupVersion: `${name}/${v}`, version: v }));
        return { name, versions: list, preferredVersion: list[0] };
      }),
    };
  }
  const m = /^\/(?:api\/(v1)|apis\/([^/]+)\/([^/]+))$/.exec(path);
  if (!m) return undefined;
  const group = m[2] ?? "";
  const version = m[1] ?? m[3] ?? "";
  const here = served.filter((x) => x.group === group && x.version === version);
  if (here.length === 0) return undefined;
  const verbs = ["create", "delete", "get", "list", "patch", "update", "watch"];
  const resources = here.flatMap((x) => [
    { name: x.resource, singularName: x.kind.toLowerCase(), namespaced: x.namespaced, kind: x.kind, verbs },
    ...(x.status
      ? [{ name: `${x.resource}/status`, singularName: "", namespaced: x.namespaced, kind: x.kind, verbs }]
      : []),
  ]);
  return {
    kind: "APIResourceList",
    apiVersion: "v1",
    groupVersion: group ? `${group}/${version}` : version,
    resources,
  };
}
