/**
 * The BGP settings of one LB host from the cluster's LoadBalancerBGPPeer objects
 * (docs/vip-announce.md "The LoadBalancerBGPPeer object"), what the `--bgp-*` flags give in
 * standalone mode. Pure: the objects, this host's name and Node labels in; the settings the
 * BIRD configuration is rendered from (bird-config.ts) and findings out.
 *
 * - A peer applies to this host when its `nodeSelectors` is empty or any selector matches
 *   the host's Node labels (MetalLB BGPPeerSpec.NodeSelectors: "Only connect to this peer on
 *   nodes that match one of these selectors", metallb/metallb api/v1beta2/bgppeer_types.go).
 * - Each peer is one session, in name order, with its own myASN, port, hold, keepalive and
 *   connect times, BFD on or off, and the communities and LOCAL_PREF of its address's family.
 *
 * What BIRD on one host cannot do per session is reported, never dropped in silence (each
 * finding names the object and field, and says what is used instead):
 * - `bgp_router_id_conflict`: one router id per BIRD process; the first peer's is used.
 * - `bgp_bfd_timing_conflict`: BIRD's bfd protocol has one timing per interface, and the
 *   interface toward a peer is not known here; the first BFD peer's timing is used.
 * - `bgp_family_not_carried`: a session carries its address's family only (`next hop self`
 *   gives an IPv4 next hop on an IPv4 session); the other family's block is unused.
 * - `bgp_local_pref_ebgp`: LOCAL_PREF is sent to internal peers only (RFC 4271 §5.1.5);
 *   not rendered on an eBGP session.
 * - `bgp_peer_duplicate`: two objects for one router address; the first by name is used.
 * - `bgp_host_unknown`: no Node of this host's name, so no selector can match it.
 */

import {
  BGP_PEER_DEFAULTS,
  BGP_PEER_KIND,
  durationSeconds,
  type LoadBalancerBGPPeer,
} from "../../k8s/load-balancer-bgp-peer.ts";
import { selectorMatches } from "../../plan/address-pools.ts";
import type { BgpPeer, BgpSettings, IpFamily } from "./bgp-types.ts";

export type BgpConfigFindingCode =
  | "bgp_router_id_conflict"
  | "bgp_bfd_timing_conflict"
  | "bgp_family_not_carried"
  | "bgp_local_pref_ebgp"
  | "bgp_peer_duplicate"
  | "bgp_host_unknown"
  | "bgp_no_peer";

export interface BgpConfigFinding {
  readonly code: BgpConfigFindingCode;
  readonly severity: "warning" | "info";
  /** `LoadBalancerBGPPeer NAME`, or the host */
  readonly subject: string;
  readonly message: string;
}

export interface BgpPeerConfigInput {
  readonly host: string;
  /** the host's Node labels; undefined when the cluster has no Node of that name */
  readonly labels: Readonly<Record<string, string>> | undefined;
  readonly peers: readonly LoadBalancerBGPPeer[];
  readonly kernelTable: number;
}

export interface BgpPeerConfig {
  readonly settings: BgpSettings;
  /** the LoadBalancerBGPPeer names this host opens sessions to, in session order */
  readonly selected: readonly string[];
  readonly findings: readonly BgpConfigFinding[];
}

/** The ASN rendered when no peer applies (no session uses it). */
const UNUSED_ASN = 64512;

const familyOf = (address: string): IpFamily => (address.includes(":") ? "IPv6" : "IPv4");
const subjectOf = (p: LoadBalancerBGPPeer) => `${BGP_PEER_KIND} ${p.metadata.name}`;

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
  const chosen: LoadBalancerBGPPeer[] = [];
  for (const p of sorted) {
    if (!peerSelectsHost(p, input.labels)) continue;
    const twin = chosen.find((q) => q.spec.peerAddress === p.spec.peerAddress);
    if (twin) {
      findings.push({
        code: "bgp_peer_duplicate",
        severity: "warning",
        subject: subjectOf(p),
        message: `spec.peerAddress ${p.spec.peerAddress} is also ${subjectOf(twin)}'s; only ${twin.metadata.name} is used`,
      });
      continue;
    }
    chosen.push(p);
  }
  if (chosen.length === 0)
    findings.push({
      code: "bgp_no_peer",
      severity: "warning",
      subject: `host ${input.host}`,
      message: `no ${BGP_PEER_KIND} selects this host: it announces nothing`,
    });

  const routerId = chosen.find((p) => p.spec.routerID !== undefined);
  for (const p of chosen)
    if (routerId && p.spec.routerID !== undefined && p.spec.routerID !== routerId.spec.routerID)
      findings.push({
        code: "bgp_router_id_conflict",
        severity: "warning",
        subject: subjectOf(p),
        message: `spec.routerID ${p.spec.routerID} is not used: BIRD has one router id per host; ${routerId.spec.routerID} from ${subjectOf(routerId)} is`,
      });

  const bfdOf = (p: LoadBalancerBGPPeer) => {
    const b = p.spec.bfd ?? {};
    if (b.enabled === false) return undefined;
    return {
      receiveInterval: b.receiveInterval ?? BGP_PEER_DEFAULTS.bfd.receiveInterval,
      transmitInterval: b.transmitInterval ?? BGP_PEER_DEFAULTS.bfd.transmitInterval,
      detectMultiplier: b.detectMultiplier ?? BGP_PEER_DEFAULTS.bfd.detectMultiplier,
    };
  };
  const bfdPeer = chosen.find((p) => bfdOf(p) !== undefined);
  const bfd = bfdPeer && bfdOf(bfdPeer)!;
  for (const p of chosen) {
    const b = bfdOf(p);
    if (!b || !bfd) continue;
    if (
      b.receiveInterval !== bfd.receiveInterval ||
      b.transmitInterval !== bfd.transmitInterval ||
      b.detectMultiplier !== bfd.detectMultiplier
    )
      findings.push({
        code: "bgp_bfd_timing_conflict",
        severity: "warning",
        subject: subjectOf(p),
        message: `spec.bfd (${b.receiveInterval}/${b.transmitInterval} ms × ${b.detectMultiplier}) is not used: BIRD runs one BFD timing per host; ${bfdPeer.metadata.name}'s ${bfd.receiveInterval}/${bfd.transmitInterval} ms × ${bfd.detectMultiplier} is`,
      });
  }

  const peers = chosen.map((p): BgpPeer => sessionOf(p, findings, bfd !== undefined));
  return {
    settings: {
      asn: chosen[0]?.spec.myASN ?? sorted[0]?.spec.myASN ?? UNUSED_ASN,
      peers,
      ...(routerId?.spec.routerID !== undefined && { routerId: routerId.spec.routerID }),
      kernelTable: input.kernelTable,
      bfd: bfd && {
        intervalMs: bfd.receiveInterval,
        multiplier: bfd.detectMultiplier,
        receiveMs: bfd.receiveInterval,
        transmitMs: bfd.transmitInterval,
      },
      holdSeconds: BGP_PEER_DEFAULTS.holdSeconds,
      connectRetrySeconds: BGP_PEER_DEFAULTS.connectSeconds,
      communities: [],
    },
    selected: chosen.map((p) => p.metadata.name),
    findings,
  };
}

function sessionOf(p: LoadBalancerBGPPeer, findings: BgpConfigFinding[], hostBfd: boolean): BgpPeer {
  const s = p.spec;
  const family = familyOf(s.peerAddress);
  const own = family === "IPv4" ? s.ipv4 : s.ipv6;
  const other = family === "IPv4" ? "ipv6" : "ipv4";
  if (s[other] !== undefined)
    findings.push({
      code: "bgp_family_not_carried",
      severity: "warning",
      subject: subjectOf(p),
      message: `spec.${other} is not used: the session to ${s.peerAddress} carries ${family} routes only; add a ${BGP_PEER_KIND} at the router's ${family === "IPv4" ? "IPv6" : "IPv4"} address`,
    });
  const ibgp = s.myASN === s.peerASN;
  if (own?.localPref !== undefined && !ibgp)
    findings.push({
      code: "bgp_local_pref_ebgp",
      severity: "warning",
      subject: subjectOf(p),
      message: `spec.${family === "IPv4" ? "ipv4" : "ipv6"}.localPref ${own.localPref} is not sent: LOCAL_PREF goes to internal (iBGP) peers only, and myASN ${s.myASN} ≠ peerASN ${s.peerASN} (RFC 4271 §5.1.5)`,
    });
  const seconds = (text: string | undefined) => (text === undefined ? undefined : durationSeconds(text));
  const hold = seconds(s.holdTime);
  const keepalive = seconds(s.keepaliveTime);
  const connect = seconds(s.connectTime);
  const bfdOn = s.bfd?.enabled !== false;
  return {
    address: s.peerAddress,
    asn: s.peerASN,
    family,
    source: p.metadata.name,
    localAsn: s.myASN,
    ...(s.peerPort !== undefined && { port: s.peerPort }),
    ...(hold !== undefined && { holdSeconds: hold }),
    ...(keepalive !== undefined && { keepaliveSeconds: keepalive }),
    ...(connect !== undefined && { connectRetrySeconds: connect }),
    ...(hostBfd && { bfd: bfdOn }),
    ...((own?.communities?.length ?? 0) > 0 && { communities: own!.communities! }),
    ...(own?.localPref !== undefined && ibgp && { localPref: own.localPref }),
  };
}
