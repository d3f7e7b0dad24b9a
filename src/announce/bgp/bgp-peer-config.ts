/**
 * The BGP settings of one LB host from the cluster's LoadBalancerBGPPeer and
 * LoadBalancerBGPAdvertisement objects (docs/vip-announce.md "The LoadBalancerBGPPeer
 * object"), what the `--bgp-*` flags give in standalone mode. Pure: the objects, this host's
 * name, Node labels and addresses, and the resolved password Secrets in; the settings the
 * BIRD configuration is rendered from (bird-config.ts), the aggregates of the kernel table
 * and a verdict per object out.
 *
 * - A peer applies to this host when its `nodeSelectors` is empty or any selector matches
 *   the host's Node labels (MetalLB BGPPeerSpec.NodeSelectors, metallb/metallb
 *   api/v1beta2/bgppeer_types.go).
 * - Each peer is one session, in name order, with every MetalLB BGPPeer setting of its own
 *   (session-fields below); what it exports comes from the advertisements
 *   (bgp-advertisements.ts), plus the communities and LOCAL_PREF of its own ipv4/ipv6 block.
 *
 * Reported, never dropped in silence (each finding names the object and field):
 * - `bgp_peer_duplicate`: BIRD locks one session per (address, port, VRF) (proto/bgp/bgp.c
 *   bgp_start); the second by name is left out.
 * - `bgp_password_unavailable`: passwordSecret missing, not basic-auth, without `password`,
 *   or a key BIRD cannot carry: the session is left out (MetalLB refuses the config too).
 * - `bgp_source_address_absent`: sourceAddress is not on this host: not used, the kernel
 *   picks (MetalLB's documented behaviour).
 * - `bgp_family_not_carried`, `bgp_local_pref_ebgp`, `bgp_host_unknown`, `bgp_no_peer`,
 *   `bgp_advertisement` (an advertisement refused or partly applied on this host).
 */
import type { LoadBalancerBGPAdvertisement } from "../../k8s/load-balancer-bgp-advertisement.ts";
import {
  BGP_PEER_DEFAULTS,
  BGP_PEER_KIND,
  durationSeconds,
  isInternal,
  type LoadBalancerBGPPeer,
  passwordProblem,
} from "../../k8s/load-balancer-bgp-peer.ts";
import { selectorMatches } from "../../plan/address-pools.ts";
import {
  type AdvertisedPool,
  type AdvertisementVerdict,
  type Aggregate,
  hostExports,
} from "./bgp-advertisements.ts";
import type { BgpPeer, BgpSettings, ExportRule, IpFamily } from "./bgp-types.ts";

export type BgpConfigFindingCode =
  | "bgp_family_not_carried"
  | "bgp_local_pref_ebgp"
  | "bgp_peer_duplicate"
  | "bgp_password_unavailable"
  | "bgp_source_address_absent"
  | "bgp_advertisement"
  | "bgp_host_unknown"
  | "bgp_no_peer";

export interface BgpConfigFinding {
  readonly code: BgpConfigFindingCode;
  readonly severity: "warning" | "info";
  /** `LoadBalancerBGPPeer NAME`, `LoadBalancerBGPAdvertisement NAME`, or the host */
  readonly subject: string;
  readonly message: string;
}

/** A password Secret as read: its type and `password` key, or that it is missing. */
export type SecretRead = { readonly type?: string; readonly password?: string } | "missing";

export interface BgpPeerConfigInput {
  readonly host: string;
  /** the host's Node labels; undefined when the cluster has no Node of that name */
  readonly labels: Readonly<Record<string, string>> | undefined;
  readonly peers: readonly LoadBalancerBGPPeer[];
  readonly advertisements?: readonly LoadBalancerBGPAdvertisement[];
  readonly pools?: readonly AdvertisedPool[];
  /** the Secrets named by passwordSecret, by `namespace/name` */
  readonly secrets?: ReadonlyMap<string, SecretRead>;
  /** passlb's namespace: where a passwordSecret without namespace lives */
  readonly namespace?: string;
  /** this host's addresses; undefined: not known, sourceAddress is used as given */
  readonly hostAddresses?: readonly string[];
  readonly kernelTable: number;
}

export interface BgpPeerConfig {
  readonly settings: BgpSettings;
  /** the LoadBalancerBGPPeer names this host opens sessions to, in session order */
  readonly selected: readonly string[];
  readonly aggregates: readonly Aggregate[];
  readonly advertisements: readonly AdvertisementVerdict[];
  readonly findings: readonly BgpConfigFinding[];
}

/** The ASN rendered when no peer applies (no session uses it). */
const UNUSED_ASN = 64512;

const familyOf = (address: string): IpFamily => (address.includes(":") ? "IPv6" : "IPv4");
const subjectOf = (p: LoadBalancerBGPPeer) => `${BGP_PEER_KIND} ${p.metadata.name}`;
const familiesOf = (p: LoadBalancerBGPPeer): IpFamily[] =>
  p.spec.dualStackAddressFamily === true ? ["IPv4", "IPv6"] : [familyOf(p.spec.peerAddress)];

/** Whether the peer applies to a host with these Node labels (undefined: no such Node). */
export function peerSelectsHost(
  peer: LoadBalancerBGPPeer,
  labels: Readonly<Record<string, string>> | undefined,
): boolean {
  const selectors = peer.spec.nodeSelectors ?? [];
  if (selectors.length === 0) return true;
  return labels !== undefined && selectors.some((s) => selectorMatches(s, labels));
}

export function bgpSettingsFor(input: BgpPeerConfigInput): BgpPeerConfig {
  const findings: BgpConfigFinding[] = [];
  const sorted = [...input.peers].sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  if (input.labels === undefined && sorted.some((p) => (p.spec.nodeSelectors ?? []).length > 0))
    findings.push({
      code: "bgp_host_unknown",
      severity: "warning",
      subject: `host ${input.host}`,
      message: `no Node named ${input.host}, so no nodeSelectors can match it (--host-name must be the Node's name)`,
    });
  const chosen = choosePeers(sorted, input, findings);
  const exports = hostExports({
    advertisements: input.advertisements ?? [],
    pools: input.pools ?? [],
    labels: input.labels,
    sessions: chosen.map(({ peer }) => ({
      name: peer.metadata.name,
      families: familiesOf(peer),
      internal: isInternal(peer.spec),
    })),
  });
  for (const v of exports.verdicts)
    for (const message of v.messages)
      findings.push({
        code: "bgp_advertisement",
        severity: v.accepted ? "info" : "warning",
        subject: `LoadBalancerBGPAdvertisement ${v.name}`,
        message: v.accepted ? message : `refused on this host: ${message}`,
      });
  const peers = chosen.map(({ peer, password }) =>
    sessionOf(peer, password, exports.bySession.get(peer.metadata.name) ?? {}, input, findings),
  );
  return {
    settings: {
      asn: chosen[0]?.peer.spec.myASN ?? sorted[0]?.spec.myASN ?? UNUSED_ASN,
      peers,
      kernelTable: input.kernelTable,
      bfd: undefined,
      holdSeconds: BGP_PEER_DEFAULTS.holdSeconds,
      connectRetrySeconds: BGP_PEER_DEFAULTS.connectSeconds,
      communities: [],
    },
    selected: chosen.map(({ peer }) => peer.metadata.name),
    aggregates: exports.aggregates,
    advertisements: exports.verdicts,
    findings,
  };
}

/** The peers of this host: selected, one per (address, port, VRF), with a usable password. */
function choosePeers(
  sorted: readonly LoadBalancerBGPPeer[],
  input: BgpPeerConfigInput,
  findings: BgpConfigFinding[],
): { peer: LoadBalancerBGPPeer; password: string | undefined }[] {
  const chosen: { peer: LoadBalancerBGPPeer; password: string | undefined }[] = [];
  const lock = (p: LoadBalancerBGPPeer) =>
    `${p.spec.peerAddress} port ${p.spec.peerPort ?? 179} vrf ${p.spec.vrf || "default"}`;
  for (const p of sorted) {
    if (!peerSelectsHost(p, input.labels)) continue;
    const twin = chosen.find((q) => lock(q.peer) === lock(p));
    if (twin) {
      findings.push({
        code: "bgp_peer_duplicate",
        severity: "warning",
        subject: subjectOf(p),
        message: `${lock(p)} is also ${subjectOf(twin.peer)}'s, and BIRD runs one session per neighbour, port and VRF; only ${twin.peer.metadata.name} is used`,
      });
      continue;
    }
    const password = passwordOf(p, input);
    if (typeof password === "object") {
      findings.push({
        code: "bgp_password_unavailable",
        severity: "warning",
        subject: subjectOf(p),
        message: `${password.why}; no session to ${p.spec.peerAddress} until it is fixed`,
      });
      continue;
    }
    chosen.push({ peer: p, password });
  }
  if (chosen.length === 0)
    findings.push({
      code: "bgp_no_peer",
      severity: "warning",
      subject: `host ${input.host}`,
      message: `no ${BGP_PEER_KIND} selects this host: it announces nothing`,
    });
  return chosen;
}

/** The session's MD5 key: inline, or from its Secret (MetalLB passwordFromSecretForPeer:
 * type kubernetes.io/basic-auth, key `password`). Messages never contain the key. */
function passwordOf(p: LoadBalancerBGPPeer, input: BgpPeerConfigInput): string | undefined | { why: string } {
  if (p.spec.password !== undefined) return p.spec.password;
  const ref = p.spec.passwordSecret;
  if (!ref) return undefined;
  const key = `${ref.namespace ?? input.namespace ?? "passlb-system"}/${ref.name}`;
  const secret = input.secrets?.get(key);
  if (secret === undefined || secret === "missing")
    return {
      why: `spec.passwordSecret: Secret ${key} ${secret === "missing" ? "does not exist" : "was not read (is it in passlb's namespace, and named in the passlb-lb Role?)"}`,
    };
  if (secret.type !== "kubernetes.io/basic-auth")
    return {
      why: `spec.passwordSecret: Secret ${key} is of type ${secret.type ?? "Opaque"}, not kubernetes.io/basic-auth`,
    };
  if (secret.password === undefined)
    return { why: `spec.passwordSecret: Secret ${key} has no key "password"` };
  const bad = passwordProblem(secret.password);
  return bad ? { why: `spec.passwordSecret: the password in Secret ${key} ${bad}` } : secret.password;
}

function sessionOf(
  p: LoadBalancerBGPPeer,
  password: string | undefined,
  exports: Partial<Record<IpFamily, ExportRule[]>>,
  input: BgpPeerConfigInput,
  findings: BgpConfigFinding[],
): BgpPeer {
  const s = p.spec;
  const family = familyOf(s.peerAddress);
  const families = familiesOf(p);
  const internal = isInternal(s);
  const note = (code: BgpConfigFindingCode, message: string) =>
    findings.push({ code, severity: "warning", subject: subjectOf(p), message });
  const rules: Partial<Record<IpFamily, ExportRule[]>> = {};
  for (const f of ["IPv4", "IPv6"] as const) {
    const key = f === "IPv4" ? "ipv4" : "ipv6";
    const own = s[key];
    if (own !== undefined && !families.includes(f)) {
      note(
        "bgp_family_not_carried",
        `spec.${key} is not used: the session to ${s.peerAddress} carries ${family} routes only; set spec.dualStackAddressFamily or add a ${BGP_PEER_KIND} at the router's ${f} address`,
      );
      continue;
    }
    if (!families.includes(f)) continue;
    if (own?.localPref !== undefined && !internal)
      note(
        "bgp_local_pref_ebgp",
        `spec.${key}.localPref ${own.localPref} is not sent: LOCAL_PREF goes to internal (iBGP) peers only, and this session is external (RFC 4271 §5.1.5)`,
      );
    const attrs: ExportRule | undefined =
      (own?.communities?.length ?? 0) > 0 || (own?.localPref !== undefined && internal)
        ? {
            from: `${subjectOf(p)} spec.${key}`,
            prefixes: [f === "IPv4" ? "0.0.0.0/0{0,32}" : "::/0{0,128}"],
            communities: own?.communities ?? [],
            ...(own?.localPref !== undefined && internal && { localPref: own.localPref }),
            attributesOnly: true,
          }
        : undefined;
    rules[f] = [...(attrs ? [attrs] : []), ...(exports[f] ?? [])];
  }
  let source = s.sourceAddress;
  if (source !== undefined && input.hostAddresses && !input.hostAddresses.includes(source)) {
    note(
      "bgp_source_address_absent",
      `spec.sourceAddress ${source} is not an address of this host; not used (the kernel chooses the source, as MetalLB does)`,
    );
    source = undefined;
  }
  const seconds = (text: string | undefined) => (text === undefined ? undefined : durationSeconds(text));
  const timers = sessionTimers(seconds(s.holdTime), seconds(s.keepaliveTime));
  const connect = seconds(s.connectTime);
  const b = s.bfd ?? {};
  return {
    address: s.peerAddress,
    ...(s.peerASN !== undefined && { asn: s.peerASN }),
    ...(s.dynamicASN !== undefined && { dynamicAsn: s.dynamicASN }),
    family,
    source: p.metadata.name,
    localAsn: s.localASN ?? s.myASN,
    ...(s.peerPort !== undefined && { port: s.peerPort }),
    ...timers,
    ...(connect !== undefined && { connectRetrySeconds: connect }),
    bfd: b.enabled !== false,
    ...(b.enabled !== false && {
      bfdTiming: {
        receiveMs: b.receiveInterval ?? BGP_PEER_DEFAULTS.bfd.receiveInterval,
        transmitMs: b.transmitInterval ?? BGP_PEER_DEFAULTS.bfd.transmitInterval,
        multiplier: b.detectMultiplier ?? BGP_PEER_DEFAULTS.bfd.detectMultiplier,
        passive: b.passiveMode === true,
      },
    }),
    ...(source !== undefined && { sourceAddress: source }),
    ...(password !== undefined && { password }),
    ...(s.ebgpMultiHop === true && { multihop: true }),
    ...(s.enableGracefulRestart === true && { gracefulRestart: true }),
    ...(s.routerID !== undefined && s.routerID !== "" && { routerId: s.routerID }),
    ...(s.vrf !== undefined && s.vrf !== "" && { vrf: s.vrf }),
    ...(families.length === 2 && { dualStack: true }),
    exports: rules,
  };
}

/** MetalLB internal/config/config.go parseTimers: one timer given, the other follows (keepalive
 * = hold/3, hold = 3 × keepalive); neither given: passlb's hold time (the settings'). */
function sessionTimers(hold: number | undefined, keepalive: number | undefined) {
  if (hold !== undefined && keepalive !== undefined)
    return { holdSeconds: hold, keepaliveSeconds: keepalive };
  if (hold !== undefined) return { holdSeconds: hold };
  if (keepalive !== undefined) return { holdSeconds: keepalive * 3, keepaliveSeconds: keepalive };
  return {};
}
