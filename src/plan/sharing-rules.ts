/**
 * When two Services may hold one address, under the rules of the tool whose key they use
 * (docs/migrate.md "Sharing, under the rules of the tool the key came from"). Pure.
 *
 *   - passlb (`passlb.io/allow-shared-ip`): same key, cluster-wide; no protocol/port pair
 *     twice (TCP/53 and UDP/53 may share). Backends need not match: passlb's data plane
 *     dispatches per VIP:port.
 *   - MetalLB: same key, cluster-wide; no protocol/port pair twice; equal backend key —
 *     both eTP Cluster, or both Local with an identical selector (internal/allocator/
 *     k8salloc/k8salloc.go `BackendKey`, allocator.go `sharingOK`; metallb#801, #271).
 *   - Cilium: same key in the same namespace, unless each Service lists the other's
 *     namespace (or `*`) in `sharing-cross-namespace`; no protocol/port pair twice (1.17+,
 *     cilium PR #34691); same eTP; under Local equal and non-empty selectors
 *     (operator/pkg/lbipam/service_store.go `isCompatible`).
 *   - PureLB: same key, different ports (its allocator is MetalLB's, without the backend key).
 *   - OpenELB: an address pinned twice is shared with no checks (pkg/controllers/ipam/
 *     ipam.go); passlb implies a key and still refuses a protocol/port pair used twice.
 *   - kube-vip: a pinned address, and pools with `implicitSharing: portDisjoint`
 *     (kube-vip-cloud-provider `allow-share`), share when the port numbers differ,
 *     whatever the protocol (pkg/provider/loadBalancer.go).
 */
import type { Origin } from "./foreign-keys.ts";
import type { PlanIssueCode } from "./issue-codes.ts";

export interface SharingRules {
  readonly origin: Origin;
  readonly scope: "cluster" | "namespace";
  /** TCP/53 and UDP/53 may share; false: the port numbers alone must differ */
  readonly protocolAware: boolean;
  /** what the Services' backends must have in common */
  readonly backends: "any" | "metallb" | "cilium";
  /** a phrase for the plan: "MetalLB's rules (cluster-wide, …)" */
  readonly summary: string;
}

export const SHARING_RULES: Readonly<Record<Origin, SharingRules>> = {
  passlb: {
    origin: "passlb",
    scope: "cluster",
    protocolAware: true,
    backends: "any",
    summary: "passlb's rules (cluster-wide, disjoint protocol/port pairs)",
  },
  metallb: {
    origin: "metallb",
    scope: "cluster",
    protocolAware: true,
    backends: "metallb",
    summary:
      "MetalLB's rules (cluster-wide, disjoint protocol/port pairs, both Cluster or both Local with identical selectors)",
  },
  cilium: {
    origin: "cilium",
    scope: "namespace",
    protocolAware: true,
    backends: "cilium",
    summary:
      "Cilium's rules (one namespace unless both allow more, disjoint protocol/port pairs, same externalTrafficPolicy, equal selectors under Local)",
  },
  purelb: {
    origin: "purelb",
    scope: "cluster",
    protocolAware: true,
    backends: "any",
    summary: "PureLB's rules (cluster-wide, disjoint protocol/port pairs)",
  },
  openelb: {
    origin: "openelb",
    scope: "cluster",
    protocolAware: true,
    backends: "any",
    summary: "OpenELB's implicit sharing of a pinned address (disjoint protocol/port pairs)",
  },
  "kube-vip": {
    origin: "kube-vip",
    scope: "cluster",
    protocolAware: false,
    backends: "any",
    summary: "kube-vip's implicit sharing of a pinned address (disjoint port numbers)",
  },
};

/** The rules of a pool's `implicitSharing: portDisjoint` (kube-vip allow-share). */
export const IMPLICIT_RULES: SharingRules = {
  ...SHARING_RULES["kube-vip"],
  summary: "the pool's implicit sharing (disjoint port numbers, IPv4)",
};

/** One Service as a (would-be) holder of an address. */
export interface Sharer {
  /** `namespace/name` */
  readonly name: string;
  readonly namespace: string;
  readonly sharing:
    | {
        readonly id: string;
        readonly key: string;
        readonly rules: SharingRules;
        readonly allowNamespaces: readonly string[];
      }
    | undefined;
  /** keyless, in a pool with implicit sharing (set per address by the ledger) */
  readonly implicit: boolean;
  /** `TCP/80` */
  readonly ports: ReadonlySet<string>;
  readonly portNumbers: ReadonlySet<number>;
  readonly etp: "Cluster" | "Local";
  /** the selector as canonical text ("" for none) */
  readonly selector: string;
}

export interface SharingRefusal {
  readonly code: PlanIssueCode;
  readonly message: string;
}

const allows = (s: Sharer, ns: string) =>
  s.sharing !== undefined &&
  (s.sharing.allowNamespaces.includes("*") || s.sharing.allowNamespaces.includes(ns));

/** Why `joiner` may not join the holders of `ip`, or undefined when it may. */
export function sharingRefusal(
  holders: readonly Sharer[],
  joiner: Sharer,
  ip: string,
): SharingRefusal | undefined {
  const first = holders[0];
  if (!first) return undefined;
  // only a refusal names them: a shared address's holders are joined once per joiner
  const names = () => holders.map((h) => h.name).join(", ");
  const key = joiner.sharing;
  if (key === undefined) {
    if (!joiner.implicit || !holders.every((h) => h.implicit))
      return { code: "address_in_use", message: `${ip} is already used by Service ${names()}` };
  } else if (!holders.every((h) => h.sharing?.id === key.id))
    return {
      code: "address_in_use",
      message: `${ip} is already used by Service ${names()} (sharing key "${first.sharing?.key ?? ""}", not "${key.key}")`,
    };
  const rules = key?.rules ?? IMPLICIT_RULES;
  for (const h of holders) {
    if (
      rules.scope === "namespace" &&
      h.namespace !== joiner.namespace &&
      !(allows(h, joiner.namespace) && allows(joiner, h.namespace))
    )
      return {
        code: "sharing_not_allowed",
        message: `${ip}: Cilium shares key "${key?.key ?? ""}" within one namespace; Service ${h.name} is in namespace ${h.namespace} (both must list each other's namespace in lbipam.cilium.io/sharing-cross-namespace)`,
      };
    if (rules.backends === "metallb" && backendKey(h) !== backendKey(joiner))
      return {
        code: "sharing_not_allowed",
        message: `${ip}: MetalLB shares an address only between Services that are both externalTrafficPolicy Cluster, or both Local with identical selectors; Service ${h.name} differs`,
      };
    if (
      rules.backends === "cilium" &&
      (h.etp !== joiner.etp || (h.etp === "Local" && (h.selector === "" || h.selector !== joiner.selector)))
    )
      return {
        code: "sharing_not_allowed",
        message: `${ip}: Cilium shares an address only between Services of the same externalTrafficPolicy (under Local with equal, non-empty selectors); Service ${h.name} differs`,
      };
  }
  const clash = rules.protocolAware
    ? [...joiner.ports].filter((p) => holders.some((h) => h.ports.has(p)))
    : [...joiner.portNumbers]
        .filter((p) => holders.some((h) => h.portNumbers.has(p)))
        .map((p) => `port ${p}`);
  if (clash.length > 0)
    return {
      code: "port_clash_on_shared_ip",
      message: `${ip} is shared with Service ${names()}, and both use ${clash.join(", ")}`,
    };
  return undefined;
}

/** MetalLB's BackendKey: the selector under Local, nothing under Cluster. */
const backendKey = (s: Sharer) => (s.etp === "Local" ? s.selector : "");
