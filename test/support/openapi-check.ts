/**
 * A small checker for the part of OpenAPI v3 that our CRD's structural schema uses (type,
 * required, properties, additionalProperties, items, minItems, enum, pattern, minLength,
 * maxLength, minimum, maximum), so tests can hold example objects against deploy/'s CRD without an
 * API server. Stricter than the API server in one way: a field the schema does not name is
 * a problem here (the API server would prune it silently, which hides typos).
 */

type Schema = {
  type?: string;
  required?: string[];
  properties?: Record<string, Schema>;
  additionalProperties?: Schema;
  items?: Schema;
  minItems?: number;
  enum?: unknown[];
  pattern?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
};

function typeOf(v: unknown): string {
  if (Array.isArray(v)) return "array";
  if (v === null) return "null";
  if (typeof v === "number") return Number.isInteger(v) ? "integer" : "number";
  return typeof v;
}

/** Problems as `path: message`; empty when the value passes. */
export function validateAgainst(schema: unknown, value: unknown, path = ""): string[] {
  const s = schema as Schema;
  const at = path === "" ? "<root>" : path;
  const out: string[] = [];
  if (s.type !== undefined) {
    const t = typeOf(value);
    const ok = t === s.type || (s.type === "number" && t === "integer");
    if (!ok) return [`${at}: expected ${s.type}, got ${t}`];
  }
  if (s.enum && !s.enum.includes(value)) out.push(`${at}: not one of ${JSON.stringify(s.enum)}`);
  if (typeof value === "string") {
    if (s.minLength !== undefined && value.length < s.minLength)
      out.push(`${at}: shorter than ${s.minLength}`);
    if (s.maxLength !== undefined && value.length > s.maxLength)
      out.push(`${at}: longer than ${s.maxLength}`);
    if (s.pattern !== undefined && !new RegExp(s.pattern).test(value))
      out.push(`${at}: does not match ${s.pattern}`);
  }
  if (typeof value === "number" && s.minimum !== undefined && value < s.minimum)
    out.push(`${at}: below ${s.minimum}`);
  if (typeof value === "number" && s.maximum !== undefined && value > s.maximum)
    out.push(`${at}: above ${s.maximum}`);
  if (Array.isArray(value)) {
    if (s.minItems !== undefined && value.length < s.minItems)
      out.push(`${at}: fewer than ${s.minItems} items`);
    if (s.items)
      for (const [i, v] of value.entries()) out.push(...validateAgainst(s.items, v, `${path}[${i}]`));
  }
  if (typeOf(value) === "object") {
    const obj = value as Record<string, unknown>;
    for (const r of s.required ?? []) if (!(r in obj)) out.push(`${at}: ${r} is required`);
    for (const [k, v] of Object.entries(obj)) {
      const child = s.properties?.[k] ?? s.additionalProperties;
      const p = path === "" ? k : `${path}.${k}`;
      if (child) out.push(...validateAgainst(child, v, p));
      else if (s.properties) out.push(`${p}: not in the schema`);
    }
  }
  return out;
}
