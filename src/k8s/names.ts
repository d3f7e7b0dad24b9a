/**
 * Kubernetes name rules (k8s.io/apimachinery/pkg/util/validation): DNS-1123 labels and
 * subdomains, DNS-1035 labels (Service names), IANA service names (named ports), and
 * qualified names (label keys, loadBalancerClass). Each returns an error message, or
 * undefined when the value is valid.
 */

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const QUALIFIED_NAME_PART = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

export function dns1123Label(value: string): string | undefined {
  if (value.length > 63) return `must be no more than 63 characters (got ${value.length})`;
  if (!DNS1123_LABEL.test(value))
    return `"${value}" must be a DNS-1123 label: lower-case letters, digits and '-', starting and ending with a letter or digit`;
  return undefined;
}

export function dns1035Label(value: string): string | undefined {
  if (value.length > 63) return `must be no more than 63 characters (got ${value.length})`;
  if (!DNS1035_LABEL.test(value))
    return `"${value}" must be a DNS-1035 label: lower-case letters, digits and '-', starting with a letter and ending with a letter or digit`;
  return undefined;
}

export function dns1123Subdomain(value: string): string | undefined {
  if (value.length > 253) return `must be no more than 253 characters (got ${value.length})`;
  if (!DNS1123_SUBDOMAIN.test(value))
    return `"${value}" must be a DNS-1123 subdomain: lower-case letters, digits, '-' and '.', starting and ending with a letter or digit`;
  return undefined;
}

/** IANA_SVC_NAME: at most 15 characters, lower-case letters, digits and '-', at least one
 * letter, no leading, trailing or doubled '-' (RFC 6335). */
export function ianaServiceName(value: string): string | undefined {
  if (value.length > 15 || value.length === 0) return `"${value}" must be 1–15 characters`;
  if (!/^[-a-z0-9]+$/.test(value)) return `"${value}" may contain only lower-case letters, digits and '-'`;
  if (!/[a-z]/.test(value)) return `"${value}" must contain at least one letter`;
  if (value.startsWith("-") || value.endsWith("-") || value.includes("--"))
    return `"${value}" must not begin or end with '-' or contain '--'`;
  return undefined;
}

/** A qualified name: `[prefix/]name`, prefix a DNS subdomain, name ≤ 63 characters. */
export function qualifiedName(value: string, requirePrefix = false): string | undefined {
  const parts = value.split("/");
  if (parts.length > 2) return `"${value}" must be a qualified name: [prefix/]name`;
  const name = parts.length === 2 ? (parts[1] ?? "") : (parts[0] ?? "");
  const prefix = parts.length === 2 ? parts[0] : undefined;
  if (requirePrefix && prefix === undefined)
    return `"${value}" must be a domain-prefixed path (e.g. "example.com/name")`;
  if (prefix !== undefined && dns1123Subdomain(prefix) !== undefined)
    return `"${value}" has an invalid prefix: it must be a DNS-1123 subdomain`;
  if (name.length === 0 || name.length > 63 || !QUALIFIED_NAME_PART.test(name))
    return `"${value}" must be a qualified name: up to 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit`;
  return undefined;
}
