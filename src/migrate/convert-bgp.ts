/**
 * `passlb import`, MetalLB's BGP mode: BGPPeer (metallb.io/v1beta2 or v1beta1),
 * BFDProfile and BGPAdvertisement (v1beta1) in, one LoadBalancerBGPPeer per BGPPeer out
 * (src/k8s/load-balancer-bgp-peer.ts), with a note for everything carried over differently
 * or not at all. Pure. Field meanings: metallb/metallb api/v1beta2/bgppeer_types.go,
 * api/v1beta1/bfdprofile_types.go, api/v1beta1/bgpadvertisement_types.go.
 *
 * - Session fields map one to one (myASN, peerASN, peerAddress, peerPort, keepaliveTime,
 *   connectTime, routerID, nodeSelectors). holdTime is written even when MetalLB had none,
 *   as MetalLB's default "90s", so the session behaves as before (passlb's own default is 9s).
 * - bfdProfile → `bfd` with the profile's intervals (300 ms each when unset, MetalLB's
 *   documented default) and multiplier (3 when unset, FRR bfdd's default that MetalLB
 *   leaves in place); no bfdProfile → `bfd.enabled: false` (MetalLB ran no BFD there).
 * - Each BGPAdvertisement that applies to a peer (`peers` empty or naming it) adds its
 *   communities and localPref to the peer's family block (the family of peerAddress).
 *
 * Not honoured, each a note naming object and field (never dropped in silence):
 * aggregationLength ≠ 32 / aggregationLengthV6 ≠ 128 (passlb announces host routes from the
 * hosts that can serve them), localPref on an eBGP session (RFC 4271 §5.1.5), an
 * advertisement's nodeSelectors and pool selection narrower than every pool (passlb
 * announces every VIP to every peer of a host), community aliases, TCP MD5 passwords,
 * sourceAddress, ebgpMultiHop, vrf, graceful restart, BFD echo/passive/minimum TTL, and
 * MP-BGP (one session carrying both families). Problems (the conversion cannot write a valid
 * object): dynamicASN without peerASN, a bfdProfile that is not in the input, an ASN of 0.
 */
import {
  BGP_PEER_API_VERSION,
  BGP_PEER_KIND,
  type LoadBalancerBGPPeer,
} from "../k8s/load-balancer-bgp-peer.ts";
import { type FieldIssue, IMPORTED_FROM, type ImportNote } from "./convert-pools.ts";
import type { BFDProfile, BGPAdvertisement, BGPPeer } from "./foreign-objects.ts";

export interface ImportedBgpPeer extends LoadBalancerBGPPeer {
  readonly metadata: {
    readonly name: string;
    readonly labels: Record<string, string>;
    readonly annotations: Record<string, string>;
  };
}

export interface BgpConversion {
  readonly peers: ImportedBgpPeer[];
  readonly notes: ImportNote[];
  /** per BGPPeer (by index in the input), the field problems */
  readonly issues: { readonly peer: number; readonly issue: FieldIssue }[];
}

export interface BgpInput {
  readonly peers: readonly BGPPeer[];
  readonly profiles: readonly BFDProfile[];
  readonly advertisements: readonly BGPAdvertisement[];
  /** the names of every MetalLB IPAddressPool in the input, and whether any has IPv6 addresses */
  readonly pools: readonly string[];
  readonly ipv6Pools: boolean;
}

const METALLB_HOLD = "90s";
const METALLB_BFD = { interval: 300, multiplier: 3 };
const LITERAL_COMMUNITY = /^(\d{1,5}:\d{1,5}|large:\d{1,10}:\d{1,10}:\d{1,10})$/;

const ns = (o: { metadata: { namespace?: string | undefined } }) => o.metadata.namespace ?? "metallb-system";
const subject = (kind: string, o: { metadata: { name: string; namespace?: string | undefined } }) =>
  `${kind} ${ns(o)}/${o.metadata.name}`;

export function fromMetallbBgp(input: BgpInput): BgpConversion {
  const notes: ImportNote[] = [];
  const issues: BgpConversion["issues"] = [];
  advertisementNotes(input, notes);
  const v6Peer = input.peers.some((p) => p.spec.peerAddress.includes(":"));
  const peers = input.peers.flatMap((p, index) => {
    const found: FieldIssue[] = [];
    const converted = convertPeer(p, input, notes, found, v6Peer);
    for (const issue of found) issues.push({ peer: index, issue });
    return found.length === 0 && converted ? [converted] : [];
  });
  return { peers, notes, issues };
}

function convertPeer(
  p: BGPPeer,
  input: BgpInput,
  notes: ImportNote[],
  issues: FieldIssue[],
  v6Peer: boolean,
): ImportedBgpPeer | undefined {
  const s = p.spec;
  const from = subject("BGPPeer", p);
  const note = (kind: ImportNote["kind"], message: string) => notes.push({ subject: from, kind, message });
  if (s.peerASN === undefined || s.peerASN === 0) {
    issues.push({
      path: ["spec", s.dynamicASN ? "dynamicASN" : "peerASN"],
      message: s.dynamicASN
        ? `dynamicASN ${s.dynamicASN} is not supported: passlb needs the router's ASN; set spec.peerASN`
        : "is required (1..4294967295)",
    });
  }
  if (s.myASN === 0) issues.push({ path: ["spec", "myASN"], message: "must be 1..4294967295" });
  const family = s.peerAddress.includes(":") ? "ipv6" : "ipv4";
  const ibgp = s.myASN === s.peerASN;

  // BFD
  let bfd: NonNullable<LoadBalancerBGPPeer["spec"]["bfd"]> = { enabled: false };
  if (s.bfdProfile !== undefined) {
    const profile = input.profiles.find((b) => b.metadata.name === s.bfdProfile && ns(b) === ns(p));
    if (!profile)
      issues.push({
        path: ["spec", "bfdProfile"],
        message: `BFDProfile ${ns(p)}/${s.bfdProfile} is not in the input; add it (passlb copies its timing)`,
      });
    else {
      const b = profile.spec;
      bfd = {
        receiveInterval: b.receiveInterval ?? METALLB_BFD.interval,
        transmitInterval: b.transmitInterval ?? METALLB_BFD.interval,
        detectMultiplier: b.detectMultiplier ?? METALLB_BFD.multiplier,
      };
      const ignored = (["echoMode", "echoInterval", "passiveMode", "minimumTtl"] as const).filter(
        (k) => b[k] !== undefined && b[k] !== false,
      );
      if (ignored.length > 0)
        notes.push({
          subject: subject("BFDProfile", profile),
          kind: "not imported",
          message: `${ignored.map((k) => `spec.${k} ${JSON.stringify(b[k])}`).join(", ")}: BIRD's BFD runs single-hop, active, without echo; only the intervals and multiplier are used`,
        });
    }
  } else
    note(
      "warning",
      "no bfdProfile: written as bfd.enabled false, as MetalLB ran it; passlb's default is BFD at 100 ms × 3 (a dead LB host is then seen in about 0.3 s instead of the hold time): turn it on once the router runs BFD",
    );

  // session fields passlb does not carry
  const notCarried: [boolean, string][] = [
    [
      s.password !== undefined || s.passwordSecret?.name !== undefined,
      "spec.password/passwordSecret: TCP MD5 authentication is not supported; a router that requires it refuses the session",
    ],
    [
      s.sourceAddress !== undefined,
      `spec.sourceAddress ${s.sourceAddress}: BIRD uses the host's address toward the router (also the next hop announced)`,
    ],
    [
      s.ebgpMultiHop === true,
      "spec.ebgpMultiHop: passlb's sessions are to routers on the LB host's link (direct)",
    ],
    [s.vrf !== undefined && s.vrf !== "", `spec.vrf ${s.vrf}: sessions run in the host's main routing table`],
    [
      s.enableGracefulRestart === true,
      "spec.enableGracefulRestart: passlb runs graceful restart off (without it a dead LB host is withdrawn at once; specs/scale-out.md §E.5)",
    ],
  ];
  for (const [set, message] of notCarried) if (set) note("not imported", message);
  if (s.holdTime === undefined)
    note(
      "converted",
      `holdTime ${METALLB_HOLD} written: MetalLB's default when unset (passlb's own default is 9s)`,
    );
  if (family === "ipv4" && input.ipv6Pools && !v6Peer && s.disableMP !== true)
    note(
      "warning",
      "MetalLB sent IPv6 VIPs over this IPv4 session (MP-BGP); a passlb session carries its address's family only: add a LoadBalancerBGPPeer at the router's IPv6 address for IPv6 VIPs",
    );

  // what the advertisements add for this peer
  const communities: string[] = [];
  let localPref: { value: number; from: string } | undefined;
  for (const a of input.advertisements) {
    if (ns(a) !== ns(p)) continue;
    const peersOf = a.spec.peers ?? [];
    if (peersOf.length > 0 && !peersOf.includes(p.metadata.name)) continue;
    const ad = subject("BGPAdvertisement", a);
    for (const c of a.spec.communities ?? []) {
      if (!LITERAL_COMMUNITY.test(c)) continue; // an alias: advertisementNotes says so
      if (!communities.includes(c)) communities.push(c);
    }
    const lp = a.spec.localPref;
    if (lp === undefined) continue;
    if (!ibgp)
      notes.push({
        subject: ad,
        kind: "not imported",
        message: `spec.localPref ${lp} for ${from}: LOCAL_PREF goes to iBGP peers only and myASN ${s.myASN} ≠ peerASN ${s.peerASN} (RFC 4271 §5.1.5); MetalLB did not send it either`,
      });
    else if (localPref && localPref.value !== lp)
      notes.push({
        subject: ad,
        kind: "not imported",
        message: `spec.localPref ${lp} for ${from}: ${localPref.from} already gives ${localPref.value}; passlb has one LOCAL_PREF per peer and family, the first is kept`,
      });
    else localPref = { value: lp, from: ad };
  }
  if (issues.length > 0) return undefined;
  const block = {
    ...(communities.length > 0 && { communities }),
    ...(localPref && { localPref: localPref.value }),
  };
  return {
    apiVersion: BGP_PEER_API_VERSION,
    kind: BGP_PEER_KIND,
    metadata: {
      name: p.metadata.name,
      labels: { [IMPORTED_FROM]: "metallb" },
      annotations: { [IMPORTED_FROM]: from },
    },
    spec: {
      myASN: s.myASN,
      peerASN: s.peerASN!,
      peerAddress: s.peerAddress,
      ...(s.peerPort !== undefined && s.peerPort !== 179 && { peerPort: s.peerPort }),
      holdTime: s.holdTime ?? METALLB_HOLD,
      ...(s.keepaliveTime !== undefined && { keepaliveTime: s.keepaliveTime }),
      ...(s.connectTime !== undefined && { connectTime: s.connectTime }),
      ...(s.routerID !== undefined && s.routerID !== "" && { routerID: s.routerID }),
      ...((s.nodeSelectors?.length ?? 0) > 0 && { nodeSelectors: s.nodeSelectors! }),
      bfd,
      ...(Object.keys(block).length > 0 && { [family]: block }),
    },
  };
}

/** Pools MetalLB announced to some peers only: passlb announces every VIP to every peer. */
function poolPeerNotes(input: BgpInput, notes: ImportNote[]): void {
  const all = input.peers.map((p) => p.metadata.name);
  for (const pool of input.pools) {
    const to = new Set<string>();
    for (const a of input.advertisements) {
      const names = a.spec.ipAddressPools ?? [];
      const selectors = (a.spec.ipAddressPoolSelectors?.length ?? 0) > 0;
      // selectors: which pools they match is not known here; counted as covering (noted apart)
      if (names.length > 0 && !names.includes(pool) && !selectors) continue;
      for (const peer of (a.spec.peers?.length ?? 0) > 0 ? a.spec.peers! : all) to.add(peer);
    }
    const extra = all.filter((p) => !to.has(p));
    if (to.size > 0 && extra.length > 0)
      notes.push({
        subject: `LoadBalancerIPPool ${pool}`,
        kind: "warning",
        message: `MetalLB announced it to ${[...to].sort().join(", ")} only; passlb announces every VIP to every peer of an LB host, so also to ${extra.join(", ")}`,
      });
  }
}

/** What an advertisement asks that passlb does not do, once per advertisement. */
function advertisementNotes(input: BgpInput, notes: ImportNote[]): void {
  poolPeerNotes(input, notes);
  for (const a of input.advertisements) {
    const from = subject("BGPAdvertisement", a);
    const note = (message: string) => notes.push({ subject: from, kind: "not imported", message });
    const s = a.spec;
    if (s.aggregationLength !== undefined && s.aggregationLength !== 32)
      note(
        `spec.aggregationLength ${s.aggregationLength}: passlb announces each IPv4 VIP as a /32, and only from the LB hosts that can serve it (a shorter prefix would attract traffic for VIPs a host cannot serve)`,
      );
    if (s.aggregationLengthV6 !== undefined && s.aggregationLengthV6 !== 128)
      note(`spec.aggregationLengthV6 ${s.aggregationLengthV6}: passlb announces each IPv6 VIP as a /128`);
    if ((s.nodeSelectors?.length ?? 0) > 0)
      note(
        "spec.nodeSelectors: every LB host that can serve a VIP announces it; choose the hosts of a router with the LoadBalancerBGPPeer's nodeSelectors",
      );
    const aliases = (s.communities ?? []).filter((c) => !LITERAL_COMMUNITY.test(c));
    if (aliases.length > 0)
      note(
        `spec.communities ${aliases.map((c) => JSON.stringify(c)).join(", ")}: aliases of MetalLB's Community objects are not resolved; write their values into the LoadBalancerBGPPeer`,
      );
    const named = s.ipAddressPools ?? [];
    const selected = (s.ipAddressPoolSelectors?.length ?? 0) > 0;
    const narrower = selected || (named.length > 0 && input.pools.some((pool) => !named.includes(pool)));
    const attributes = (s.communities?.length ?? 0) > 0 || s.localPref !== undefined;
    if (narrower && attributes)
      note(
        `spec.${selected ? "ipAddressPoolSelectors" : `ipAddressPools ${JSON.stringify(named)}`}: passlb gives a peer's communities and localPref to the VIPs of every pool, not only these`,
      );
  }
}
