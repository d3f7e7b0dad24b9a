/**
 * LoadBalancerBGPPeer (`passlb.io/v1alpha1`, cluster-scoped, plural `loadbalancerbgppeers`,
 * short name `lbbgppeer`): one router the LB hosts open a BGP session to, with the session's
 * settings, its BFD timing and what is advertised to it per address family. `passlb lb
 * --announce bgp` in Kubernetes mode reads these instead of the `--bgp-*` flags
 * (docs/vip-announce.md "The LoadBalancerBGPPeer object"); `passlb plan` reads them from
 * manifests; the CRD YAML in deploy/crd-loadbalancerbgppeers.yaml is written from this shape.
 *
 * Field names and meanings are MetalLB's, so that its objects import field for field
 * (`passlb import`, src/migrate/metallb-bgp.ts):
 * - session: BGPPeer `myASN`, `peerASN`, `peerAddress`, `peerPort`, `holdTime`,
 *   `keepaliveTime`, `connectTime`, `routerID`, `nodeSelectors`
 *   (metallb/metallb api/v1beta2/bgppeer_types.go BGPPeerSpec);
 * - `bfd`: BFDProfile `receiveInterval`, `transmitInterval`, `detectMultiplier`, inline
 *   instead of a named profile (api/v1beta1/bfdprofile_types.go BFDProfileSpec; same
 *   bounds, 10..60000 ms and 2..255), plus `enabled`;
 * - and the rest of BGPPeerSpec: `dynamicASN`, `localASN`, `sourceAddress`, `password`,
 *   `passwordSecret`, `enableGracefulRestart`, `ebgpMultiHop`, `vrf`,
 *   `dualStackAddressFamily`, `disableMP` (accepted, no effect, as in MetalLB);
 * - `ipv4` / `ipv6`: communities and `localPref` added to every route of that family sent to
 *   this peer. Which VIPs go where, aggregated or not, is LoadBalancerBGPAdvertisement's
 *   (load-balancer-bgp-advertisement.ts).
 * docs/vip-announce.md "Field reference" has every field with its BIRD configuration.
 *
 * Defaults are passlb's (docs/vip-announce.md "Field reference"), not MetalLB's: hold time 9 s (FRR 180 s),
 * BFD on at 100 ms × 3 (MetalLB: no BFD without a profile), connect retry 1 s, graceful
 * restart off. `passlb import` writes MetalLB's effective values out instead.
 * Durations are Go `time.Duration` strings as in metav1.Duration ("9s", "1m30s").
 *
 * This module decodes (zod, with paths in errors) and checks what the schema cannot (an IP
 * address, whole seconds, exactly one of peerASN/dynamicASN, a password BIRD can carry, the
 * multihop rules); it does not pick the peers of a host (announce/bgp/bgp-peer-config.ts).
 */
import { z } from "zod";
import { parseIp } from "../net/ip.ts";
import { LabelSelectorSchema, ObjectMetaSchema } from "./objects.ts";

export const BGP_PEER_GROUP = "passlb.io";
export const BGP_PEER_API_VERSION = `${BGP_PEER_GROUP}/v1alpha1`;
export const BGP_PEER_PLURAL = "loadbalancerbgppeers";
export const BGP_PEER_KIND = "LoadBalancerBGPPeer";

/** passlb's defaults (docs/vip-announce.md "The LoadBalancerBGPPeer object") */
export const BGP_PEER_DEFAULTS = {
  peerPort: 179,
  holdSeconds: 9,
  connectSeconds: 1,
  bfd: { receiveInterval: 100, transmitInterval: 100, detectMultiplier: 3 },
} as const;

const asn = z.number().int().min(1).max(4294967295);
/** Go time.Duration text (metav1.Duration's JSON form) */
const duration = z.string().regex(/^([0-9]+(\.[0-9]+)?(h|m|s|ms))+$/, 'a duration such as "9s" or "1m30s"');
/** standard community ASN:VALUE, or large community large:A:B:C (MetalLB's forms) */
const community = z
  .string()
  .regex(/^(\d{1,5}:\d{1,5}|large:\d{1,10}:\d{1,10}:\d{1,10})$/, "a community ASN:VALUE or large:A:B:C");
const ms = z.number().int().min(10).max(60000);

const FamilySchema = z.looseObject({
  /** added to every VIP route of this family sent to this peer */
  communities: z.array(community).optional(),
  /** LOCAL_PREF; only sent on an iBGP session (myASN = peerASN), RFC 4271 §5.1.5 */
  localPref: z.number().int().min(0).max(4294967295).optional(),
});
export type BgpFamilySettings = z.infer<typeof FamilySchema>;

export const LoadBalancerBGPPeerSchema = z.looseObject({
  apiVersion: z.literal(BGP_PEER_API_VERSION),
  kind: z.literal(BGP_PEER_KIND),
  metadata: ObjectMetaSchema.extend({ name: z.string().min(1) }),
  spec: z.looseObject({
    myASN: asn,
    /** exactly one of peerASN and dynamicASN */
    peerASN: asn.optional(),
    /** `internal`: the router's AS must equal myASN; `external`: must differ (BIRD `neighbor X internal|external`) */
    dynamicASN: z.enum(["internal", "external"]).optional(),
    /** the AS this router sees (MetalLB localASN; BIRD `local as`); myASN when absent */
    localASN: asn.optional(),
    peerAddress: z.string().min(1),
    peerPort: z.number().int().min(1).max(65535).optional(),
    /** this host's address on the session (BIRD `source address`); used only where the host has it */
    sourceAddress: z.string().optional(),
    holdTime: duration.optional(),
    keepaliveTime: duration.optional(),
    connectTime: duration.optional(),
    routerID: z.string().optional(),
    /** the LB hosts (Nodes) that peer with this router: any selector matching; all when empty */
    nodeSelectors: z.array(LabelSelectorSchema).optional(),
    /** TCP MD5 key (RFC 2385); never logged, never printed by `passlb plan` */
    password: z.string().optional(),
    /** a Secret of type kubernetes.io/basic-auth with key `password`, in passlb's namespace */
    passwordSecret: z.looseObject({ name: z.string().min(1), namespace: z.string().optional() }).optional(),
    /** the name of the MetalLB BFDProfile `bfd` was imported from (informational) */
    bfdProfile: z.string().optional(),
    bfd: z
      .looseObject({
        enabled: z.boolean().optional(),
        receiveInterval: ms.optional(),
        transmitInterval: ms.optional(),
        detectMultiplier: z.number().int().min(2).max(255).optional(),
        /** wait for the router to start BFD (BIRD `passive`) */
        passiveMode: z.boolean().optional(),
      })
      .optional(),
    /** RFC 4724 restarting speaker (BIRD `graceful restart on`); off by default: a dead LB host is withdrawn at once */
    enableGracefulRestart: z.boolean().optional(),
    /** the router is several hops away (BIRD `multihop 255`); eBGP only */
    ebgpMultiHop: z.boolean().optional(),
    /** the host VRF to peer from (BIRD `vrf`); needs the kernel's CONFIG_NET_VRF */
    vrf: z.string().optional(),
    /** carry IPv4 and IPv6 VIPs over this one session (both BIRD channels) */
    dualStackAddressFamily: z.boolean().optional(),
    /** accepted and ignored: MetalLB says it "is no longer used and has no effect" */
    disableMP: z.boolean().optional(),
    ipv4: FamilySchema.optional(),
    ipv6: FamilySchema.optional(),
  }),
});
export type LoadBalancerBGPPeer = z.infer<typeof LoadBalancerBGPPeerSchema>;

/** Go time.Duration text → seconds (fractions kept); undefined when it is not one. */
export function durationSeconds(text: string): number | undefined {
  const re = /([0-9]+(?:\.[0-9]+)?)(h|ms|m|s)/g;
  let total = 0;
  let consumed = 0;
  for (const m of text.matchAll(re)) {
    if (m.index !== consumed) return undefined;
    consumed += m[0].length;
    const unit = { h: 3600, m: 60, s: 1, ms: 0.001 }[m[2] as "h" | "m" | "s" | "ms"];
    total += Number(m[1]) * unit;
  }
  return consumed === text.length && consumed > 0 ? total : undefined;
}

export interface BgpPeerProblem {
  /** `LoadBalancerBGPPeer NAME` */
  readonly object: string;
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** What the schema cannot say: addresses, whole seconds, the hold time's RFC range. */
export function bgpPeerProblems(peer: LoadBalancerBGPPeer): BgpPeerProblem[] {
  const object = `${BGP_PEER_KIND} ${peer.metadata.name}`;
  const out: BgpPeerProblem[] = [];
  const at = (field: string, message: string) => out.push({ object, path: ["spec", field], message });
  const s = peer.spec;
  if (parseIp(s.peerAddress) === undefined) at("peerAddress", `"${s.peerAddress}" is not an IP address`);
  if (s.routerID !== undefined && parseIp(s.routerID)?.family !== "IPv4")
    at("routerID", `"${s.routerID}" is not an IPv4 address (a BGP identifier is 32 bits, RFC 6286)`);
  if (s.peerASN === undefined && s.dynamicASN === undefined)
    at("peerASN", "one of peerASN and dynamicASN is required");
  if (s.peerASN !== undefined && s.dynamicASN !== undefined)
    at("dynamicASN", "peerASN and dynamicASN are mutually exclusive");
  if (s.sourceAddress !== undefined && parseIp(s.sourceAddress) === undefined)
    at("sourceAddress", `"${s.sourceAddress}" is not an IP address`);
  if (s.sourceAddress !== undefined && parseIp(s.sourceAddress)?.family !== parseIp(s.peerAddress)?.family)
    at("sourceAddress", `${s.sourceAddress} is not of peerAddress ${s.peerAddress}'s family`);
  if (s.password !== undefined && s.passwordSecret !== undefined)
    at("password", "password and passwordSecret are mutually exclusive");
  if (s.password !== undefined) {
    const why = passwordProblem(s.password);
    if (why) at("password", why);
  }
  // MetalLB internal/config/config.go peerFromCR: "invalid ebgp-multihop parameter set for an ibgp peer"
  if (s.ebgpMultiHop === true && isInternal(s))
    at("ebgpMultiHop", "is for external peers: this session is iBGP (the AS numbers are equal)");
  // BIRD proto/bgp/bgp.c bgp_postconfig: "Multihop BGP with BFD requires specified local address"
  if (s.ebgpMultiHop === true && s.bfd?.enabled !== false && s.sourceAddress === undefined)
    at(
      "sourceAddress",
      "is required with ebgpMultiHop and BFD (BIRD's multihop BFD needs a local address); or set bfd.enabled false",
    );
  // Linux IFNAMSIZ is 16 with the NUL; BIRD strings carry no quote (conf/cf-lex.l)
  if (s.vrf !== undefined && s.vrf !== "" && !/^[A-Za-z0-9_.-]{1,15}$/.test(s.vrf))
    at("vrf", `"${s.vrf}" is not an interface name (1..15 of A-Z a-z 0-9 _ . -)`);
  const whole = (
    field: "holdTime" | "keepaliveTime" | "connectTime",
    ok: (n: number) => boolean,
    rule: string,
  ) => {
    const text = s[field];
    if (text === undefined) return;
    const n = durationSeconds(text);
    if (n === undefined || !Number.isInteger(n) || !ok(n)) at(field, `${text}: must be ${rule}`);
  };
  // RFC 4271 §4.2: the hold time is zero or at least three seconds
  whole(
    "holdTime",
    (n) => n === 0 || (n >= 3 && n <= 65535),
    "0s or 3s..65535s in whole seconds (RFC 4271 §4.2)",
  );
  whole("keepaliveTime", (n) => n >= 1 && n <= 65535, "1s..65535s in whole seconds");
  whole("connectTime", (n) => n >= 1 && n <= 65535, "1s..65535s in whole seconds");
  // keepalive alone: the hold time is three of it (MetalLB internal/config/config.go parseTimers)
  const keep = s.keepaliveTime === undefined ? undefined : durationSeconds(s.keepaliveTime);
  const hold = s.holdTime === undefined ? undefined : durationSeconds(s.holdTime);
  if (hold !== undefined && keep !== undefined && hold > 0 && keep > hold)
    at("keepaliveTime", `${s.keepaliveTime} is longer than the hold time (${hold}s)`);
  return out;
}

/** Whether the session is internal BGP (the router's AS equals ours). */
export function isInternal(s: LoadBalancerBGPPeer["spec"]): boolean {
  if (s.dynamicASN !== undefined) return s.dynamicASN === "internal";
  return (s.localASN ?? s.myASN) === s.peerASN;
}

/**
 * Why BIRD 2.0.12 cannot carry this TCP MD5 key, or undefined. Its config strings end at the
 * next `"` and cannot hold a newline (CZ-NIC/bird conf/cf-lex.l, no escapes), and the kernel
 * takes at most 80 bytes (TCP_MD5SIG_MAXKEYLEN, include/uapi/linux/tcp.h; BIRD:
 * "The password for TCP MD5 Signature is too long", sysdep/linux/sysio.h). The message never
 * contains the password.
 */
export function passwordProblem(password: string): string | undefined {
  if (password === "") return "is empty";
  if (/["\n\r\0]/.test(password))
    return "contains a double quote, a line break or a NUL: BIRD's configuration strings have no escapes, so it cannot carry this key; choose another";
  if (new TextEncoder().encode(password).length > 80)
    return "is longer than 80 bytes, the kernel's TCP MD5 key limit";
  return undefined;
}

/** Decodes one raw object: the peer, or its problems (each naming object and field). */
export function decodeBgpPeer(raw: unknown): { peer?: LoadBalancerBGPPeer; problems: BgpPeerProblem[] } {
  const name = (raw as { metadata?: { name?: unknown } })?.metadata?.name;
  const object = `${BGP_PEER_KIND} ${typeof name === "string" ? name : "<unnamed>"}`;
  const r = LoadBalancerBGPPeerSchema.safeParse(raw);
  if (!r.success)
    return {
      problems: r.error.issues.map((i) => ({
        object,
        path: i.path.filter((p): p is string | number => typeof p !== "symbol"),
        message: i.message,
      })),
    };
  const problems = bgpPeerProblems(r.data);
  return problems.length > 0 ? { problems } : { peer: r.data, problems: [] };
}

export function formatBgpPeerProblem(p: BgpPeerProblem): string {
  const path = p.path.map((x, i) => (typeof x === "number" ? `[${x}]` : i === 0 ? x : `.${x}`)).join("");
  return `${p.object}: ${path ? `${path}: ` : ""}${p.message}`;
}
