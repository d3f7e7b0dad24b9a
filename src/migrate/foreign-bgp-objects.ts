/**
 * The BGP objects of other implementations that `passlb import` reads beyond MetalLB's
 * BGPPeer, BGPAdvertisement and BFDProfile (foreign-objects.ts), as loose zod schemas (unknown
 * fields pass, and are reported by name as unsupported):
 * - MetalLB `metallb.io/v1beta1` Community (api/v1beta1/community_types.go: named aliases
 *   of community values);
 * - Cilium BGP control plane v2 `cilium.io/v2` (and `v2alpha1`) CiliumBGPClusterConfig,
 *   CiliumBGPPeerConfig, CiliumBGPAdvertisement (cilium/cilium
 *   pkg/k8s/apis/cilium.io/v2/bgp_cluster_types.go, bgp_peer_types.go, bgp_advert_types.go).
 * Pure data.
 */
import { z } from "zod";
import { LabelSelectorSchema, ObjectMetaSchema } from "../k8s/objects.ts";

const Named = ObjectMetaSchema.extend({ name: z.string().min(1) });

export const CommunitySchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("Community"),
  metadata: Named,
  spec: z
    .looseObject({
      communities: z.array(z.looseObject({ name: z.string(), value: z.string() })).optional(),
    })
    .default({}),
});
export type Community = z.infer<typeof CommunitySchema>;

export const CiliumBGPClusterConfigSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("CiliumBGPClusterConfig"),
  metadata: Named,
  spec: z.looseObject({
    nodeSelector: LabelSelectorSchema.optional(),
    bgpInstances: z.array(
      z.looseObject({
        name: z.string(),
        localASN: z.number().int().optional(),
        localPort: z.number().int().optional(),
        peers: z
          .array(
            z.looseObject({
              name: z.string(),
              peerAddress: z.string().optional(),
              peerASN: z.number().int().optional(),
              autoDiscovery: z.looseObject({}).optional(),
              peerConfigRef: z.looseObject({ name: z.string() }).optional(),
            }),
          )
          .optional(),
      }),
    ),
  }),
});
export type CiliumBGPClusterConfig = z.infer<typeof CiliumBGPClusterConfigSchema>;

export const CiliumBGPPeerConfigSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("CiliumBGPPeerConfig"),
  metadata: Named,
  spec: z
    .looseObject({
      transport: z
        .looseObject({ peerPort: z.number().int().optional(), localPort: z.number().int().optional() })
        .optional(),
      timers: z
        .looseObject({
          connectRetryTimeSeconds: z.number().int().optional(),
          holdTimeSeconds: z.number().int().optional(),
          keepAliveTimeSeconds: z.number().int().optional(),
        })
        .optional(),
      authSecretRef: z.string().optional(),
      gracefulRestart: z
        .looseObject({ enabled: z.boolean().optional(), restartTimeSeconds: z.number().int().optional() })
        .optional(),
      ebgpMultihop: z.number().int().optional(),
      families: z
        .array(
          z.looseObject({
            afi: z.string(),
            safi: z.string(),
            advertisements: z
              .looseObject({ matchLabels: z.record(z.string(), z.string()).optional() })
              .loose()
              .optional(),
          }),
        )
        .optional(),
    })
    .default({}),
});
export type CiliumBGPPeerConfig = z.infer<typeof CiliumBGPPeerConfigSchema>;

export const CiliumBGPAdvertisementSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("CiliumBGPAdvertisement"),
  metadata: Named,
  spec: z.looseObject({
    advertisements: z.array(
      z.looseObject({
        advertisementType: z.string(),
        service: z
          .looseObject({
            addresses: z.array(z.string()).optional(),
            aggregationLengthIPv4: z.number().int().optional(),
            aggregationLengthIPv6: z.number().int().optional(),
          })
          .optional(),
        selector: LabelSelectorSchema.optional(),
        attributes: z
          .looseObject({
            communities: z
              .looseObject({
                standard: z.array(z.string()).optional(),
                wellKnown: z.array(z.string()).optional(),
                large: z.array(z.string()).optional(),
              })
              .optional(),
            localPreference: z.number().int().optional(),
          })
          .optional(),
      }),
    ),
  }),
});
export type CiliumBGPAdvertisement = z.infer<typeof CiliumBGPAdvertisementSchema>;
