/**
 * The per-field account of a BGP import (docs/migrate.md "BGP field table"): every field of
 * every foreign BGP object ends in exactly one state, so that "nothing lost" is checkable
 * and a loss is named. Pure.
 * - `converted`: carried over with the same meaning;
 * - `default`: the foreign tool's effective default written out (passlb's default differs);
 * - `no-op`: accepted and ignored because it does nothing in the source either;
 * - `unsupported`: cannot be carried; `passlb import` exits non-zero unless --allow-lossy.
 */

export interface FieldOutcome {
  /** `BGPPeer metallb-system/tor` */
  readonly subject: string;
  /** `holdTime`, `spec.communities[name]`, … */
  readonly field: string;
  readonly state: "converted" | "default" | "no-op" | "unsupported";
  readonly detail?: string;
}

/** Helpers that append to `into` for one subject. */
export function fieldOutcomes(subject: string, into: FieldOutcome[]) {
  const add = (state: FieldOutcome["state"], field: string, detail?: string) =>
    into.push({ subject, field, state, ...(detail !== undefined && { detail }) });
  return {
    converted: (field: string, detail?: string) => add("converted", field, detail),
    defaulted: (field: string, detail: string) => add("default", field, detail),
    noop: (field: string, detail: string) => add("no-op", field, detail),
    unsupported: (field: string, detail: string) => add("unsupported", field, detail),
  };
}

/** Fields of `spec` this version does not know: unsupported by name (never dropped in silence). */
export function unknownFields(
  spec: object,
  known: readonly string[],
  f: ReturnType<typeof fieldOutcomes>,
): void {
  for (const [k, v] of Object.entries(spec))
    if (!known.includes(k) && v !== undefined) f.unsupported(k, "not a field passlb knows for this kind");
}

/** The outcomes that lose a setting. */
export const lostFields = (fields: readonly FieldOutcome[]) =>
  fields.filter((f) => f.state === "unsupported");

export function renderFieldOutcomes(fields: readonly FieldOutcome[]): string[] {
  if (fields.length === 0) return [];
  const out = ["", "BGP fields:"];
  for (const f of fields)
    out.push(`  ${f.state}: ${f.subject}: ${f.field}${f.detail ? ` — ${f.detail}` : ""}`);
  const lost = lostFields(fields);
  out.push(
    lost.length === 0
      ? "  nothing lost"
      : `  ${lost.length} setting${lost.length === 1 ? "" : "s"} cannot be carried over: ${lost.map((l) => `${l.subject} ${l.field}`).join(", ")}`,
  );
  return out;
}
