/**
 * The ingress-gce / cloud-provider-gcp controller flags that change an L4 plan, and the
 * value GKE most likely runs with at a given version. The code only gives the mechanism;
 * every default below is what the GKE documentation implies for that version
 * (docs/providers-gke.md). `--gke-flag NAME=VALUE` overrides one.
 * Deliberately not modelled: flags that only change timing or resource cleanup.
 */
import { atLeast, type GkeVersion } from "./gke-version.ts";

interface FlagDef {
  readonly doc: string;
  readonly byVersion: (v: GkeVersion) => boolean;
}

const since = (gate: string) => (v: GkeVersion) => atLeast(v, gate);
const always = () => true;
const never = () => false;

export const GKE_FLAGS = {
  "gke-service-lb-controller": {
    doc: "the CCM runs its forked service controller, which claims the two -legacy classes (cloud-provider-gcp: in the code from release-1.34, off by default there; GKE doc: the external-legacy class from 1.37)",
    byVersion: since("1.37"),
  },
  "enable-l4-netlb-rbs-by-default": {
    doc: "new external Services get a backend-service NetLB (GKE doc: default from 1.37)",
    byVersion: since("1.37"),
  },
  "enable-l4-netlb-neg": {
    doc: "RBS NetLB may use GCE_VM_IP NEGs (GKE doc: l4-rbs gives NEGs from 1.32.2-gke.1652000)",
    byVersion: since("1.32.2-gke.1652000"),
  },
  "enable-l4-netlb-neg-default": {
    doc: "new RBS NetLBs use NEGs rather than instance groups (same gate)",
    byVersion: since("1.32.2-gke.1652000"),
  },
  "enable-weighted-l4-netlb": {
    doc: "pods-per-node weighted NetLB (GKE doc: 1.31.0-gke.1506000+)",
    byVersion: since("1.31.0-gke.1506000"),
  },
  "enable-weighted-l4-ilb": {
    doc: "weighted ILB (needs project allowlisting; no GKE doc version, off)",
    byVersion: never,
  },
  "enable-l4ilb-zonal-affinity": {
    doc: "ILB zonal affinity from trafficDistribution (GKE doc: 1.33.3-gke.1392000+)",
    byVersion: since("1.33.3-gke.1392000"),
  },
  "enable-l4netlb-mixed-protocol": {
    doc: "TCP+UDP external Services (GKE doc: 1.34.1-gke.2190000+)",
    byVersion: since("1.34.1-gke.2190000"),
  },
  "enable-l3-default-forwarding-rule-for-netlb-mixed-protocol": {
    doc: "mixed NetLB uses one L3_DEFAULT rule (GKE doc: mixed-protocol GA 1.36.2-gke.1498000)",
    byVersion: since("1.36.2-gke.1498000"),
  },
  "enable-l4ilb-mixed-protocol": {
    doc: "TCP+UDP internal Services (GKE doc: mixed-protocol GA 1.36.2-gke.1498000)",
    byVersion: since("1.36.2-gke.1498000"),
  },
  "enable-l4-deny-firewall": {
    doc: "allow at 999 plus deny at 1000 (GKE doc: mixed-protocol GA 1.36.2-gke.1498000)",
    byVersion: since("1.36.2-gke.1498000"),
  },
  "enable-discrete-port-forwarding": {
    doc: "single-protocol NetLB lists up to 5 ports instead of a range (OSS default off)",
    byVersion: never,
  },
  "enable-pinhole": {
    doc: "node firewalls name the LB IP as destination (OSS default on)",
    byVersion: always,
  },
  "enable-l4ilb-dual-stack": { doc: "IPv6 ILB forwarding rules (OSS default on)", byVersion: always },
  "enable-l4netlb-dual-stack": { doc: "IPv6 NetLB forwarding rules (OSS default on)", byVersion: always },
  "disable-l4-lb-fw": { doc: "skip node firewalls (firewall-policy users; default off)", byVersion: never },
  "enable-l4lb-strong-sa": { doc: "strong session affinity for NetLB (allowlisted; off)", byVersion: never },
  "enable-l4-neg-local-include-drain-nodes": {
    doc: "eTP Local NEGs keep drain-labelled nodes that host pods (added 2026-06; off)",
    byVersion: never,
  },
} as const satisfies Record<string, FlagDef>;

export type GkeFlagName = keyof typeof GKE_FLAGS;
export type GkeFlags = Readonly<Record<GkeFlagName, boolean>>;

export function isGkeFlagName(name: string): name is GkeFlagName {
  return Object.hasOwn(GKE_FLAGS, name);
}

/** The flag values for a version, with overrides applied. */
export function gkeFlags(
  version: GkeVersion,
  overrides: Partial<Record<GkeFlagName, boolean>> = {},
): GkeFlags {
  const out = {} as Record<GkeFlagName, boolean>;
  for (const name of Object.keys(GKE_FLAGS) as GkeFlagName[])
    out[name] = overrides[name] ?? GKE_FLAGS[name].byVersion(version);
  return out;
}

/** Go's strconv.ParseBool, as the controllers parse boolean flags. */
export function parseFlagBool(value: string): boolean | undefined {
  if (["1", "t", "T", "TRUE", "true", "True"].includes(value)) return true;
  if (["0", "f", "F", "FALSE", "false", "False"].includes(value)) return false;
  return undefined;
}
