/**
 * Test-only: IP address checks of the fake Kubernetes API server's validation, as
 * apimachinery and kubernetes word them: apimachinery pkg/util/validation/ip.go IsValidIP
 * (netip-strict: no leading zeros, no IPv4-mapped IPv6, canonical form) and kubernetes
 * pkg/apis/core/validation/validation.go ValidateNonSpecialIP (unspecified, loopback,
 * link-local, link-local multicast). Canonical IPv6 text is RFC 5952's, which Go's
 * netip.Addr.String and the WHATWG URL host serializer both write.
 */
import { type FieldError, fe } from "./fake-api-field-errors.ts";

/** netip-style parse: the canonical text of an IP, or undefined; `leadingZero` for 010.0.0.1 */
export function parseIp(
  v: string,
): { family: 4 | 6; canonical: string; leadingZero: boolean; mapped: boolean } | undefined {
  const v4 = /^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$/.exec(v);
  if (v4) {
    const parts = v4.slice(1).map((p) => p ?? "");
    if (parts.some((p) => Number(p) > 255)) return undefined;
    return {
      family: 4,
      canonical: parts.map(Number).join("."),
      leadingZero: parts.some((p) => p.length > 1 && p.startsWith("0")),
      mapped: false,
    };
  }
  if (!v.includes(":")) return undefined;
  try {
    const host = new URL(`http://[${v}]/`).hostname.slice(1, -1);
    return { family: 6, canonical: host, leadingZero: false, mapped: /^::ffff:/i.test(host) };
  } catch {
    return undefined;
  }
}

export function ipErrors(field: string, v: string): FieldError[] {
  const ip = parseIp(v);
  if (!ip)
    return [fe("Invalid value", field, v, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)")];
  if (ip.leadingZero) return [fe("Invalid value", field, v, "must not have leading 0s")];
  if (ip.mapped) return [fe("Invalid value", field, v, "must not be an IPv4-mapped IPv6 address")];
  if (ip.canonical !== v)
    return [fe("Invalid value", field, v, `must be in canonical form (${JSON.stringify(ip.canonical)})`)];
  return [];
}

function v4Number(c: string): number {
  return c.split(".").reduce((a, p) => a * 256 + Number(p), 0);
}

/** ValidateNonSpecialIP (pkg/apis/core/validation/validation.go) */
export function nonSpecialIpErrors(field: string, v: string): FieldError[] {
  const ip = parseIp(v);
  if (!ip) return [];
  const c = ip.canonical;
  const n = ip.family === 4 ? v4Number(c) : 0;
  const first = ip.family === 6 ? Number.parseInt(c.split(":")[0] || "0", 16) : 0;
  const out: FieldError[] = [];
  if ((ip.family === 4 && n === 0) || c === "::")
    out.push(fe("Invalid value", field, v, `may not be unspecified (${v})`));
  if ((ip.family === 4 && c.startsWith("127.")) || c === "::1")
    out.push(fe("Invalid value", field, v, "may not be in the loopback range (127.0.0.0/8, ::1/128)"));
  if ((ip.family === 4 && c.startsWith("169.254.")) || (ip.family === 6 && (first & 0xffc0) === 0xfe80))
    out.push(fe("Invalid value", field, v, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"));
  if ((ip.family === 4 && c.startsWith("224.0.0.")) || (ip.family === 6 && (first & 0xff0f) === 0xff02))
    out.push(
      fe("Invalid value", field, v, "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)"),
    );
  return out;
}
