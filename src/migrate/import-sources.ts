/**
 * `passlb import`, step one: the table of foreign sources (`SOURCES`: kind → API groups,
 * schema, and where the decoded object goes) and the sort of every input document by it
 * (`collect`). Each tool's conversion lives in a file of its own (convert-pools.ts,
 * metallb-bgp.ts, cilium-bgp.ts); import-result.ts composes the steps. Pure.
 */
import { parse as parseYaml } from "yaml";
import { type InputProblem, problemAt } from "../k8s/decode.ts";
import type { Document } from "../k8s/documents.ts";
import { type LoadBalancerIPPool, LoadBalancerIPPoolSchema } from "../k8s/load-balancer-ip-pool.ts";
import { zodMessage } from "../k8s/schema-problems.ts";
import {
  type Converted,
  fromCiliumPool,
  fromEip,
  fromKubeVipConfigMap,
  fromMetallbConfigMap,
  fromMetallbPool,
  fromServiceGroup,
} from "./convert-pools.ts";
import {
  type CiliumBGPAdvertisement,
  CiliumBGPAdvertisementSchema,
  type CiliumBGPClusterConfig,
  CiliumBGPClusterConfigSchema,
  type CiliumBGPPeerConfig,
  CiliumBGPPeerConfigSchema,
  type Community,
  CommunitySchema,
} from "./foreign-bgp-objects.ts";
import {
  type BFDProfile,
  type BGPAdvertisement,
  type BGPPeer,
  type ConfigMap,
  FOREIGN_SCHEMAS,
  type Workload,
} from "./foreign-objects.ts";

export interface Located {
  readonly doc: Document;
  readonly object: string;
}

/** What the documents hold, sorted by the table below. */
export interface Collected {
  readonly problems: InputProblem[];
  readonly converted: { at: Located; result: Converted }[];
  readonly workloads: Workload[];
  readonly configMaps: ConfigMap[];
  readonly kubeDocs: Document[];
  readonly advertisements: { kind: string; object: string; spec: Record<string, unknown> }[];
  readonly existing: LoadBalancerIPPool[];
  /** every foreign BGP object by its subject (`BGPPeer ns/name`), to place its problems */
  readonly located: Map<string, Located>;
  readonly metallb: {
    peers: BGPPeer[];
    profiles: BFDProfile[];
    advertisements: BGPAdvertisement[];
    communities: Community[];
  };
  readonly cilium: {
    clusters: CiliumBGPClusterConfig[];
    peerConfigs: CiliumBGPPeerConfig[];
    advertisements: CiliumBGPAdvertisement[];
  };
  ciliumPools: number;
}

interface Source {
  readonly groups: readonly string[];
  // biome-ignore lint/suspicious/noExplicitAny: each entry's schema decodes what its collect takes
  readonly schema: { safeParse(v: unknown): any };
  // biome-ignore lint/suspicious/noExplicitAny: the object its schema decoded
  readonly collect: (o: any, at: Located, c: Collected) => void;
}

const subject = (
  o: { kind: string; metadata: { name: string; namespace?: string | undefined } },
  dflt: string,
) => `${o.kind} ${o.metadata.namespace ?? dflt}/${o.metadata.name}`;

/** The foreign sources passlb import reads: kind → API groups, schema, and where it goes. */
const SOURCES: Readonly<Record<string, Source>> = {
  IPAddressPool: {
    groups: ["metallb.io/"],
    schema: FOREIGN_SCHEMAS.IPAddressPool,
    collect: (o, at, c) => c.converted.push({ at, result: fromMetallbPool(o) }),
  },
  L2Advertisement: {
    groups: ["metallb.io/"],
    schema: FOREIGN_SCHEMAS.L2Advertisement,
    collect: (o, at, c) => c.advertisements.push({ kind: o.kind, object: at.object, spec: o.spec }),
  },
  BGPAdvertisement: {
    groups: ["metallb.io/"],
    schema: FOREIGN_SCHEMAS.BGPAdvertisement,
    collect: (o, at, c) => {
      c.metallb.advertisements.push(o);
      c.located.set(subject(o, "metallb-system"), at);
      c.advertisements.push({ kind: o.kind, object: at.object, spec: o.spec });
    },
  },
  BGPPeer: {
    groups: ["metallb.io/"],
    schema: FOREIGN_SCHEMAS.BGPPeer,
    collect: (o, at, c) => {
      c.metallb.peers.push(o);
      c.located.set(subject(o, "metallb-system"), at);
    },
  },
  BFDProfile: {
    groups: ["metallb.io/"],
    schema: FOREIGN_SCHEMAS.BFDProfile,
    collect: (o, _at, c) => c.metallb.profiles.push(o),
  },
  Community: {
    groups: ["metallb.io/"],
    schema: CommunitySchema,
    collect: (o, _at, c) => c.metallb.communities.push(o),
  },
  CiliumLoadBalancerIPPool: {
    groups: ["cilium.io/"],
    schema: FOREIGN_SCHEMAS.CiliumLoadBalancerIPPool,
    collect: (o, at, c) => {
      c.ciliumPools++;
      c.converted.push({ at, result: fromCiliumPool(o) });
    },
  },
  CiliumL2AnnouncementPolicy: {
    groups: ["cilium.io/"],
    schema: FOREIGN_SCHEMAS.CiliumL2AnnouncementPolicy,
    collect: (o, at, c) => c.advertisements.push({ kind: o.kind, object: at.object, spec: o.spec }),
  },
  CiliumBGPClusterConfig: {
    groups: ["cilium.io/"],
    schema: CiliumBGPClusterConfigSchema,
    collect: (o, at, c) => {
      c.cilium.clusters.push(o);
      c.located.set(`CiliumBGPClusterConfig ${o.metadata.name}`, at);
    },
  },
  CiliumBGPPeerConfig: {
    groups: ["cilium.io/"],
    schema: CiliumBGPPeerConfigSchema,
    collect: (o, at, c) => {
      c.cilium.peerConfigs.push(o);
      c.located.set(`CiliumBGPPeerConfig ${o.metadata.name}`, at);
    },
  },
  CiliumBGPAdvertisement: {
    groups: ["cilium.io/"],
    schema: CiliumBGPAdvertisementSchema,
    collect: (o, at, c) => {
      c.cilium.advertisements.push(o);
      c.located.set(`CiliumBGPAdvertisement ${o.metadata.name}`, at);
    },
  },
  ServiceGroup: {
    groups: ["purelb.io/"],
    schema: FOREIGN_SCHEMAS.ServiceGroup,
    collect: (o, at, c) => c.converted.push({ at, result: fromServiceGroup(o) }),
  },
  Eip: {
    groups: ["network.kubesphere.io/"],
    schema: FOREIGN_SCHEMAS.Eip,
    collect: (o, at, c) => c.converted.push({ at, result: fromEip(o) }),
  },
  ConfigMap: {
    groups: ["v1"],
    schema: FOREIGN_SCHEMAS.ConfigMap,
    collect: (o, at, c) => {
      c.configMaps.push(o);
      if (o.metadata.name === "kubevip") c.converted.push({ at, result: fromKubeVipConfigMap(o) });
      else if (o.data?.config !== undefined && /address-pools/.test(o.data.config))
        c.converted.push({ at, result: fromMetallbConfigMap(o, parseYaml) });
    },
  },
  Deployment: {
    groups: ["apps/"],
    schema: FOREIGN_SCHEMAS.Deployment,
    collect: (o, _at, c) => c.workloads.push(o),
  },
  DaemonSet: {
    groups: ["apps/"],
    schema: FOREIGN_SCHEMAS.DaemonSet,
    collect: (o, _at, c) => c.workloads.push(o),
  },
};

export /** Sorts every document by the SOURCES table; decodes passlb's own pools in the input. */
function collect(documents: readonly Document[]): Collected {
  const c: Collected = {
    problems: [],
    converted: [],
    workloads: [],
    configMaps: [],
    kubeDocs: [],
    advertisements: [],
    existing: [],
    located: new Map(),
    metallb: { peers: [], profiles: [], advertisements: [], communities: [] },
    cilium: { clusters: [], peerConfigs: [], advertisements: [] },
    ciliumPools: 0,
  };
  for (const doc of documents) {
    const v = doc.value as {
      kind?: unknown;
      apiVersion?: unknown;
      metadata?: { name?: unknown; namespace?: unknown };
    };
    const kind = typeof v?.kind === "string" ? v.kind : undefined;
    const apiVersion = typeof v?.apiVersion === "string" ? v.apiVersion : "";
    const name = typeof v.metadata?.name === "string" ? v.metadata.name : "<unnamed>";
    if (kind === "Service" || kind === "Namespace") {
      c.kubeDocs.push(doc);
      continue;
    }
    if (kind === "LoadBalancerIPPool" && apiVersion === "passlb.io/v1alpha1") {
      const parsed = LoadBalancerIPPoolSchema.safeParse(doc.value);
      if (parsed.success) c.existing.push(parsed.data);
      else
        for (const i of parsed.error.issues)
          c.problems.push(problemAt(doc, `LoadBalancerIPPool ${name}`, pathOf(i.path), zodMessage(i)));
      continue;
    }
    const source = kind === undefined ? undefined : SOURCES[kind];
    if (!source?.groups.some((g) => apiVersion.startsWith(g))) continue;
    const ns = typeof v.metadata?.namespace === "string" ? `${v.metadata.namespace}/` : "";
    const at = { doc, object: `${kind} ${ns}${name}` };
    const parsed = source.schema.safeParse(doc.value);
    if (!parsed.success) {
      for (const i of parsed.error.issues) {
        const path = pathOf(i.path);
        const missing = valueAt(doc.value, path) === undefined;
        c.problems.push(problemAt(doc, at.object, path, missing ? "is required" : zodMessage(i)));
      }
      continue;
    }
    source.collect(parsed.data, at, c);
  }
  return c;
}

const pathOf = (path: readonly PropertyKey[]) =>
  path.filter((p): p is string | number => typeof p !== "symbol");

function valueAt(value: unknown, path: readonly (string | number)[]): unknown {
  let v = value;
  for (const part of path) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Record<string | number, unknown>)[part];
  }
  return v;
}
