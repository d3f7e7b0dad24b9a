/**
 * Test-only: the wire types of the fake Kubernetes API server — how kube-apiserver decodes
 * the JSON body of a create, update or patch into its Go types before anything else runs,
 * and the 400 it answers when a field does not decode (apiserver
 * pkg/endpoints/handlers/rest.go transformDecodeError: `KIND in version "V" cannot be handled
 * as a KIND: <decode error>`).
 *
 * - MicroTime (apimachinery pkg/apis/meta/v1/micro_time.go UnmarshalJSON): time.Parse with
 *   RFC3339Micro "2006-01-02T15:04:05.000000Z07:00" — exactly six fractional digits, so
 *   JavaScript's millisecond toISOString() (`.611Z`) is refused with Go's own message
 *   `parsing time "…611Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".611Z" as ".000000"`.
 * - Time (pkg/apis/meta/v1/time.go UnmarshalJSON): time.Parse with time.RFC3339; Go accepts
 *   any fractional seconds there even though the layout has none (Go time.Parse docs).
 * - int32/int64 and bool fields (encoding/json as used by sigs.k8s.io/json): a string or a
 *   fraction is `json: cannot unmarshal string into Go struct field T.path of type int32`.
 * - IntOrString (apimachinery pkg/util/intstr/intstr.go UnmarshalJSON): a JSON string, or a
 *   number that decodes as int32.
 * - `null` decodes to the zero value for all of these, as in Go.
 * - What is stored is what Go writes back (time.go / micro_time.go MarshalJSON): a Time
 *   keeps whole seconds (`.611Z` comes back as `Z`), a MicroTime six digits, both in UTC.
 *
 * Only the fields passlb writes are typed here (Lease, core/v1 Event, Service, EndpointSlice,
 * ObjectMeta); other fields pass through. Deliberately not: resource.Quantity (passlb writes
 * none; it only reads Node capacity, which it does not decode), unknown-field handling of
 * built-in types (the real server drops those with a warning; passlb's writes are typed by
 * client-node, so none are sent), and range checks Go's parser makes (month 13).
 */
import { ApiStatusError } from "./fake-api-store.ts";

export type WireType = "microtime" | "time" | "int32" | "int64" | "bool" | "int-or-string";

/** field paths ("spec.ports[].targetPort") to their Go type, per resource key */
const META: Record<string, WireType> = {
  "metadata.creationTimestamp": "time",
  "metadata.deletionTimestamp": "time",
  "metadata.generation": "int64",
  "metadata.deletionGracePeriodSeconds": "int64",
};

export const WIRE_TYPES: Record<string, Record<string, WireType>> = {
  // k8s.io/api coordination/v1 types.go LeaseSpec
  "coordination.k8s.io/leases": {
    "spec.acquireTime": "microtime",
    "spec.renewTime": "microtime",
    "spec.leaseDurationSeconds": "int32",
    "spec.leaseTransitions": "int32",
  },
  // k8s.io/api core/v1 types.go Event
  events: {
    firstTimestamp: "time",
    lastTimestamp: "time",
    eventTime: "microtime",
    count: "int32",
    "series.count": "int32",
    "series.lastObservedTime": "microtime",
  },
  // core/v1 ServiceSpec / ServiceStatus (metav1.Condition in status.conditions)
  services: {
    "spec.ports[].port": "int32",
    "spec.ports[].nodePort": "int32",
    "spec.ports[].targetPort": "int-or-string",
    "spec.healthCheckNodePort": "int32",
    "status.conditions[].lastTransitionTime": "time",
    "status.conditions[].observedGeneration": "int64",
    "status.loadBalancer.ingress[].ports[].port": "int32",
  },
  // discovery/v1 types.go EndpointSlice
  "discovery.k8s.io/endpointslices": {
    "ports[].port": "int32",
    "endpoints[].conditions.ready": "bool",
    "endpoints[].conditions.serving": "bool",
    "endpoints[].conditions.terminating": "bool",
  },
};

const RFC3339 = "2006-01-02T15:04:05Z07:00";
const RFC3339_MICRO = "2006-01-02T15:04:05.000000Z07:00";

/** Go's time.Parse error for `value` against RFC3339 or RFC3339Micro, or undefined when it parses. */
export function goTimeParseError(value: string, micro: boolean): string | undefined {
  const layout = micro ? RFC3339_MICRO : RFC3339;
  const fail = (rest: string, elem: string) =>
    `parsing time ${JSON.stringify(value)} as ${JSON.stringify(layout)}: cannot parse ${JSON.stringify(rest)} as ${JSON.stringify(elem)}`;
  const steps: [RegExp, string][] = [
    [/^\d{4}/, "2006"],
    [/^-/, "-"],
    [/^\d{2}/, "01"],
    [/^-/, "-"],
    [/^\d{2}/, "02"],
    [/^T/, "T"],
    [/^\d{2}/, "15"],
    [/^:/, ":"],
    [/^\d{2}/, "04"],
    [/^:/, ":"],
    [/^\d{2}/, "05"],
  ];
  let rest = value;
  for (const [re, elem] of steps) {
    const m = re.exec(rest);
    if (!m) return fail(rest, elem);
    rest = rest.slice(m[0].length);
  }
  if (micro) {
    // stdFracSecond0 with six digits: exactly ".dddddd"
    if (!/^\.\d{6}(?!\d)/.test(rest)) return fail(rest, ".000000");
    rest = rest.slice(7);
  } else {
    // a fractional second after the seconds is accepted even when the layout has none
    const frac = /^[.,]\d+/.exec(rest);
    if (frac) rest = rest.slice(frac[0].length);
  }
  if (!/^(Z|[+-]\d{2}:\d{2})$/.test(rest)) return fail(rest, "Z07:00");
  return undefined;
}

function jsonKind(v: unknown): string {
  if (v === null) return "null";
  if (Array.isArray(v)) return "array";
  if (typeof v === "number") return `number ${v}`;
  return typeof v === "object" ? "object" : typeof v;
}

/** The decode error of one value, or undefined. `goField` is Go's "Type.path" for messages. */
function decodeError(type: WireType, v: unknown, goField: string): string | undefined {
  if (v === null) return undefined;
  const into = (t: string) =>
    `json: cannot unmarshal ${jsonKind(v)} into Go struct field ${goField} of type ${t}`;
  switch (type) {
    case "microtime":
    case "time":
      if (typeof v !== "string") return into("string");
      return goTimeParseError(v, type === "microtime");
    case "int32":
    case "int64": {
      if (typeof v !== "number" || !Number.isInteger(v)) return into(type);
      const max = type === "int32" ? 2 ** 31 : 2 ** 63;
      return v >= max || v < -max ? into(type) : undefined;
    }
    case "bool":
      return typeof v === "boolean" ? undefined : into("bool");
    case "int-or-string":
      if (typeof v === "string") return undefined;
      if (typeof v === "number" && Number.isInteger(v) && Math.abs(v) < 2 ** 31) return undefined;
      return `json: cannot unmarshal ${jsonKind(v)} into Go value of type int32`;
  }
}

/** Go's Time / MicroTime MarshalJSON: UTC, RFC3339 with no fraction, or exactly six digits. */
export function goTimeText(value: string, micro: boolean): string {
  const m = /\.(\d+)/.exec(value);
  const iso = new Date(value).toISOString(); // milliseconds, UTC
  if (!micro) return iso.replace(/\.\d+Z$/, "Z");
  const digits = `${m?.[1] ?? ""}000000`.slice(0, 6);
  return iso.replace(/\.\d+Z$/, `.${digits}Z`);
}

type Visitor = (v: unknown, set: (x: unknown) => void) => string | undefined;

function visit(node: unknown, segments: readonly string[], at: Visitor): string | undefined {
  if (typeof node !== "object" || node === null) return undefined;
  const [head = "", ...tail] = segments;
  const list = head.endsWith("[]");
  const o = node as Record<string, unknown>;
  const key = list ? head.slice(0, -2) : head;
  const child = o[key];
  if (child === undefined) return undefined;
  if (!list) {
    if (tail.length === 0) return at(child, (x) => (o[key] = x));
    return visit(child, tail, at);
  }
  if (!Array.isArray(child)) return undefined;
  for (const [i, item] of child.entries()) {
    const e = tail.length === 0 ? at(item, (x) => (child[i] = x)) : visit(item, tail, at);
    if (e) return e;
  }
  return undefined;
}

/**
 * Decodes `body` in place as kube-apiserver does: throws the 400 it answers when a typed
 * field does not decode into `kind`'s Go type, and stores times as Go writes them back
 * (Time to the second, MicroTime to the microsecond, both UTC) — so a client comparing
 * what it wrote with what it reads sees what a real server gives back.
 */
export function decodeWire(key: string, kind: string, version: string, body: unknown): void {
  const table = { ...META, ...(WIRE_TYPES[key] ?? {}) };
  for (const [path, type] of Object.entries(table)) {
    const goField = `${kind}.${path.replace(/\[\]/g, "")}`;
    const err = visit(body, path.split("."), (v, set) => {
      const e = decodeError(type, v, goField);
      if (!e && typeof v === "string" && (type === "time" || type === "microtime"))
        set(goTimeText(v, type === "microtime"));
      return e;
    });
    if (err) {
      throw new ApiStatusError(
        400,
        "BadRequest",
        `${kind} in version ${JSON.stringify(version)} cannot be handled as a ${kind}: ${err}`,
      );
    }
  }
}
