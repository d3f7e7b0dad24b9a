/**
 * The Service annotations passlb reads, its own and those of MetalLB, Cilium LB-IPAM,
 * kube-vip, PureLB and OpenELB, each with what it means to passlb (docs/migrate.md "What passlb reads on a
 * Service"). Data only; address-request.ts reads a Service with it.
 *
 * Sources, per tool: MetalLB `internal/k8s/controllers/service_controller.go`,
 * `controller/service.go`, `controller/main.go` (deprecated prefix); Cilium
 * `pkg/annotation/k8s.go`, `operator/pkg/lbipam/lbipam.go`; kube-vip
 * `pkg/kubevip/annotations.go`; PureLB `internal/allocator/allocator.go`,
 * `internal/local/announcer_local.go`; OpenELB `pkg/constant/constants.go`,
 * `pkg/controllers/ipam/ipam.go`.
 */

export type Origin = "passlb" | "metallb" | "cilium" | "kube-vip" | "purelb" | "openelb";

export const ORIGIN_NAMES: Readonly<Record<Origin, string>> = {
  passlb: "passlb",
  metallb: "MetalLB",
  cilium: "Cilium LB-IPAM",
  "kube-vip": "kube-vip",
  purelb: "PureLB",
  openelb: "OpenELB",
};

export type KeyRole =
  /** requested addresses, comma separated */
  | "ips"
  /** the pool to allocate from */
  | "pool"
  /** a sharing key */
  | "sharing"
  /** Cilium: the namespaces allowed to share (list or `*`) */
  | "cross-namespace"
  /** the tool's opt-in marker: an ordinary request */
  | "marker"
  /** OpenELB: the announcement protocol; layer2 is honoured */
  | "protocol"
  /** written by the tool, not a request: ignored */
  | "output"
  /** read, but changes nothing in passlb (said so in the plan) */
  | "no-effect"
  /** not supported: a warning */
  | "unsupported";

export interface ForeignKey {
  readonly origin: Origin;
  readonly role: KeyRole;
  /** the key it is an older name of (read after it, as the tool does) */
  readonly aliasOf?: string;
  /** MetalLB's Warning event `deprecatedAnnotation` (controller/main.go) */
  readonly deprecated?: boolean;
  /** for `no-effect` and `unsupported`: why, in a phrase */
  readonly note?: string;
}

const k = (origin: Origin, role: KeyRole, extra: Partial<ForeignKey> = {}): ForeignKey => ({
  origin,
  role,
  ...extra,
});

export const PASSLB_IPS = "passlb.io/load-balancer-ips";
export const PASSLB_POOL = "passlb.io/address-pool";
export const PASSLB_SHARING = "passlb.io/allow-shared-ip";

/** Every key passlb recognises, by its full name. */
export const KNOWN_KEYS: ReadonlyMap<string, ForeignKey> = new Map<string, ForeignKey>([
  [PASSLB_IPS, k("passlb", "ips")],
  [PASSLB_POOL, k("passlb", "pool")],
  [PASSLB_SHARING, k("passlb", "sharing")],
  ["passlb.io/ip-allocated-from-pool", k("passlb", "output")],
  // MetalLB, current prefix (v0.14.9+) and the deprecated one, still read
  ["metallb.io/loadBalancerIPs", k("metallb", "ips")],
  ["metallb.io/address-pool", k("metallb", "pool")],
  ["metallb.io/allow-shared-ip", k("metallb", "sharing")],
  ["metallb.io/ip-allocated-from-pool", k("metallb", "output")],
  [
    "metallb.universe.tf/loadBalancerIPs",
    k("metallb", "ips", { aliasOf: "metallb.io/loadBalancerIPs", deprecated: true }),
  ],
  [
    "metallb.universe.tf/address-pool",
    k("metallb", "pool", { aliasOf: "metallb.io/address-pool", deprecated: true }),
  ],
  [
    "metallb.universe.tf/allow-shared-ip",
    k("metallb", "sharing", { aliasOf: "metallb.io/allow-shared-ip", deprecated: true }),
  ],
  [
    "metallb.universe.tf/ip-allocated-from-pool",
    k("metallb", "output", { aliasOf: "metallb.io/ip-allocated-from-pool" }),
  ],
  // Cilium: lbipam.cilium.io/* from 1.16, io.cilium/lb-ipam-* before (cilium#30692)
  ["lbipam.cilium.io/ips", k("cilium", "ips")],
  ["lbipam.cilium.io/sharing-key", k("cilium", "sharing")],
  ["lbipam.cilium.io/sharing-cross-namespace", k("cilium", "cross-namespace")],
  ["io.cilium/lb-ipam-ips", k("cilium", "ips", { aliasOf: "lbipam.cilium.io/ips" })],
  ["io.cilium/lb-ipam-sharing-key", k("cilium", "sharing", { aliasOf: "lbipam.cilium.io/sharing-key" })],
  [
    "io.cilium/lb-ipam-sharing-cross-namespace",
    k("cilium", "cross-namespace", { aliasOf: "lbipam.cilium.io/sharing-cross-namespace" }),
  ],
  // kube-vip (pkg/kubevip/annotations.go); other kube-vip.io/* keys: unsupported (below)
  ["kube-vip.io/loadbalancerIPs", k("kube-vip", "ips")],
  ["kube-vip.io/vipHost", k("kube-vip", "output")],
  ["kube-vip.io/hwaddr", k("kube-vip", "output")],
  ["kube-vip.io/ignore", k("kube-vip", "no-effect", { note: "it tells kube-vip to skip the Service" })],
  // PureLB
  ["purelb.io/addresses", k("purelb", "ips")],
  ["purelb.io/service-group", k("purelb", "pool")],
  ["purelb.io/allow-shared-ip", k("purelb", "sharing")],
  [
    "purelb.io/allow-local",
    k("purelb", "no-effect", {
      note: "passlb never rewrites externalTrafficPolicy Local to Cluster, so there is nothing to allow",
    }),
  ],
  [
    "purelb.io/re-evaluate",
    k("purelb", "no-effect", { note: "passlb re-evaluates every Service on every pass" }),
  ],
  ["purelb.io/multi-pool", k("purelb", "unsupported", { note: "one address per family per Service" })],
  ["purelb.io/node-affinity", k("purelb", "unsupported", { note: "passlb spreads over every LB host" })],
  // OpenELB (pkg/constant/constants.go)
  ["lb.kubesphere.io/v1alpha1", k("openelb", "marker")],
  ["eip.openelb.kubesphere.io/v1alpha1", k("openelb", "ips")],
  ["eip.openelb.kubesphere.io/v1alpha2", k("openelb", "pool")],
  ["protocol.openelb.kubesphere.io/v1alpha1", k("openelb", "protocol")],
]);

/** Prefixes whose unknown keys are outputs (PureLB) or unsupported tuning (kube-vip,
 * MetalLB, Cilium), in the order they are tried. */
export const KNOWN_PREFIXES: readonly (readonly [string, ForeignKey])[] = [
  ["purelb.io/allocated-", k("purelb", "output")],
  ["purelb.io/announcing-", k("purelb", "output")],
  ["purelb.io/", k("purelb", "unsupported", { note: "PureLB-specific" })],
  [
    "kube-vip.io/",
    k("kube-vip", "unsupported", {
      note: "per-Service kube-vip tuning (interface, VLAN, leases, DDNS, UPnP, egress)",
    }),
  ],
  ["metallb.io/", k("metallb", "unsupported", { note: "MetalLB-specific" })],
  ["metallb.universe.tf/", k("metallb", "unsupported", { note: "MetalLB-specific" })],
  ["lbipam.cilium.io/", k("cilium", "unsupported", { note: "Cilium-specific" })],
];

/** The recognised meaning of an annotation key, or undefined for keys of no tool we know. */
export function foreignKey(key: string): ForeignKey | undefined {
  const known = KNOWN_KEYS.get(key);
  if (known) return known;
  for (const [prefix, meaning] of KNOWN_PREFIXES) if (key.startsWith(prefix)) return meaning;
  return undefined;
}

/** Whether the key could belong to a tool we know: a cheap test before the map. */
export function mayBeKnownKey(key: string): boolean {
  const c = key.charCodeAt(0);
  // p(asslb, urelb, rotocol) m(etallb) l(bipam, b.kubesphere) i(o.cilium) k(ube-vip) e(ip)
  return c === 112 || c === 109 || c === 108 || c === 105 || c === 107 || c === 101;
}
