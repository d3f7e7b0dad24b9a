/**
 * Test-only: the per-request checks of the fake Kubernetes API server that sit between HTTP
 * and the store — decoding and validation on writes (the store's Admission hooks), and the
 * field selector check on lists and watches.
 *
 * - decode: wire types (fake-api-wire.ts); for custom resources pruning, fieldValidation and
 *   defaults by the CRD's schema (fake-api-schema.ts).
 * - validate: the built-in rules (fake-api-validation.ts); for custom resources the schema.
 * - Field selectors (apiserver pkg/endpoints/handlers/get.go ListResource →
 *   scope.Convertor.ConvertFieldLabel): each label must be one the resource supports
 *   (fake-api-resources.ts fieldLabels), else 400 `field label not supported: X`.
 */
import type { FakeResource } from "./fake-api-resources.ts";
import { resourceKey } from "./fake-api-resources.ts";
import {
  applyDefaults,
  type CrdInfo,
  type FieldValidation,
  loadCrds,
  pruneCustomResource,
  validateCustomResource,
} from "./fake-api-schema.ts";
import { type Admission, ApiStatusError } from "./fake-api-store.ts";
import { validateObject } from "./fake-api-validation.ts";
import { decodeWire } from "./fake-api-wire.ts";

const CRDS: readonly CrdInfo[] = loadCrds();

function crdOf(res: FakeResource): CrdInfo | undefined {
  return CRDS.find((c) => c.group === res.group && c.version === res.version && c.plural === res.resource);
}

/** The store's hooks for one request; warnings go to `warnings`. */
export function requestAdmission(validation: FieldValidation, warnings: string[]): Admission {
  return {
    decode(res, obj) {
      const crd = res.custom ? crdOf(res) : undefined;
      if (crd) warnings.push(...pruneCustomResource(crd, obj, validation));
      else decodeWire(resourceKey(res), res.kind, res.version, obj);
    },
    validate(res, obj, old, sub) {
      const crd = res.custom ? crdOf(res) : undefined;
      if (crd) validateCustomResource(crd, obj);
      validateObject(res, obj, old, sub);
    },
  };
}

/** What a custom resource read from storage looks like: defaulted by its CRD (for put()). */
export function defaultStored(res: FakeResource, obj: Record<string, unknown>): void {
  const crd = res.custom ? crdOf(res) : undefined;
  if (crd) applyDefaults(obj, crd.schema);
}

/** 400 unless every label of `fieldSelector` is one the resource supports. */
export function checkFieldSelector(res: FakeResource, fieldSelector: string | null): void {
  for (const term of (fieldSelector ?? "").split(",").map((t) => t.trim())) {
    if (term === "") continue;
    const label = term.split(/!=|==|=/)[0]?.trim() ?? "";
    if (!res.fieldLabels.includes(label)) {
      throw new ApiStatusError(400, "BadRequest", `field label not supported: ${label}`);
    }
  }
}

/** The name a list or watch with `fieldSelector=metadata.name=N` is authorized for (requestinfo.go). */
export function selectorName(fieldSelector: string | null): string {
  for (const term of (fieldSelector ?? "").split(",")) {
    const m = /^\s*metadata\.name\s*==?\s*(.+?)\s*$/.exec(term);
    if (m) return m[1] ?? "";
  }
  return "";
}
