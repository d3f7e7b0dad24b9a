/**
 * LoadBalancerBGPAdvertisement (`passlb.io/v1alpha1`, cluster-scoped like the peers and
 * pools, plural `loadbalancerbgpadvertisements`, short name `lbbgpadv`): which VIPs go to
 * which LoadBalancerBGPPeers, from which LB hosts, as which prefix, with which attributes
 * (docs/vip-announce.md "The LoadBalancerBGPAdvertisement object"). Field names and meanings
 * are MetalLB's BGPAdvertisementSpec (metallb/metallb api/v1beta1/bgpadvertisement_types.go):
 *
 * - `aggregationLength` (default 32) / `aggregationLengthV6` (default 128): the VIP is
 *   announced as VIP masked to that length; one route however many VIPs fall in it, present
 *   on a host exactly while at least one of them is announced by that host;
 * - `localPref` (0: not set; iBGP only), `communities` (`A:B` with 16-bit parts,
 *   `large:A:B:C` with 32-bit parts, or an RFC 1997 / RFC 8326 well-known name);
 * - `ipAddressPools` ∪ `ipAddressPoolSelectors` (both empty: every pool), `nodeSelectors`
 *   (empty: every LB host), `peers` (LoadBalancerBGPPeer names; empty: every peer).
 *
 * MetalLB's Community objects (named aliases) have no passlb equivalent: `passlb import`
 * resolves each alias to its value and keeps the names in the annotation
 * `passlb.io/community-aliases`. Decoding only; which routes a host exports is
 * announce/bgp/bgp-advertisements.ts.
 */
import { z } from "zod";
import { LabelSelectorSchema, ObjectMetaSchema } from "./objects.ts";

export const BGP_ADVERTISEMENT_API_VERSION = "passlb.io/v1alpha1";
export const BGP_ADVERTISEMENT_PLURAL = "loadbalancerbgpadvertisements";
export const BGP_ADVERTISEMENT_KIND = "LoadBalancerBGPAdvertisement";

/** RFC 1997 §"Well-known Communities", RFC 3765 (NOPEER), RFC 7999 (BLACKHOLE), RFC 8326 (GRACEFUL_SHUTDOWN) */
export const WELL_KNOWN_COMMUNITIES: Readonly<Record<string, string>> = {
  "graceful-shutdown": "65535:0",
  "accept-own": "65535:1",
  blackhole: "65535:666",
  "no-export": "65535:65281",
  "no-advertise": "65535:65282",
  "no-export-subconfed": "65535:65283",
  "no-peer": "65535:65284",
};

const u16 = "(6553[0-5]|655[0-2]\\d|65[0-4]\\d\\d|6[0-4]\\d{3}|[1-5]\\d{4}|\\d{1,4})";
const u32 = "\\d{1,10}";
export const COMMUNITY_PATTERN = new RegExp(`^(${u16}:${u16}|large:${u32}:${u32}:${u32})$`);

/** A community as its literal value (`A:B` or `large:A:B:C`), or undefined when it is not one. */
export function communityValue(text: string): string | undefined {
  const known = WELL_KNOWN_COMMUNITIES[text];
  if (known) return known;
  if (!COMMUNITY_PATTERN.test(text)) return undefined;
  if (
    text.startsWith("large:") &&
    text
      .split(":")
      .slice(1)
      .some((n) => Number(n) > 4294967295)
  )
    return undefined;
  return text;
}

const community = z.string().refine((c) => communityValue(c) !== undefined, {
  message: `a community A:B (0..65535 each), large:A:B:C (0..4294967295 each) or one of ${Object.keys(WELL_KNOWN_COMMUNITIES).join(", ")}`,
});

export const LoadBalancerBGPAdvertisementSchema = z.looseObject({
  apiVersion: z.literal(BGP_ADVERTISEMENT_API_VERSION),
  kind: z.literal(BGP_ADVERTISEMENT_KIND),
  metadata: ObjectMetaSchema.extend({ name: z.string().min(1) }),
  spec: z
    .looseObject({
      aggregationLength: z.number().int().min(0).max(32).optional(),
      aggregationLengthV6: z.number().int().min(0).max(128).optional(),
      localPref: z.number().int().min(0).max(4294967295).optional(),
      communities: z.array(community).optional(),
      ipAddressPools: z.array(z.string().min(1)).optional(),
      ipAddressPoolSelectors: z.array(LabelSelectorSchema).optional(),
      nodeSelectors: z.array(LabelSelectorSchema).optional(),
      peers: z.array(z.string().min(1)).optional(),
    })
    .default({}),
});
export type LoadBalancerBGPAdvertisement = z.infer<typeof LoadBalancerBGPAdvertisementSchema>;

export interface BgpAdvertisementProblem {
  readonly object: string;
  readonly path: readonly (string | number)[];
  readonly message: string;
}

/** Decodes one raw object; duplicate communities are refused as MetalLB does (internal/config/config.go). */
export function decodeBgpAdvertisement(raw: unknown): {
  advertisement?: LoadBalancerBGPAdvertisement;
  problems: BgpAdvertisementProblem[];
} {
  const name = (raw as { metadata?: { name?: unknown } })?.metadata?.name;
  const object = `${BGP_ADVERTISEMENT_KIND} ${typeof name === "string" ? name : "<unnamed>"}`;
  const r = LoadBalancerBGPAdvertisementSchema.safeParse(raw);
  if (!r.success)
    return {
      problems: r.error.issues.map((i) => ({
        object,
        path: i.path.filter((p): p is string | number => typeof p !== "symbol"),
        message: i.message,
      })),
    };
  const problems: BgpAdvertisementProblem[] = [];
  const seen = new Map<string, number>();
  (r.data.spec.communities ?? []).forEach((c, i) => {
    const v = communityValue(c)!;
    const before = seen.get(v);
    if (before !== undefined)
      problems.push({
        object,
        path: ["spec", "communities", i],
        message: `duplicate of communities[${before}] (${v})`,
      });
    else seen.set(v, i);
  });
  return problems.length > 0 ? { problems } : { advertisement: r.data, problems };
}
