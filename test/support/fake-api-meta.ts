/**
 * Test-only: ObjectMeta helpers of the fake Kubernetes API server's store (fake-api-store.ts):
 * generated names (apiserver pkg/storage/names/generate.go), GroupResource strings
 * (apimachinery schema.GroupResource.String), the system metadata no write can change
 * (apimachinery pkg/api/validation/objectmeta.go ValidateObjectMetaUpdate's immutable
 * fields), and NamespaceLifecycle (apiserver plugin/pkg/admission/namespace/lifecycle).
 */
import type { FakeResource } from "./fake-api-resources.ts";
import { ApiStatusError } from "./fake-api-status.ts";
import type { Meta, Obj } from "./fake-api-store.ts";

/** apiserver pkg/storage/names/generate.go: no vowels, no look-alike digits */
const NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789";

export function generateName(base: string): string {
  const prefix = base.length > 58 ? base.slice(0, 58) : base;
  let out = "";
  for (let i = 0; i < 5; i++) out += NAME_ALPHABET[Math.floor(Math.random() * NAME_ALPHABET.length)];
  return `${prefix}${out}`;
}

export function objectId(namespace: string | undefined, name: string): string {
  return `${namespace ?? ""}/${name}`;
}

/** "services", "leases.coordination.k8s.io": apimachinery GroupResource.String() */
export function qualified(res: FakeResource): string {
  return res.group === "" ? res.resource : `${res.resource}.${res.group}`;
}

/** what no write can change: the system-set metadata (ObjectMeta update validation) */
export function keepSystemMeta(stored: Obj): Partial<Meta> {
  const m = stored.metadata;
  return {
    name: m.name,
    namespace: m.namespace,
    uid: m.uid,
    creationTimestamp: m.creationTimestamp,
    generation: m.generation,
    ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
  } as Partial<Meta>;
}

export function asObject(res: FakeResource, body: unknown): Obj {
  if (typeof body !== "object" || body === null || Array.isArray(body)) {
    throw new ApiStatusError(400, "BadRequest", `${res.kind}: the body is not an object`);
  }
  const obj = structuredClone(body) as Obj;
  if (typeof obj.metadata !== "object" || obj.metadata === null) obj.metadata = {};
  return obj;
}

/** NamespaceLifecycle admission: the namespace must exist and not be terminating. */
export function namespaceAdmits(
  res: FakeResource,
  ns: Obj | undefined,
  namespace: string,
  name: string,
): void {
  if (!ns) {
    throw new ApiStatusError(404, "NotFound", `namespaces "${namespace}" not found`, {
      name: namespace,
      kind: "namespaces",
    });
  }
  const phase = (ns.status as { phase?: string } | undefined)?.phase;
  if (ns.metadata.deletionTimestamp || phase === "Terminating") {
    const what = name ? `${qualified(res)} "${name}"` : qualified(res);
    throw new ApiStatusError(
      403,
      "Forbidden",
      `${what} is forbidden: unable to create new content in namespace ${namespace} because it is being terminated`,
      {
        name,
        group: res.group,
        kind: res.resource,
        causes: [{ reason: "NamespaceTerminating", field: "metadata.namespace" }],
      },
    );
  }
}
