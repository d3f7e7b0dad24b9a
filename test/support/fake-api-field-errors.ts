/**
 * Test-only: field errors of the fake Kubernetes API server as apimachinery words them
 * (pkg/util/validation/field/errors.go ErrorBody; pkg/api/errors/errors.go NewInvalid), and
 * the name checks they come from (pkg/util/validation/validation.go IsDNS1123Label,
 * IsDNS1123Subdomain, IsDNS1035Label; pkg/api/validate/content/kube.go IsLabelKey
 * (= IsQualifiedName), IsLabelValue; pkg/api/validation/generic.go NameIsDNSSubdomain with
 * maskTrailingDash for a generateName prefix; pkg/api/validation/path/name.go
 * ValidatePathSegmentName).
 */
import { ApiStatusError } from "./fake-api-store.ts";

export type FieldErrorType =
  | "Required value"
  | "Invalid value"
  | "Forbidden"
  | "Too many"
  | "Duplicate value"
  | "Unsupported value"
  | "Too long";

export interface FieldError {
  readonly type: FieldErrorType;
  readonly field: string;
  readonly bad?: unknown;
  readonly detail?: string;
}

export const fe = (type: FieldErrorType, field: string, bad: unknown, detail?: string): FieldError => ({
  type,
  field,
  bad,
  ...(detail === undefined ? {} : { detail }),
});

/** ErrorBody: Required/Forbidden/Too long carry no value; the others print it (strings quoted). */
export function errorBody(e: FieldError): string {
  let s: string = e.type;
  if (e.type !== "Required value" && e.type !== "Forbidden" && e.type !== "Too long") {
    s =
      typeof e.bad === "string"
        ? `${e.type}: ${JSON.stringify(e.bad)}`
        : `${e.type}: ${JSON.stringify(e.bad)}`;
  }
  return e.detail ? `${s}: ${e.detail}` : s;
}

/** NewInvalid: 422 `Kind.group "name" is invalid: field: body` (several: `[a, b]`). */
export function invalid(
  kind: string,
  group: string,
  name: string,
  errs: readonly FieldError[],
): ApiStatusError {
  const qualified = group === "" ? kind : `${kind}.${group}`;
  const parts = errs.map((e) => `${e.field}: ${errorBody(e)}`);
  const agg = parts.length === 1 ? parts[0] : `[${parts.join(", ")}]`;
  return new ApiStatusError(422, "Invalid", `${qualified} ${JSON.stringify(name)} is invalid: ${agg}`, {
    name,
    group,
    kind,
    causes: errs.map((e) => ({
      reason: `Field${e.type.replace(/ value$/, "Value")}`,
      message: errorBody(e),
      field: e.field,
    })),
  });
}

const maxLen = (n: number) => `must be no more than ${n} characters`;
export function regexError(msg: string, fmt: string, ...examples: string[]): string {
  if (examples.length === 0) return `${msg} (regex used for validation is '${fmt}')`;
  return `${msg} (e.g. ${examples.map((x) => `'${x}', `).join("or ")}regex used for validation is '${fmt}')`;
}

const LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?";
const SUBDOMAIN_FMT = `${LABEL_FMT}(\\.${LABEL_FMT})*`;
const DNS1035_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?";
const label = new RegExp(`^${LABEL_FMT}$`);
const subdomain = new RegExp(`^${SUBDOMAIN_FMT}$`);
const dns1035 = new RegExp(`^${DNS1035_FMT}$`);

export function isDns1123Label(v: string): string[] {
  const out: string[] = [];
  if (v.length > 63) out.push(maxLen(63));
  if (!label.test(v)) {
    if (subdomain.test(v)) out.push("must not contain dots");
    else
      out.push(
        regexError(
          "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
          LABEL_FMT,
          "my-name",
          "123-abc",
        ),
      );
  }
  return out;
}

export function isDns1123Subdomain(v: string): string[] {
  const out: string[] = [];
  if (v.length > 253) out.push(maxLen(253));
  if (!subdomain.test(v))
    out.push(
      regexError(
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        SUBDOMAIN_FMT,
        "example.com",
      ),
    );
  return out;
}

export function isDns1035Label(v: string): string[] {
  const out: string[] = [];
  if (v.length > 63) out.push(maxLen(63));
  if (!dns1035.test(v))
    out.push(
      regexError(
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
        DNS1035_FMT,
        "my-name",
        "abc-123",
      ),
    );
  return out;
}

const KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]";
const KEY_MSG =
  "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

export function isQualifiedName(v: string): string[] {
  const parts = v.split("/");
  const out: string[] = [];
  let name = parts[0] ?? "";
  if (parts.length === 2) {
    const prefix = parts[0] ?? "";
    name = parts[1] ?? "";
    if (prefix === "") out.push("prefix part must be non-empty");
    else out.push(...isDns1123Subdomain(prefix).map((m) => `prefix part ${m}`));
  } else if (parts.length > 2) {
    return [
      `a valid label key ${regexError(KEY_MSG, KEY_FMT, "MyName", "my.name", "123-abc")} with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')`,
    ];
  }
  if (name === "") out.push("name part must be non-empty");
  else if (name.length > 63) out.push(`name part ${maxLen(63)}`);
  if (!new RegExp(`^${KEY_FMT}$`).test(name))
    out.push(`name part ${regexError(KEY_MSG, KEY_FMT, "MyName", "my.name", "123-abc")}`);
  return out;
}

export function isLabelValue(v: string): string[] {
  const out: string[] = [];
  if (v.length > 63) out.push(maxLen(63));
  if (!new RegExp(`^(${KEY_FMT})?$`).test(v))
    out.push(
      regexError(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character",
        `(${KEY_FMT})?`,
        "MyValue",
        "my_value",
        "12345",
      ),
    );
  return out;
}

export type NameCheck = (name: string) => string[];

/** NameIsDNSSubdomain & co. for a generateName prefix: the trailing '-' is masked first. */
export function asPrefix(check: NameCheck): NameCheck {
  return (v) => check(v.endsWith("-") ? `${v.slice(0, -1)}a` : v);
}

/** path.ValidatePathSegmentName: what every name must be, whatever its type's rule. */
export function pathSegmentErrors(v: string): string[] {
  if (v === "." || v === "..") return [`may not be '${v}'`];
  for (const bad of ["/", "%"]) if (v.includes(bad)) return [`may not contain '${bad}'`];
  return [];
}
