/**
 * Test-only: a custom resource checked against its CRD's structural schema, with the field
 * errors kube-apiserver gives (apiextensions-apiserver pkg/apiserver/validation/validation.go
 * kubeOpenAPIResultToFieldErrors over go-openapi's validate messages):
 * - required → `Required value`; enum → `Unsupported value: "x": supported values: …`;
 * - a wrong type → `Invalid value: V: P in body must be of type T: "actual"`;
 * - maxLength → `Too long: may not be more than N bytes`; maxItems → `Too many: …`;
 * - pattern, minLength, minimum, maximum, minItems, format date-time → `Invalid value: V: P
 *   in body should match 'RE'` / `should be at least N chars long` / `should be greater than
 *   or equal to N` / `should be less than or equal to N` / `should have at least N items` /
 *   `must be of type date-time: "V"`.
 * Only the keywords deploy/'s CRDs use.
 */
import { type FieldError, fe } from "./fake-api-field-errors.ts";
import { goTimeParseError } from "./fake-api-wire.ts";

// biome-ignore lint/suspicious/noExplicitAny: OpenAPI schema documents, read field by field
type Schema = any;

function typeName(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  if (typeof v === "boolean") return "boolean";
  return typeof v;
}

function typeOk(want: string, v: unknown): boolean {
  const t = typeName(v);
  return t === want || (want === "number" && t === "integer");
}

const at = (path: string) => (path === "" ? "<root>" : path);

/** Every field error of `value` against `s`, depth first, in the schema's property order. */
export function crdFieldErrors(s: Schema, value: unknown, path = ""): FieldError[] {
  if (s === undefined) return [];
  if (s.type !== undefined && !typeOk(s.type, value)) {
    return [
      fe(
        "Invalid value",
        at(path),
        value,
        `${at(path)} in body must be of type ${s.type}: "${typeName(value)}"`,
      ),
    ];
  }
  const out: FieldError[] = [];
  if (s.enum && !s.enum.includes(value))
    out.push(
      fe(
        "Unsupported value",
        at(path),
        value,
        `supported values: ${s.enum.map((x: unknown) => JSON.stringify(x)).join(", ")}`,
      ),
    );
  if (typeof value === "string") {
    if (s.maxLength !== undefined && value.length > s.maxLength)
      out.push(fe("Too long", at(path), undefined, `may not be more than ${s.maxLength} bytes`));
    if (s.minLength !== undefined && value.length < s.minLength)
      out.push(
        fe(
          "Invalid value",
          at(path),
          value,
          `${at(path)} in body should be at least ${s.minLength} chars long`,
        ),
      );
    if (s.pattern !== undefined && !new RegExp(s.pattern).test(value))
      out.push(fe("Invalid value", at(path), value, `${at(path)} in body should match '${s.pattern}'`));
    if (s.format === "date-time" && goTimeParseError(value, false) !== undefined)
      out.push(
        fe(
          "Invalid value",
          at(path),
          value,
          `${at(path)} in body must be of type date-time: ${JSON.stringify(value)}`,
        ),
      );
  }
  if (typeof value === "number" && s.minimum !== undefined && value < s.minimum)
    out.push(
      fe(
        "Invalid value",
        at(path),
        value,
        `${at(path)} in body should be greater than or equal to ${s.minimum}`,
      ),
    );
  if (typeof value === "number" && s.maximum !== undefined && value > s.maximum)
    out.push(
      fe(
        "Invalid value",
        at(path),
        value,
        `${at(path)} in body should be less than or equal to ${s.maximum}`,
      ),
    );
  if (Array.isArray(value)) {
    if (s.minItems !== undefined && value.length < s.minItems)
      out.push(
        fe(
          "Invalid value",
          at(path),
          value.length,
          `${at(path)} in body should have at least ${s.minItems} items`,
        ),
      );
    if (s.maxItems !== undefined && value.length > s.maxItems)
      out.push(fe("Too many", at(path), value.length, `must have at most ${s.maxItems} items`));
    for (const [i, v] of value.entries()) out.push(...crdFieldErrors(s.items, v, `${path}[${i}]`));
  }
  if (typeName(value) === "object") {
    const o = value as Record<string, unknown>;
    for (const r of s.required ?? [])
      if (!(r in o)) out.push(fe("Required value", path === "" ? r : `${path}.${r}`, undefined));
    for (const [k, v] of Object.entries(o)) {
      if (path === "" && k === "metadata") continue; // ObjectMeta is validated as such
      const child =
        s.properties?.[k] ??
        (typeof s.additionalProperties === "object" ? s.additionalProperties : undefined);
      out.push(...crdFieldErrors(child, v, path === "" ? k : `${path}.${k}`));
    }
  }
  return out;
}
