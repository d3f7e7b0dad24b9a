/**
 * `passlb import`, MetalLB's BGP mode: BGPPeer (metallb.io/v1beta2 or v1beta1), BFDProfile,
 * BGPAdvertisement and Community in; one LoadBalancerBGPPeer per BGPPeer and one
 * LoadBalancerBGPAdvertisement per BGPAdvertisement out, field for field under the same names
 * (docs/migrate.md "BGP field table"). Pure. Field meanings and defaults: metallb/metallb
 * api/v1beta2/bgppeer_types.go, api/v1beta1/{bfdprofile,bgpadvertisement,community}_types.go,
 * internal/config/config.go (parseTimers, bfdProfileFromCR, peerFromCR).
 *
 * Every field of every object ends in exactly one state (bgp-field-report.ts): converted;
 * default written out (MetalLB's effective value made explicit, because passlb's defaults
 * differ: timers, connect retry, BFD timing); accepted no-op (disableMP, "no longer used and
 * has no effect"); or unsupported, named with the reason — only what BIRD 2.0.12 cannot do
 * (unnumbered `interface` peering, BFD echo mode and minimum TTL, service selection), and any
 * field this version does not know. Passwords are converted, never shown.
 */
import { communityValue } from "../k8s/load-balancer-bgp-advertisement.ts";
import { BGP_PEER_API_VERSION, BGP_PEER_KIND, passwordProblem } from "../k8s/load-balancer-bgp-peer.ts";
import { type FieldOutcome, fieldOutcomes, unknownFields } from "./bgp-field-report.ts";
import type { FieldIssue } from "./convert-pools.ts";
import { IMPORTED_FROM } from "./convert-pools.ts";
import type { Community } from "./foreign-bgp-objects.ts";
import type { BFDProfile, BGPAdvertisement, BGPPeer } from "./foreign-objects.ts";

export interface ImportedBgpObject {
  readonly apiVersion: string;
  readonly kind: string;
  readonly metadata: {
    readonly name: string;
    readonly labels: Record<string, string>;
    readonly annotations: Record<string, string>;
  };
  readonly spec: Record<string, unknown>;
}

export interface BgpConversion {
  readonly peers: ImportedBgpObject[];
  readonly advertisements: ImportedBgpObject[];
  readonly fields: FieldOutcome[];
  /** field problems, by the input object's subject (`BGPPeer ns/name`) */
  readonly issues: { readonly subject: string; readonly issue: FieldIssue }[];
}

export interface MetallbBgpInput {
  readonly peers: readonly BGPPeer[];
  readonly profiles: readonly BFDProfile[];
  readonly advertisements: readonly BGPAdvertisement[];
  readonly communities: readonly Community[];
}

/** FRR's defaults under frr-k8s, MetalLB's default backend (FRRouting/frr bgpd/bgp_vty.c,
 * "timers bgp 60 180", "timers connect 120"; BFD bfdd 300/300/3). */
export const METALLB_DEFAULTS = { hold: "180s", keepalive: "60s", connect: "120s", bfd: 300, multiplier: 3 };
export const PASSLB_NAMESPACE = "passlb-system";

const ns = (o: { metadata: { namespace?: string | undefined } }) => o.metadata.namespace ?? "metallb-system";
export const subjectOf = (kind: string, o: { metadata: { name: string; namespace?: string | undefined } }) =>
  `${kind} ${ns(o)}/${o.metadata.name}`;

const PEER_FIELDS = [
  "myASN",
  "peerASN",
  "dynamicASN",
  "localASN",
  "peerAddress",
  "interface",
  "peerPort",
  "sourceAddress",
  "holdTime",
  "keepaliveTime",
  "connectTime",
  "routerID",
  "nodeSelectors",
  "password",
  "passwordSecret",
  "bfdProfile",
  "enableGracefulRestart",
  "ebgpMultiHop",
  "vrf",
  "disableMP",
  "dualStackAddressFamily",
];

export function fromMetallbBgp(input: MetallbBgpInput): BgpConversion {
  const out: BgpConversion = { peers: [], advertisements: [], fields: [], issues: [] };
  for (const p of input.peers) {
    const converted = convertPeer(p, input, out);
    if (converted) out.peers.push(converted);
  }
  for (const a of input.advertisements) {
    const converted = convertAdvertisement(a, input, out);
    if (converted) out.advertisements.push(converted);
  }
  for (const c of input.communities) {
    const from = subjectOf("Community", c);
    for (const entry of c.spec.communities ?? [])
      out.fields.push({
        subject: from,
        field: `spec.communities[${entry.name}]`,
        state: "converted",
        detail: `resolved to ${entry.value} in each LoadBalancerBGPAdvertisement that names it (annotation passlb.io/community-aliases)`,
      });
  }
  return out;
}

function meta(
  kind: string,
  o: { metadata: { name: string } },
  from: string,
  annotations: Record<string, string> = {},
) {
  return {
    name: o.metadata.name,
    labels: { [IMPORTED_FROM]: "metallb" },
    annotations: { [IMPORTED_FROM]: from, ...annotations },
    kind,
  };
}

function convertPeer(p: BGPPeer, input: MetallbBgpInput, out: BgpConversion): ImportedBgpObject | undefined {
  const s = p.spec;
  const from = subjectOf("BGPPeer", p);
  const f = fieldOutcomes(from, out.fields);
  const issue = (path: string[], message: string) =>
    out.issues.push({ subject: from, issue: { path: ["spec", ...path], message } });
  const spec: Record<string, unknown> = {};
  if (s.myASN === 0) issue(["myASN"], "must be 1..4294967295 (MetalLB: missing local ASN)");
  spec.myASN = s.myASN;
  f.converted("myASN");
  if (s.peerASN !== undefined && s.peerASN !== 0) {
    spec.peerASN = s.peerASN;
    f.converted("peerASN");
  }
  if (s.dynamicASN !== undefined) {
    if (s.dynamicASN !== "internal" && s.dynamicASN !== "external")
      issue(["dynamicASN"], `"${s.dynamicASN}" must be internal or external`);
    spec.dynamicASN = s.dynamicASN;
    f.converted("dynamicASN", "BIRD `neighbor ADDR internal|external`");
  }
  if (spec.peerASN === undefined && spec.dynamicASN === undefined)
    issue(["peerASN"], "one of peerASN and dynamicASN is required");
  for (const k of ["localASN", "peerAddress", "sourceAddress", "routerID", "vrf"] as const)
    if (s[k] !== undefined && s[k] !== "") {
      spec[k] = s[k];
      f.converted(k);
    }
  if (s.interface !== undefined)
    f.unsupported(
      "interface",
      "unnumbered peering needs BIRD to find the neighbour's link-local address itself; 2.0.12 needs an explicit `neighbor fe80::X%IF` (set peerAddress to it)",
    );
  if (s.peerAddress === undefined && s.interface === undefined) issue(["peerAddress"], "is required");
  if (s.peerPort !== undefined) {
    spec.peerPort = s.peerPort;
    f.converted("peerPort");
  }
  timers(s, spec, f);
  if (s.connectTime !== undefined) {
    spec.connectTime = s.connectTime;
    f.converted("connectTime");
  } else {
    spec.connectTime = METALLB_DEFAULTS.connect;
    f.defaulted("connectTime", `${METALLB_DEFAULTS.connect} (FRR's; passlb's own default is 1s)`);
  }
  if ((s.nodeSelectors?.length ?? 0) > 0) {
    spec.nodeSelectors = s.nodeSelectors;
    f.converted("nodeSelectors");
  }
  passwords(s, spec, f, issue);
  bfd(p, input, spec, f, out);
  for (const k of ["enableGracefulRestart", "ebgpMultiHop", "dualStackAddressFamily"] as const)
    if (s[k] !== undefined) {
      spec[k] = s[k];
      f.converted(k);
    }
  if (s.ebgpMultiHop === true && s.myASN === s.peerASN)
    issue(["ebgpMultiHop"], "is for external peers; this one is iBGP");
  if (s.disableMP !== undefined) f.noop("disableMP", 'MetalLB: "no longer used and has no effect"');
  unknownFields(s, PEER_FIELDS, f);
  if (out.issues.some((i) => i.subject === from)) return undefined;
  const { kind, ...metadata } = meta(BGP_PEER_KIND, p, from);
  return { apiVersion: BGP_PEER_API_VERSION, kind, metadata, spec };
}

/** MetalLB internal/config/config.go parseTimers: one given, the other follows; none: FRR's. */
function timers(
  s: BGPPeer["spec"],
  spec: Record<string, unknown>,
  f: ReturnType<typeof fieldOutcomes>,
): void {
  if (s.holdTime !== undefined) {
    spec.holdTime = s.holdTime;
    f.converted("holdTime");
  }
  if (s.keepaliveTime !== undefined) {
    spec.keepaliveTime = s.keepaliveTime;
    f.converted("keepaliveTime");
  }
  if (s.holdTime === undefined && s.keepaliveTime === undefined) {
    spec.holdTime = METALLB_DEFAULTS.hold;
    spec.keepaliveTime = METALLB_DEFAULTS.keepalive;
    f.defaulted("holdTime", `${METALLB_DEFAULTS.hold} (FRR's; passlb's own default is 9s)`);
    f.defaulted("keepaliveTime", METALLB_DEFAULTS.keepalive);
  }
}

function passwords(
  s: BGPPeer["spec"],
  spec: Record<string, unknown>,
  f: ReturnType<typeof fieldOutcomes>,
  issue: (path: string[], message: string) => void,
): void {
  if (s.password !== undefined) {
    const bad = passwordProblem(s.password);
    if (bad) issue(["password"], `${bad} (the key is not shown)`);
    spec.password = s.password;
    f.converted("password", "the TCP MD5 key, unchanged (not shown); consider a passwordSecret");
  }
  const name = s.passwordSecret?.name;
  if (name !== undefined) {
    spec.passwordSecret = { name, namespace: PASSLB_NAMESPACE };
    f.converted(
      "passwordSecret",
      `refers to Secret ${PASSLB_NAMESPACE}/${name}: copy Secret ${s.passwordSecret?.namespace ?? "metallb-system"}/${name} there (type kubernetes.io/basic-auth, key password) and add ${name} to the passlb-lb-secrets Role's resourceNames (deploy/rbac-lb.yaml)`,
    );
  }
}

function bfd(
  p: BGPPeer,
  input: MetallbBgpInput,
  spec: Record<string, unknown>,
  f: ReturnType<typeof fieldOutcomes>,
  out: BgpConversion,
): void {
  const s = p.spec;
  if (s.bfdProfile === undefined) {
    spec.bfd = { enabled: false };
    f.defaulted(
      "bfd",
      "enabled false: MetalLB runs no BFD without a bfdProfile (passlb's default is BFD at 100 ms × 3)",
    );
    return;
  }
  const profile = input.profiles.find((b) => b.metadata.name === s.bfdProfile && ns(b) === ns(p));
  if (!profile) {
    out.issues.push({
      subject: subjectOf("BGPPeer", p),
      issue: {
        path: ["spec", "bfdProfile"],
        message: `BFDProfile ${ns(p)}/${s.bfdProfile} is not in the input; add it`,
      },
    });
    return;
  }
  f.converted("bfdProfile", `its settings inline as spec.bfd (spec.bfdProfile keeps the name)`);
  spec.bfdProfile = s.bfdProfile;
  const b = profile.spec;
  const g = fieldOutcomes(subjectOf("BFDProfile", profile), out.fields);
  const value = (k: "receiveInterval" | "transmitInterval" | "detectMultiplier", d: number) => {
    if (b[k] !== undefined) g.converted(k);
    else g.defaulted(k, `${d} (FRR bfdd's)`);
    return b[k] ?? d;
  };
  const inline: Record<string, unknown> = {
    receiveInterval: value("receiveInterval", METALLB_DEFAULTS.bfd),
    transmitInterval: value("transmitInterval", METALLB_DEFAULTS.bfd),
    detectMultiplier: value("detectMultiplier", METALLB_DEFAULTS.multiplier),
  };
  if (b.passiveMode !== undefined) {
    inline.passiveMode = b.passiveMode;
    g.converted("passiveMode", "BIRD `passive`");
  }
  if (b.echoMode === true)
    g.unsupported("echoMode", 'BIRD 2.0.12 does not implement BFD echo (doc/bird.sgml "BFD")');
  else if (b.echoMode === false) g.noop("echoMode", "false is BIRD's behaviour");
  if (b.echoInterval !== undefined)
    if (b.echoMode === true) g.unsupported("echoInterval", "no BFD echo in BIRD 2.0.12");
    else g.noop("echoInterval", "has no effect without echoMode");
  if (b.minimumTtl !== undefined)
    g.unsupported("minimumTtl", "BIRD 2.0.12's BFD has no minimum-TTL check for multihop sessions");
  unknownFields(
    b,
    [
      "receiveInterval",
      "transmitInterval",
      "detectMultiplier",
      "passiveMode",
      "echoMode",
      "echoInterval",
      "minimumTtl",
    ],
    g,
  );
  // BIRD proto/bgp/bgp.c: "Multihop BGP with BFD requires specified local address"
  if (s.ebgpMultiHop === true && s.sourceAddress === undefined) {
    f.unsupported(
      "bfdProfile",
      "BFD on a multihop session needs sourceAddress in BIRD; written with bfd.enabled false — set sourceAddress and enable it",
    );
    inline.enabled = false;
  }
  spec.bfd = inline;
}

function convertAdvertisement(
  a: BGPAdvertisement,
  input: MetallbBgpInput,
  out: BgpConversion,
): ImportedBgpObject | undefined {
  const s = a.spec;
  const from = subjectOf("BGPAdvertisement", a);
  const f = fieldOutcomes(from, out.fields);
  const spec: Record<string, unknown> = {};
  const keys = [
    "aggregationLength",
    "aggregationLengthV6",
    "localPref",
    "ipAddressPools",
    "ipAddressPoolSelectors",
    "nodeSelectors",
    "peers",
  ] as const;
  for (const k of keys)
    if (s[k] !== undefined) {
      spec[k] = s[k];
      f.converted(k);
    }
  const aliases: Record<string, string> = {};
  const communities: string[] = [];
  (s.communities ?? []).forEach((c, i) => {
    const literal = communityValue(c);
    if (literal) {
      communities.push(c);
      return;
    }
    const value = input.communities
      .filter((x) => ns(x) === ns(a))
      .flatMap((x) => x.spec.communities ?? [])
      .find((x) => x.name === c)?.value;
    if (value === undefined || communityValue(value) === undefined) {
      out.issues.push({
        subject: from,
        issue: {
          path: ["spec", "communities", i],
          message: `"${c}" is neither a community value nor an alias of a Community in ${ns(a)} in the input`,
        },
      });
      return;
    }
    aliases[value] = c;
    communities.push(value);
  });
  if (s.communities !== undefined) {
    spec.communities = communities;
    f.converted(
      "communities",
      Object.keys(aliases).length > 0
        ? `aliases resolved: ${Object.entries(aliases)
            .map(([v, n]) => `${n} = ${v}`)
            .join(", ")}`
        : undefined,
    );
  }
  if ((s.serviceSelectors?.length ?? 0) > 0)
    f.unsupported(
      "serviceSelectors",
      "passlb's per-peer export filters select by pool, not by Service (put those Services' addresses in a pool of their own)",
    );
  unknownFields(s, [...keys, "communities", "serviceSelectors"], f);
  if (out.issues.some((i) => i.subject === from)) return undefined;
  const annotations =
    Object.keys(aliases).length > 0 ? { "passlb.io/community-aliases": JSON.stringify(aliases) } : {};
  const { kind, ...metadata } = meta("LoadBalancerBGPAdvertisement", a, from, annotations);
  return { apiVersion: "passlb.io/v1alpha1", kind, metadata, spec };
}
