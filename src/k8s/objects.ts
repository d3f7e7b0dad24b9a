/**
 * The Kubernetes objects passlb reads, as zod schemas and the types inferred from them.
 *
 * Only the fields passlb uses are declared; every object is loose, so unknown fields pass
 * through untouched (a newer API server's objects still decode). Structural checks live
 * here (types, enums, integer ranges that never vary); rules that need the whole object or
 * configuration (node port range, dual-stack consistency, CIDRs) live in `validate.ts`.
 *
 * Field names and enum values: Kubernetes API reference, core/v1 and discovery.k8s.io/v1.
 */
import { z } from "zod";

const port = z.number().int().min(1).max(65535);
const labels = z.record(z.string(), z.string());

export const ObjectMetaSchema = z.looseObject({
  name: z.string().optional(),
  generateName: z.string().optional(),
  namespace: z.string().optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
  generation: z.number().optional(),
  creationTimestamp: z.string().optional(),
  deletionTimestamp: z.string().nullish(),
  labels: labels.nullish(),
  annotations: labels.nullish(),
  finalizers: z.array(z.string()).nullish(),
  ownerReferences: z
    .array(
      z.looseObject({
        apiVersion: z.string(),
        kind: z.string(),
        name: z.string(),
        uid: z.string(),
        controller: z.boolean().optional(),
        blockOwnerDeletion: z.boolean().optional(),
      }),
    )
    .nullish(),
});
export type ObjectMeta = z.infer<typeof ObjectMetaSchema>;

export const ProtocolSchema = z.enum(["TCP", "UDP", "SCTP"]);
export type Protocol = z.infer<typeof ProtocolSchema>;

export const IpFamilySchema = z.enum(["IPv4", "IPv6"]);

export const ServicePortSchema = z.looseObject({
  name: z.string().optional(),
  protocol: ProtocolSchema.default("TCP"),
  appProtocol: z.string().optional(),
  port,
  targetPort: z.union([z.number().int(), z.string()]).optional(),
  nodePort: z.number().int().min(0).max(65535).optional(),
});
export type ServicePort = z.infer<typeof ServicePortSchema>;

export const LoadBalancerIngressSchema = z.looseObject({
  ip: z.string().optional(),
  hostname: z.string().optional(),
  ipMode: z.enum(["VIP", "Proxy"]).optional(),
});

export const ConditionSchema = z.looseObject({
  type: z.string(),
  status: z.string(),
  reason: z.string().optional(),
  message: z.string().optional(),
  lastTransitionTime: z.string().optional(),
});

export const ServiceSchema = z.looseObject({
  apiVersion: z.literal("v1"),
  kind: z.literal("Service"),
  metadata: ObjectMetaSchema,
  spec: z.looseObject({
    type: z.enum(["ClusterIP", "NodePort", "LoadBalancer", "ExternalName"]).default("ClusterIP"),
    selector: labels.nullish(),
    ports: z.array(ServicePortSchema).default([]),
    clusterIP: z.string().optional(),
    clusterIPs: z.array(z.string()).optional(),
    externalTrafficPolicy: z.enum(["Cluster", "Local"]).optional(),
    internalTrafficPolicy: z.enum(["Cluster", "Local"]).optional(),
    healthCheckNodePort: z.number().int().min(0).max(65535).optional(),
    loadBalancerIP: z.string().optional(),
    loadBalancerClass: z.string().optional(),
    loadBalancerSourceRanges: z.array(z.string()).nullish(),
    allocateLoadBalancerNodePorts: z.boolean().optional(),
    ipFamilies: z.array(IpFamilySchema).optional(),
    ipFamilyPolicy: z.enum(["SingleStack", "PreferDualStack", "RequireDualStack"]).optional(),
    sessionAffinity: z.enum(["None", "ClientIP"]).optional(),
    sessionAffinityConfig: z
      .looseObject({
        clientIP: z.looseObject({ timeoutSeconds: z.number().int().optional() }).optional(),
      })
      .optional(),
    publishNotReadyAddresses: z.boolean().optional(),
    trafficDistribution: z.enum(["PreferClose", "PreferSameZone", "PreferSameNode"]).optional(),
    externalName: z.string().optional(),
  }),
  status: z
    .looseObject({
      loadBalancer: z.looseObject({ ingress: z.array(LoadBalancerIngressSchema).nullish() }).optional(),
      conditions: z.array(ConditionSchema).nullish(),
    })
    .optional(),
});
export type Service = z.infer<typeof ServiceSchema>;

export const TaintSchema = z.looseObject({
  key: z.string(),
  value: z.string().optional(),
  effect: z.enum(["NoSchedule", "PreferNoSchedule", "NoExecute"]),
});

export const NodeSchema = z.looseObject({
  apiVersion: z.literal("v1"),
  kind: z.literal("Node"),
  metadata: ObjectMetaSchema,
  spec: z
    .looseObject({
      taints: z.array(TaintSchema).nullish(),
      unschedulable: z.boolean().optional(),
      providerID: z.string().optional(),
      podCIDR: z.string().optional(),
      podCIDRs: z.array(z.string()).optional(),
    })
    .default({}),
  status: z
    .looseObject({
      addresses: z.array(z.looseObject({ type: z.string(), address: z.string() })).nullish(),
      conditions: z.array(ConditionSchema).nullish(),
    })
    .default({}),
});
export type Node = z.infer<typeof NodeSchema>;

export const ContainerPortSchema = z.looseObject({
  name: z.string().optional(),
  containerPort: port,
  protocol: ProtocolSchema.default("TCP"),
  hostPort: z.number().int().optional(),
});

const ContainerSchema = z.looseObject({
  name: z.string(),
  ports: z.array(ContainerPortSchema).nullish(),
  restartPolicy: z.string().optional(),
});

export const PodSchema = z.looseObject({
  apiVersion: z.literal("v1"),
  kind: z.literal("Pod"),
  metadata: ObjectMetaSchema,
  spec: z
    .looseObject({
      nodeName: z.string().optional(),
      hostname: z.string().optional(),
      subdomain: z.string().optional(),
      containers: z.array(ContainerSchema).default([]),
      initContainers: z.array(ContainerSchema).nullish(),
    })
    .default({ containers: [] }),
  status: z
    .looseObject({
      phase: z.string().optional(),
      podIP: z.string().optional(),
      podIPs: z.array(z.looseObject({ ip: z.string() })).nullish(),
      conditions: z.array(ConditionSchema).nullish(),
    })
    .default({}),
});
export type Pod = z.infer<typeof PodSchema>;

export const ObjectReferenceSchema = z.looseObject({
  kind: z.string().optional(),
  namespace: z.string().optional(),
  name: z.string().optional(),
  uid: z.string().optional(),
  resourceVersion: z.string().optional(),
});
export type ObjectReference = z.infer<typeof ObjectReferenceSchema>;

export const EndpointSchema = z.looseObject({
  addresses: z.array(z.string()),
  conditions: z
    .looseObject({
      ready: z.boolean().nullish(),
      serving: z.boolean().nullish(),
      terminating: z.boolean().nullish(),
    })
    .default({}),
  hostname: z.string().nullish(),
  targetRef: ObjectReferenceSchema.nullish(),
  nodeName: z.string().nullish(),
  zone: z.string().nullish(),
  hints: z
    .looseObject({
      forZones: z.array(z.looseObject({ name: z.string() })).nullish(),
      forNodes: z.array(z.looseObject({ name: z.string() })).nullish(),
    })
    .nullish(),
  deprecatedTopology: labels.nullish(),
});
export type Endpoint = z.infer<typeof EndpointSchema>;

export const EndpointPortSchema = z.looseObject({
  name: z.string().nullish(),
  protocol: ProtocolSchema.nullish(),
  port: z.number().int().nullish(),
  appProtocol: z.string().nullish(),
});
export type EndpointPort = z.infer<typeof EndpointPortSchema>;

export const EndpointSliceSchema = z.looseObject({
  apiVersion: z.literal("discovery.k8s.io/v1"),
  kind: z.literal("EndpointSlice"),
  metadata: ObjectMetaSchema,
  addressType: z.enum(["IPv4", "IPv6", "FQDN"]),
  endpoints: z.array(EndpointSchema).nullish(),
  ports: z.array(EndpointPortSchema).nullish(),
});
export type EndpointSlice = z.infer<typeof EndpointSliceSchema>;

const EndpointAddressSchema = z.looseObject({
  ip: z.string(),
  hostname: z.string().optional(),
  nodeName: z.string().nullish(),
  targetRef: ObjectReferenceSchema.nullish(),
});

export const EndpointsSchema = z.looseObject({
  apiVersion: z.literal("v1"),
  kind: z.literal("Endpoints"),
  metadata: ObjectMetaSchema,
  subsets: z
    .array(
      z.looseObject({
        addresses: z.array(EndpointAddressSchema).nullish(),
        notReadyAddresses: z.array(EndpointAddressSchema).nullish(),
        ports: z
          .array(
            z.looseObject({
              name: z.string().optional(),
              port,
              protocol: ProtocolSchema.default("TCP"),
              appProtocol: z.string().optional(),
            }),
          )
          .nullish(),
      }),
    )
    .nullish(),
});
export type Endpoints = z.infer<typeof EndpointsSchema>;

export const NamespaceSchema = z.looseObject({
  apiVersion: z.literal("v1"),
  kind: z.literal("Namespace"),
  metadata: ObjectMetaSchema,
});
export type Namespace = z.infer<typeof NamespaceSchema>;

export const LabelSelectorSchema = z.looseObject({
  matchLabels: labels.optional(),
  matchExpressions: z
    .array(
      z.looseObject({
        key: z.string(),
        operator: z.enum(["In", "NotIn", "Exists", "DoesNotExist"]),
        values: z.array(z.string()).optional(),
      }),
    )
    .optional(),
});
export type LabelSelector = z.infer<typeof LabelSelectorSchema>;

/**
 * MetalLB IPAddressPool `serviceAllocation` (metallb api/v1beta1/ipaddresspool_types.go):
 * a Service matches when it is in `namespaces` or its namespace matches any of
 * `namespaceSelectors` (either, when both are empty: every namespace) AND its labels match
 * any of `serviceSelectors` (every Service when empty). Lower `priority` first; 0 or unset last.
 */
export const PoolAllocationSchema = z.looseObject({
  priority: z.number().int().min(0).optional(),
  namespaces: z.array(z.string()).optional(),
  namespaceSelectors: z.array(LabelSelectorSchema).optional(),
  serviceSelectors: z.array(LabelSelectorSchema).optional(),
});
export type PoolAllocation = z.infer<typeof PoolAllocationSchema>;

export const PoolSchema = z.looseObject({
  name: z.string().min(1),
  addresses: z.array(z.string()).min(1),
  autoAssign: z.boolean().default(true),
  /** skip the network and broadcast addresses of IPv4 CIDRs (MetalLB's avoidBuggyIPs) */
  avoidBuggyIPs: z.boolean().default(false),
  namespaces: z.array(z.string()).optional(),
  serviceSelector: LabelSelectorSchema.optional(),
  /** skip the first and last address of every CIDR but /31, /32, /127 and /128 (Cilium's
   * `allowFirstLastIPs: No`) */
  reserveFirstLast: z.boolean().optional(),
  /** MetalLB's serviceAllocation: which Services the pool serves, and before which pools */
  allocation: PoolAllocationSchema.optional(),
  /** `portDisjoint`: Services with no sharing key share an IPv4 address when their port
   * numbers differ (kube-vip-cloud-provider's `allow-share`) */
  implicitSharing: z.enum(["none", "portDisjoint"]).optional(),
});
export type Pool = z.infer<typeof PoolSchema>;

export const PasslbConfigSchema = z.looseObject({
  apiVersion: z.literal("passlb.io/v1alpha1"),
  kind: z.literal("PasslbConfig"),
  metadata: ObjectMetaSchema,
  spec: z
    .looseObject({
      defaultClass: z.boolean().default(false),
      /** foreign loadBalancerClasses passlb serves as its own (`--accept-class`; docs/migrate.md) */
      acceptClasses: z.array(z.string().min(1)).default([]),
      pools: z.array(PoolSchema).default([]),
      zones: z
        .array(z.looseObject({ name: z.string().min(1), clientCIDRs: z.array(z.string()) }))
        .default([]),
      nodePortRange: z.string().default("30000-32767"),
      /** eTP Cluster: above this many eligible nodes a stable subset is used (GKE NetLB: 250) */
      clusterBackendLimit: z.number().int().min(1).default(250),
      /** eTP Local: at most this many backend nodes (GKE NetLB: 3000) */
      localBackendLimit: z.number().int().min(1).default(3000),
    })
    .default({
      defaultClass: false,
      acceptClasses: [],
      pools: [],
      zones: [],
      nodePortRange: "30000-32767",
      clusterBackendLimit: 250,
      localBackendLimit: 3000,
    }),
});
export type PasslbConfig = z.infer<typeof PasslbConfigSchema>;
export type PasslbConfigSpec = PasslbConfig["spec"];

export const KIND_SCHEMAS = {
  Service: ServiceSchema,
  Node: NodeSchema,
  Pod: PodSchema,
  EndpointSlice: EndpointSliceSchema,
  Endpoints: EndpointsSchema,
  Namespace: NamespaceSchema,
  PasslbConfig: PasslbConfigSchema,
} as const;
export type KnownKind = keyof typeof KIND_SCHEMAS;
