/**
 * The objects of other load-balancer implementations that `passlb import` reads, as loose
 * zod schemas: only the fields the conversion uses are declared, unknown ones pass. Field
 * names and versions (docs/migrate.md "`passlb import`"):
 *   - MetalLB `metallb.io/v1beta1` IPAddressPool, L2Advertisement, BGPAdvertisement,
 *     BFDProfile, `v1beta1`/`v1beta2` BGPPeer (api/v1beta1/ipaddresspool_types.go,
 *     bgpadvertisement_types.go, bfdprofile_types.go, api/v1beta2/bgppeer_types.go), and the ≤ v0.12
 *     ConfigMap `config` (website/content/configuration/migration_to_crds.md);
 *   - Cilium `cilium.io/v2` and `v2alpha1` CiliumLoadBalancerIPPool, `v2alpha1`
 *     CiliumL2AnnouncementPolicy (pkg/k8s/apis/cilium.io/v2{,alpha1}/*);
 *   - kube-vip-cloud-provider ConfigMap `kubevip` (pkg/provider/loadBalancer.go);
 *   - PureLB `purelb.io/v1`, `v2` ServiceGroup (pkg/apis/purelb/v2/types.go);
 *   - OpenELB `network.kubesphere.io/v1alpha2` Eip (api/v1alpha2/eip_types.go);
 *   - Deployments, DaemonSets and ConfigMaps, read only to detect running controllers.
 * Pure data.
 */
import { z } from "zod";
import { LabelSelectorSchema, ObjectMetaSchema } from "../k8s/objects.ts";

const Named = ObjectMetaSchema.extend({ name: z.string().min(1) });
const strings = z.array(z.string());

export const IPAddressPoolSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("IPAddressPool"),
  metadata: Named,
  spec: z.looseObject({
    addresses: z.array(z.string().min(1)).min(1),
    autoAssign: z.boolean().optional(),
    avoidBuggyIPs: z.boolean().optional(),
    serviceAllocation: z
      .looseObject({
        priority: z.number().int().min(0).optional(),
        namespaces: strings.optional(),
        namespaceSelectors: z.array(LabelSelectorSchema).optional(),
        serviceSelectors: z.array(LabelSelectorSchema).optional(),
      })
      .optional(),
  }),
});
export type IPAddressPool = z.infer<typeof IPAddressPoolSchema>;

const AdvertisementSpec = z
  .looseObject({
    ipAddressPools: strings.optional(),
    ipAddressPoolSelectors: z.array(LabelSelectorSchema).optional(),
    nodeSelectors: z.array(LabelSelectorSchema).optional(),
    interfaces: strings.optional(),
    serviceSelectors: z.array(LabelSelectorSchema).optional(),
  })
  .default({});

export const L2AdvertisementSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("L2Advertisement"),
  metadata: Named,
  spec: AdvertisementSpec,
});
/** metallb/metallb api/v1beta1/bgpadvertisement_types.go BGPAdvertisementSpec */
export const BGPAdvertisementSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("BGPAdvertisement"),
  metadata: Named,
  spec: z
    .looseObject({
      ipAddressPools: strings.optional(),
      ipAddressPoolSelectors: z.array(LabelSelectorSchema).optional(),
      nodeSelectors: z.array(LabelSelectorSchema).optional(),
      aggregationLength: z.number().int().optional(),
      aggregationLengthV6: z.number().int().optional(),
      localPref: z.number().int().min(0).optional(),
      communities: strings.optional(),
      peers: strings.optional(),
      serviceSelectors: z.array(LabelSelectorSchema).optional(),
    })
    .default({}),
});
export type BGPAdvertisement = z.infer<typeof BGPAdvertisementSchema>;

/** metallb/metallb api/v1beta2/bgppeer_types.go BGPPeerSpec (v1beta1 has the same names) */
export const BGPPeerSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("BGPPeer"),
  metadata: Named,
  spec: z.looseObject({
    myASN: z.number().int().min(0).max(4294967295),
    peerASN: z.number().int().min(0).max(4294967295).optional(),
    dynamicASN: z.string().optional(),
    localASN: z.number().int().min(0).max(4294967295).optional(),
    peerAddress: z.string().optional(),
    interface: z.string().optional(),
    sourceAddress: z.string().optional(),
    peerPort: z.number().int().optional(),
    holdTime: z.string().optional(),
    keepaliveTime: z.string().optional(),
    connectTime: z.string().optional(),
    routerID: z.string().optional(),
    nodeSelectors: z.array(LabelSelectorSchema).optional(),
    password: z.string().optional(),
    passwordSecret: z
      .looseObject({ name: z.string().optional(), namespace: z.string().optional() })
      .optional(),
    bfdProfile: z.string().optional(),
    enableGracefulRestart: z.boolean().optional(),
    ebgpMultiHop: z.boolean().optional(),
    vrf: z.string().optional(),
    disableMP: z.boolean().optional(),
    dualStackAddressFamily: z.boolean().optional(),
  }),
});
export type BGPPeer = z.infer<typeof BGPPeerSchema>;

/** metallb/metallb api/v1beta1/bfdprofile_types.go BFDProfileSpec */
export const BFDProfileSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("BFDProfile"),
  metadata: Named,
  spec: z
    .looseObject({
      receiveInterval: z.number().int().optional(),
      transmitInterval: z.number().int().optional(),
      detectMultiplier: z.number().int().optional(),
      echoInterval: z.number().int().optional(),
      echoMode: z.boolean().optional(),
      passiveMode: z.boolean().optional(),
      minimumTtl: z.number().int().optional(),
    })
    .default({}),
});
export type BFDProfile = z.infer<typeof BFDProfileSchema>;

/** The ≤ v0.12 `config` key of MetalLB's ConfigMap (YAML in a string). */
export const MetallbLegacyConfigSchema = z.looseObject({
  "address-pools": z
    .array(
      z.looseObject({
        name: z.string().min(1),
        protocol: z.enum(["layer2", "bgp"]),
        addresses: z.array(z.string().min(1)).min(1),
        "auto-assign": z.boolean().optional(),
        "avoid-buggy-ips": z.boolean().optional(),
      }),
    )
    .default([]),
  peers: z.array(z.looseObject({})).optional(),
  "bgp-communities": z.record(z.string(), z.string()).optional(),
});

const Block = z.looseObject({
  cidr: z.string().optional(),
  start: z.string().optional(),
  stop: z.string().optional(),
});

export const CiliumPoolSchema = z.looseObject({
  apiVersion: z.enum(["cilium.io/v2", "cilium.io/v2alpha1"]),
  kind: z.literal("CiliumLoadBalancerIPPool"),
  metadata: Named,
  spec: z.looseObject({
    blocks: z.array(Block).optional(),
    /** deprecated (1.13) name of blocks */
    cidrs: z.array(Block).optional(),
    serviceSelector: LabelSelectorSchema.optional(),
    disabled: z.boolean().optional(),
    allowFirstLastIPs: z.enum(["Yes", "No"]).optional(),
  }),
});
export type CiliumPool = z.infer<typeof CiliumPoolSchema>;

export const CiliumL2PolicySchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("CiliumL2AnnouncementPolicy"),
  metadata: Named,
  spec: z
    .looseObject({
      serviceSelector: LabelSelectorSchema.optional(),
      nodeSelector: LabelSelectorSchema.optional(),
      interfaces: strings.optional(),
      loadBalancerIPs: z.boolean().optional(),
      externalIPs: z.boolean().optional(),
    })
    .default({}),
});

const PureLbAddressPool = z.looseObject({
  pool: z.string().min(1),
  subnet: z.string().optional(),
  aggregation: z.string().optional(),
});

export const ServiceGroupSchema = z.looseObject({
  apiVersion: z.enum(["purelb.io/v1", "purelb.io/v2"]),
  kind: z.literal("ServiceGroup"),
  metadata: Named,
  spec: z.looseObject({
    local: z
      .looseObject({
        // v1: one pool in `pool`; v2: v4pool(s)/v6pool(s)
        pool: z.string().optional(),
        v6pool: z.union([z.string(), PureLbAddressPool]).optional(),
        v4pool: PureLbAddressPool.optional(),
        v4pools: z.array(PureLbAddressPool).optional(),
        v6pools: z.array(PureLbAddressPool).optional(),
      })
      .optional(),
    remote: z.looseObject({}).optional(),
    external: z.looseObject({}).optional(),
    netbox: z.looseObject({}).optional(),
    namespaces: strings.optional(),
    enforceNamespaces: z.boolean().optional(),
  }),
});
export type ServiceGroup = z.infer<typeof ServiceGroupSchema>;

export const EipSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.literal("Eip"),
  metadata: Named,
  spec: z.looseObject({
    address: z.string().min(1),
    protocol: z.enum(["bgp", "layer2", "vip"]).optional(),
    interface: z.string().optional(),
    disable: z.boolean().optional(),
    priority: z.number().int().optional(),
    namespaces: strings.optional(),
    namespaceSelector: z.record(z.string(), z.string()).optional(),
  }),
});
export type Eip = z.infer<typeof EipSchema>;

export const ConfigMapSchema = z.looseObject({
  apiVersion: z.literal("v1"),
  kind: z.literal("ConfigMap"),
  metadata: Named,
  data: z.record(z.string(), z.string()).nullish(),
});
export type ConfigMap = z.infer<typeof ConfigMapSchema>;

const Container = z.looseObject({
  name: z.string().optional(),
  image: z.string().optional(),
  env: z.array(z.looseObject({ name: z.string(), value: z.string().optional() })).nullish(),
  args: strings.nullish(),
});

/** Deployment or DaemonSet (apps/v1): enough to recognise a controller and its replicas. */
export const WorkloadSchema = z.looseObject({
  apiVersion: z.string(),
  kind: z.enum(["Deployment", "DaemonSet"]),
  metadata: Named,
  spec: z
    .looseObject({
      replicas: z.number().int().optional(),
      template: z
        .looseObject({
          spec: z.looseObject({ containers: z.array(Container).default([]) }).default({ containers: [] }),
        })
        .optional(),
    })
    .default({}),
});
export type Workload = z.infer<typeof WorkloadSchema>;

/** The kinds `passlb import` converts or inspects, by kind. */
export const FOREIGN_SCHEMAS = {
  IPAddressPool: IPAddressPoolSchema,
  L2Advertisement: L2AdvertisementSchema,
  BGPAdvertisement: BGPAdvertisementSchema,
  BGPPeer: BGPPeerSchema,
  BFDProfile: BFDProfileSchema,
  CiliumLoadBalancerIPPool: CiliumPoolSchema,
  CiliumL2AnnouncementPolicy: CiliumL2PolicySchema,
  ServiceGroup: ServiceGroupSchema,
  Eip: EipSchema,
  ConfigMap: ConfigMapSchema,
  Deployment: WorkloadSchema,
  DaemonSet: WorkloadSchema,
} as const;
export type ForeignKind = keyof typeof FOREIGN_SCHEMAS;
