/**
 * Test-only: custom resources as kube-apiserver's apiextensions-apiserver treats them, from
 * the CRDs in deploy/ (every crd-*.yaml: LoadBalancerIPPool, LoadBalancerBGPPeer; their
 * structural schemas and subresources).
 *
 * - Pruning (apiextensions-apiserver pkg/apiserver/schema/pruning/algorithm.go prune): a
 *   field the structural schema does not name is dropped, at every depth; the root is an
 *   embedded resource, so apiVersion, kind and metadata are left alone there. The dropped
 *   paths are `spec.foo`, `status.conflicts[0].bar`.
 * - fieldValidation (apiserver pkg/endpoints/handlers/rest.go fieldValidation and
 *   apiextensions customresource_handler.go schemaCoercingDecoder): Strict → 400
 *   `strict decoding error: unknown field "spec.foo"`; Warn (the default) → the write
 *   succeeds with a `Warning: 299 - "unknown field \"spec.foo\""` header; Ignore → silent.
 * - Defaulting (pkg/apiserver/schema/defaulting/algorithm.go): a missing property with a
 *   `default` gets it.
 * - Validation against the schema (pkg/apiserver/validation): type, required, enum,
 *   pattern, lengths, minimum, minItems, date-time, with kube-apiserver's field errors
 *   (fake-api-crd-validation.ts).
 * - Patch types (customresource_handler.go supportedTypes): JSON patch, merge patch and
 *   apply; strategic merge patch is a 415 (checked in fake-api-store.ts).
 *
 * Deliberately not: CEL rules (x-kubernetes-validations: the CRDs have none), conversion
 * webhooks (one version), ratcheting, list-type map merge keys.
 */
import { readdirSync, readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { crdFieldErrors } from "./fake-api-crd-validation.ts";
import { invalid } from "./fake-api-field-errors.ts";
import { ApiStatusError, type Obj } from "./fake-api-store.ts";

// biome-ignore lint/suspicious/noExplicitAny: OpenAPI schema documents, read field by field
type Schema = any;

export interface CrdInfo {
  readonly group: string;
  readonly version: string;
  readonly plural: string;
  readonly kind: string;
  readonly namespaced: boolean;
  readonly status: boolean;
  readonly schema: Schema;
}

const DEPLOY = new URL("../../deploy/", import.meta.url).pathname;
export const CRD_FILES = readdirSync(DEPLOY)
  .filter((f) => /^crd-.*\.yaml$/.test(f))
  .sort()
  .map((f) => `${DEPLOY}${f}`);

export function loadCrds(files: readonly string[] = CRD_FILES): CrdInfo[] {
  const out: CrdInfo[] = [];
  for (const doc of files.flatMap((file) => parseAllDocuments(readFileSync(file, "utf8")))) {
    const crd = doc.toJS() as Schema;
    if (crd?.kind !== "CustomResourceDefinition") continue;
    for (const v of crd.spec.versions ?? []) {
      out.push({
        group: crd.spec.group,
        version: v.name,
        plural: crd.spec.names.plural,
        kind: crd.spec.names.kind,
        namespaced: crd.spec.scope === "Namespaced",
        status: v.subresources?.status !== undefined,
        schema: v.schema.openAPIV3Schema,
      });
    }
  }
  return out;
}

const META_FIELDS = new Set(["apiVersion", "kind", "metadata"]);

function prune(x: unknown, s: Schema | undefined, path: string, unknown: string[], root: boolean): void {
  if (s?.["x-kubernetes-preserve-unknown-fields"]) return;
  if (Array.isArray(x)) {
    for (const [i, v] of x.entries()) prune(v, s?.items, `${path}[${i}]`, unknown, false);
    return;
  }
  if (typeof x !== "object" || x === null) return;
  const o = x as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    if (root && META_FIELDS.has(k)) continue;
    const p = path === "" ? k : `${path}.${k}`;
    const child =
      s?.properties?.[k] ??
      (typeof s?.additionalProperties === "object" ? s.additionalProperties : undefined);
    if (child !== undefined) prune(o[k], child, p, unknown, false);
    else {
      unknown.push(p);
      delete o[k];
    }
  }
}

export function applyDefaults(x: unknown, s: Schema | undefined): void {
  if (Array.isArray(x)) {
    for (const v of x) applyDefaults(v, s?.items);
    return;
  }
  if (typeof x !== "object" || x === null || !s?.properties) return;
  const o = x as Record<string, unknown>;
  for (const [k, child] of Object.entries(s.properties as Record<string, Schema>)) {
    if (o[k] === undefined && child.default !== undefined) o[k] = structuredClone(child.default);
    if (o[k] !== undefined) applyDefaults(o[k], child);
  }
}

export type FieldValidation = "Strict" | "Warn" | "Ignore";

/**
 * Decoding: prunes and defaults `obj` in place by the CRD's schema. Returns the warnings to
 * send; throws the 400 the real server answers under Strict.
 */
export function pruneCustomResource(crd: CrdInfo, obj: Obj, validation: FieldValidation): string[] {
  const unknown: string[] = [];
  prune(obj, crd.schema, "", unknown, true);
  // Go visits map keys in random order; sorted here so a test can compare the message
  unknown.sort();
  if (unknown.length > 0 && validation === "Strict") {
    throw new ApiStatusError(
      400,
      "BadRequest",
      `strict decoding error: ${unknown.map((u) => `unknown field ${JSON.stringify(u)}`).join(", ")}`,
    );
  }
  applyDefaults(obj, crd.schema);
  return validation === "Warn" ? unknown.map((u) => `unknown field ${JSON.stringify(u)}`) : [];
}

/** Validation against the schema: throws the 422 naming every failing field. */
export function validateCustomResource(crd: CrdInfo, obj: Obj): void {
  const errs = crdFieldErrors(crd.schema, obj);
  if (errs.length > 0) throw invalid(crd.kind, crd.group, String(obj.metadata.name ?? ""), errs);
}

/** The `fieldValidation` query parameter (default Warn, as the real server since 1.27). */
export function fieldValidationOf(url: URL): FieldValidation {
  const v = url.searchParams.get("fieldValidation") ?? "";
  if (v === "" || v === "Warn") return "Warn";
  if (v === "Strict" || v === "Ignore") return v;
  throw new ApiStatusError(
    400,
    "BadRequest",
    `fieldValidation parameter unsupported: ${v}. Supported values are: Ignore, Warn, Strict`,
  );
}
