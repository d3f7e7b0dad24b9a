/**
 * LoadBalancerBGPPeer (`passlb.io/v1alpha1`, cluster-scoped, plural `loadbalancerbgppeers`,
 * short name `lbbgppeer`): one router the LB hosts open a BGP session to, with the session's
 * settings, its BFD timing and what is advertised to it per address family. `passlb lb
 * --announce bgp` in Kubernetes mode reads these instead of the `--bgp-*` flags
 * (docs/vip-announce.md "The LoadBalancerBGPPeer object"); `passlb plan` reads them from
 * manifests; the CRD YAML in deploy/crd-loadbalancerbgppeers.yaml is written from this shape.
 *
 * Field names and meanings are MetalLB's, so that its objects import field for field
 * (`passlb import`, src/migrate/convert-bgp.ts):
 * - session: BGPPeer `myASN`, `peerASN`, `peerAddress`, `peerPort`, `holdTime`,
 *   `keepaliveTime`, `connectTime`, `routerID`, `nodeSelectors`
 *   (metallb/metallb api/v1beta2/bgppeer_types.go BGPPeerSpec);
 * - `bfd`: BFDProfile `receiveInterval`, `transmitInterval`, `detectMultiplier`, inline
 *   instead of a named profile (api/v1beta1/bfdprofile_types.go BFDProfileSpec; same
 *   bounds, 10..60000 ms and 2..255), plus `enabled`;
 * - `ipv4` / `ipv6`: BGPAdvertisement `communities` and `localPref`, per family
 *   (api/v1beta1/bgpadvertisement_types.go BGPAdvertisementSpec). No aggregationLength:
 *   passlb announces host routes (/32, /128) only, each from the hosts that can serve it.
 *
 * Defaults are passlb's (specs/scale-out.md §E), not MetalLB's: hold time 9 s (MetalLB 90 s),
 * BFD on at 100 ms × 3 (MetalLB: no BFD without a profile), connect retry 1 s.
 * Durations are Go `time.Duration` strings as in metav1.Duration ("9s", "1m30s").
 *
 * This module decodes (zod, with paths in errors) and checks what the schema cannot (an IP
 * address, whole seconds); it does not pick the peers of a host (announce/bgp/bgp-peer-config.ts).
 */
import { z } from "zod";
import { parseIp } from "../net/ip.ts";
import { LabelSelectorSchema, ObjectMetaSchema } from "./objects.ts";

export const BGP_PEER_GROUP = "passlb.io";
export const BGP_PEER_API_VERSION = `${BGP_PEER_GROUP}/v1alpha1`;
export const BGP_PEER_PLURAL = "loadbalancerbgppeers";
export const BGP_PEER_KIND = "LoadBalancerBGPPeer";

/** passlb's defaults (specs/scale-out.md §E.2, §E.3; docs/vip-announce.md) */
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
    peerASN: asn,
    peerAddress: z.string().min(1),
    peerPort: z.number().int().min(1).max(65535).optional(),
    holdTime: duration.optional(),
    keepaliveTime: duration.optional(),
    connectTime: duration.optional(),
    routerID: z.string().optional(),
    /** the LB hosts (Nodes) that peer with this router: any selector matching; all when empty */
    nodeSelectors: z.array(LabelSelectorSchema).optional(),
    bfd: z
      .looseObject({
        enabled: z.boolean().optional(),
        receiveInterval: ms.optional(),
        transmitInterval: ms.optional(),
        detectMultiplier: z.number().int().min(2).max(255).optional(),
      })
      .optional(),
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
  const hold = s.holdTime === undefined ? BGP_PEER_DEFAULTS.holdSeconds : durationSeconds(s.holdTime);
  const keep = s.keepaliveTime === undefined ? undefined : durationSeconds(s.keepaliveTime);
  if (hold !== undefined && keep !== undefined && hold > 0 && keep > hold)
    at("keepaliveTime", `${s.keepaliveTime} is longer than the hold time (${hold}s)`);
  return out;
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
