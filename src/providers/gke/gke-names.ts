/**
 * Google Cloud resource names exactly as GKE's controllers derive them (docs/providers-gke.md):
 * - legacy `a<uid>`: "a" + Service UID without dashes, cut to 32 characters
 *   (k8s.io/cloud-provider DefaultLoadBalancerName);
 * - L4 v2 names `k8s2-<uid8>-<ns>-<name>-<hash8>` and `k8s2-<proto>-…` for forwarding rules
 *   (ingress-gce pkg/utils/namer/l4_namer.go), with the namespace and name trimmed in
 *   proportion to their lengths, and suffixes that never push a name past 63 characters;
 * - ContentHash: SHA-256 of the text, each of the first n bytes mod 36 picks from 0-9a-z.
 * Does not validate names against GCE's regex; Service names already satisfy it.
 */
import { createHash } from "node:crypto";

const ALPHABET = "0123456789abcdefghijklmnopqrstuvwxyz";
const MAX_NAME = 63;
const COMBINED = 39;

export function contentHash(text: string, length: number): string {
  const digest = createHash("sha256").update(text, "utf8").digest();
  let out = "";
  for (let i = 0; i < length && i < digest.length; i++) out += ALPHABET[digest[i]! % ALPHABET.length];
  return out;
}

/** Cuts fields so their total length fits `max`, each losing a share proportional to its length. */
export function trimFieldsEvenly(max: number, ...fields: string[]): string[] {
  const total = fields.reduce((n, f) => n + f.length, 0);
  if (max <= 0 || total <= max) return fields;
  const excess = total - max;
  const lengths = fields.map((f) => f.length - Math.floor((f.length * excess) / total) - 1);
  let spare = max - lengths.reduce((n, l) => n + l, 0);
  for (let i = 0; spare > 0 && i < lengths.length; i++, spare--) lengths[i] = lengths[i]! + 1;
  return fields.map((f, i) => f.slice(0, lengths[i]));
}

/** `name` shortened so that `name + suffix` is at most 63 characters. */
export function withSuffix(name: string, suffix: string): string {
  return name.slice(0, MAX_NAME - suffix.length) + suffix;
}

export function legacyName(serviceUid: string): string {
  return `a${serviceUid.replaceAll("-", "")}`.slice(0, 32);
}

export interface L4Names {
  readonly uid8: string;
  readonly backend: string;
  forwardingRule(protocol: "tcp" | "udp" | "l3"): string;
  readonly sharedHealthCheck: string;
  readonly sharedHealthCheckFirewall: string;
  readonly localHealthCheckFirewall: string;
}

/** The ingress-gce L4 names of one Service; `kubeSystemUid` is the cluster's kube-system Namespace UID. */
export function l4Names(kubeSystemUid: string, namespace: string, name: string): L4Names {
  const uid8 = contentHash(kubeSystemUid, 8);
  const hash8 = contentHash([uid8, namespace, name].join(";"), 8);
  const nsName = (max: number) => trimFieldsEvenly(max, namespace, name).join("-");
  const backend = ["k8s2", uid8, nsName(COMBINED), hash8].join("-");
  return {
    uid8,
    backend,
    forwardingRule: (protocol) =>
      ["k8s2", protocol, uid8, nsName(COMBINED - protocol.length - 1), hash8].join("-"),
    sharedHealthCheck: `k8s2-${uid8}-l4-shared-hc`,
    sharedHealthCheckFirewall: `k8s2-${uid8}-l4-shared-hc-fw`,
    localHealthCheckFirewall: withSuffix(backend, "-fw"),
  };
}
