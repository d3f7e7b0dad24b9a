/**
 * `passlb import`, the decision: documents of MetalLB, Cilium, kube-vip, PureLB and OpenELB
 * (and the cluster's Services, Namespaces, Deployments, DaemonSets, ConfigMaps) in; the
 * LoadBalancerIPPools (and, from MetalLB's BGP mode, the LoadBalancerBGPPeers: convert-bgp.ts)
 * to apply, a per-Service report, the foreign controllers still running and the cut-over order out. Pure: the CLI reads files or the cluster and prints.
 *
 * The per-Service report runs the controller's own address management (plan/ipam.ts) over
 * the converted pools, so "addresses kept" is what `passlb controller` will do, not a guess.
 * Every problem names file, document, object and field; with any problem the result holds
 * no pools (nothing is written on error).
 */
import { parse as parseYaml } from "yaml";
import { decodeDocuments, type InputProblem, zodMessage } from "../k8s/decode.ts";
import type { Document } from "../k8s/documents.ts";
import { type LoadBalancerIPPool, LoadBalancerIPPoolSchema } from "../k8s/load-balancer-ip-pool.ts";
import type { Namespace } from "../k8s/objects.ts";
import { type NamespaceLabels, nameOnlyNamespaceLabels, poolAddressRange } from "../plan/address-pools.ts";
import { fromMetallbBgp, type ImportedBgpPeer } from "./convert-bgp.ts";
import {
  type Converted,
  fromCiliumPool,
  fromEip,
  fromKubeVipConfigMap,
  fromMetallbConfigMap,
  fromMetallbPool,
  fromServiceGroup,
  IMPORTED_FROM,
  type ImportedPool,
  type ImportNote,
} from "./convert-pools.ts";
import { cutoverOrder, type ForeignController, foreignControllers } from "./foreign-controllers.ts";
import {
  type BFDProfile,
  type BGPAdvertisement,
  type BGPPeer,
  type ConfigMap,
  FOREIGN_SCHEMAS,
  type ForeignKind,
  type IPAddressPool,
  type Workload,
} from "./foreign-objects.ts";
import { type ServiceReport, serviceReports } from "./service-report.ts";

export interface ImportResult {
  readonly pools: readonly ImportedPool[];
  /** from MetalLB BGPPeers (with their BFDProfiles and BGPAdvertisements) */
  readonly bgpPeers: readonly ImportedBgpPeer[];
  readonly problems: readonly InputProblem[];
  readonly notes: readonly ImportNote[];
  readonly services: readonly ServiceReport[];
  readonly controllers: readonly ForeignController[];
  /** the flags `passlb controller` (and `passlb lb`) need for these Services */
  readonly flags: readonly string[];
  readonly cutover: readonly string[];
}

const GROUPS: Readonly<Record<string, readonly string[]>> = {
  IPAddressPool: ["metallb.io/"],
  L2Advertisement: ["metallb.io/"],
  BGPAdvertisement: ["metallb.io/"],
  BGPPeer: ["metallb.io/"],
  BFDProfile: ["metallb.io/"],
  CiliumLoadBalancerIPPool: ["cilium.io/"],
  CiliumL2AnnouncementPolicy: ["cilium.io/"],
  ServiceGroup: ["purelb.io/"],
  Eip: ["network.kubesphere.io/"],
  ConfigMap: ["v1"],
  Deployment: ["apps/"],
  DaemonSet: ["apps/"],
};

interface Located {
  readonly doc: Document;
  readonly object: string;
}

export function importObjects(documents: readonly Document[]): ImportResult {
  const problems: InputProblem[] = [];
  const notes: ImportNote[] = [];
  const converted: { at: Located; result: Converted }[] = [];
  const workloads: Workload[] = [];
  const configMaps: ConfigMap[] = [];
  const kubeDocs: Document[] = [];
  const advertisements: { kind: string; object: string; spec: Record<string, unknown> }[] = [];
  let ciliumPools = 0;
  const bgp = {
    peers: [] as { at: Located; peer: BGPPeer }[],
    profiles: [] as BFDProfile[],
    advertisements: [] as BGPAdvertisement[],
    metallbPools: [] as IPAddressPool[],
  };
  /** passlb pools already in the input: used for the Service report, not printed again */
  const existing: LoadBalancerIPPool[] = [];

  for (const doc of documents) {
    const v = doc.value as {
      kind?: unknown;
      apiVersion?: unknown;
      metadata?: { name?: unknown; namespace?: unknown };
    };
    const kind = typeof v?.kind === "string" ? v.kind : undefined;
    const apiVersion = typeof v?.apiVersion === "string" ? v.apiVersion : "";
    if (kind === "Service" || kind === "Namespace") {
      kubeDocs.push(doc);
      continue;
    }
    if (kind === "LoadBalancerIPPool" && apiVersion === "passlb.io/v1alpha1") {
      const parsed = LoadBalancerIPPoolSchema.safeParse(doc.value);
      if (parsed.success) existing.push(parsed.data);
      else
        for (const i of parsed.error.issues)
          problems.push(
            problemAt(
              doc,
              `LoadBalancerIPPool ${String(v.metadata?.name ?? "<unnamed>")}`,
              i.path.filter((p): p is string | number => typeof p !== "symbol"),
              zodMessage(i),
            ),
          );
      continue;
    }
    if (!kind || !(kind in FOREIGN_SCHEMAS) || !GROUPS[kind]?.some((g) => apiVersion.startsWith(g))) continue;
    const name = typeof v.metadata?.name === "string" ? v.metadata.name : "<unnamed>";
    const ns = typeof v.metadata?.namespace === "string" ? `${v.metadata.namespace}/` : "";
    const object = `${kind} ${ns}${name}`;
    const parsed = FOREIGN_SCHEMAS[kind as ForeignKind].safeParse(doc.value);
    if (!parsed.success) {
      for (const i of parsed.error.issues) {
        const path = i.path.filter((p): p is string | number => typeof p !== "symbol");
        const missing = valueAt(doc.value, path) === undefined;
        problems.push(problemAt(doc, object, path, missing ? "is required" : zodMessage(i)));
      }
      continue;
    }
    const at = { doc, object };
    const o = parsed.data;
    switch (o.kind) {
      case "IPAddressPool":
        bgp.metallbPools.push(o);
        converted.push({ at, result: fromMetallbPool(o) });
        break;
      case "CiliumLoadBalancerIPPool":
        ciliumPools++;
        converted.push({ at, result: fromCiliumPool(o) });
        break;
      case "ServiceGroup":
        converted.push({ at, result: fromServiceGroup(o) });
        break;
      case "Eip":
        converted.push({ at, result: fromEip(o) });
        break;
      case "ConfigMap":
        configMaps.push(o);
        if (o.metadata.name === "kubevip") converted.push({ at, result: fromKubeVipConfigMap(o) });
        else if (o.data?.config !== undefined && /address-pools/.test(o.data.config))
          converted.push({ at, result: fromMetallbConfigMap(o, parseYaml) });
        break;
      case "Deployment":
      case "DaemonSet":
        workloads.push(o);
        break;
      case "BGPAdvertisement":
        bgp.advertisements.push(o);
        advertisements.push({ kind: o.kind, object, spec: o.spec as Record<string, unknown> });
        break;
      case "L2Advertisement":
      case "CiliumL2AnnouncementPolicy":
        advertisements.push({ kind: o.kind, object, spec: o.spec as Record<string, unknown> });
        break;
      case "BGPPeer":
        bgp.peers.push({ at, peer: o });
        break;
      case "BFDProfile":
        bgp.profiles.push(o);
        break;
    }
  }

  // pools: field problems, then duplicate names
  const pools: ImportedPool[] = [];
  const seen = new Map<string, string>();
  for (const { at, result } of converted) {
    for (const i of result.issues) problems.push(problemAt(at.doc, at.object, i.path, i.message));
    notes.push(...result.notes);
    if (result.issues.length > 0) continue;
    for (const p of result.pools) {
      const before = seen.get(p.metadata.name);
      if (before !== undefined) {
        problems.push(
          problemAt(
            at.doc,
            at.object,
            ["metadata", "name"],
            `pool "${p.metadata.name}" is also imported from ${before}; rename one`,
          ),
        );
        continue;
      }
      seen.set(p.metadata.name, at.object);
      pools.push(p);
    }
  }
  // MetalLB BGP mode → LoadBalancerBGPPeers
  const bgpPeers: ImportedBgpPeer[] = [];
  if (bgp.peers.length > 0 || bgp.advertisements.length > 0) {
    const result = fromMetallbBgp({
      peers: bgp.peers.map((p) => p.peer),
      profiles: bgp.profiles,
      advertisements: bgp.advertisements,
      pools: bgp.metallbPools.map((p) => p.metadata.name),
      ipv6Pools: bgp.metallbPools.some((p) => p.spec.addresses.some((a) => a.includes(":"))),
    });
    for (const { peer, issue } of result.issues) {
      const at = bgp.peers[peer]!.at;
      problems.push(problemAt(at.doc, at.object, issue.path, issue.message));
    }
    notes.push(...result.notes);
    const names = new Map<string, string>();
    for (const p of result.peers) {
      const from = p.metadata.annotations[IMPORTED_FROM]!;
      const before = names.get(p.metadata.name);
      if (before !== undefined) {
        const at = bgp.peers.find(
          (x) => `BGPPeer ${x.peer.metadata.namespace ?? "metallb-system"}/${x.peer.metadata.name}` === from,
        )!.at;
        problems.push(
          problemAt(
            at.doc,
            at.object,
            ["metadata", "name"],
            `LoadBalancerBGPPeer "${p.metadata.name}" is also imported from ${before}; rename one`,
          ),
        );
        continue;
      }
      names.set(p.metadata.name, from);
      bgpPeers.push(p);
    }
    if (bgp.peers.length === 0)
      notes.push({
        subject: "BGPAdvertisement",
        kind: "warning",
        message:
          "BGPAdvertisements without any BGPPeer in the input: nothing to announce to; add the BGPPeers",
      });
  }
  const decoded = decodeDocuments(kubeDocs);
  problems.push(...decoded.problems);
  notes.push(...announcementNotes(advertisements, pools), ...overlapNotes(pools));

  const services = decoded.snapshot.services.filter((s) => s.spec.type === "LoadBalancer");
  for (const e of existing)
    if (pools.some((p) => p.metadata.name === e.metadata.name))
      problems.push({
        source: "input",
        index: 0,
        object: `LoadBalancerIPPool ${e.metadata.name}`,
        path: ["metadata", "name"],
        message: "an existing passlb pool has the name of an imported one; rename one",
      });
  // namespace selectors see the input's Namespace labels, as the controller sees the cluster's
  const namespaces = decoded.snapshot.namespaces;
  const { reports, flags } = serviceReports(
    services,
    pools,
    existing,
    namespaces.length > 0 ? namespaceLabels(namespaces) : nameOnlyNamespaceLabels,
  );
  const controllers = foreignControllers(workloads, configMaps, ciliumPools);
  problems.sort((a, b) =>
    a.source < b.source ? -1 : a.source > b.source ? 1 : a.index - b.index || (a.item ?? 0) - (b.item ?? 0),
  );
  const failed = problems.length > 0;
  return {
    pools: failed ? [] : pools,
    bgpPeers: failed ? [] : bgpPeers,
    problems,
    notes,
    services: failed ? [] : reports,
    controllers,
    flags,
    cutover: cutoverOrder(controllers, flags, bgpPeers.length > 0 ? "bgp" : "l2"),
  };
}

function valueAt(value: unknown, path: readonly (string | number)[]): unknown {
  let v = value;
  for (const part of path) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Record<string | number, unknown>)[part];
  }
  return v;
}

function problemAt(doc: Document, object: string, path: (string | number)[], message: string): InputProblem {
  return {
    source: doc.source,
    index: doc.index,
    ...(doc.item !== undefined && { item: doc.item }),
    object,
    path,
    message,
  };
}

function namespaceLabels(namespaces: readonly Namespace[]): NamespaceLabels {
  const byName = new Map(namespaces.map((n) => [n.metadata.name ?? "", n.metadata.labels ?? {}]));
  return (ns) => ({ ...byName.get(ns), "kubernetes.io/metadata.name": ns });
}

function announcementNotes(
  ads: readonly { kind: string; object: string; spec: Record<string, unknown> }[],
  pools: readonly ImportedPool[],
): ImportNote[] {
  const notes: ImportNote[] = [];
  const announced = new Set<string>();
  let all = false;
  for (const a of ads) {
    const detail = Object.entries(a.spec)
      .filter(([, v]) => v !== undefined && !(Array.isArray(v) && v.length === 0))
      .map(([k, v]) => `${k} ${JSON.stringify(v)}`)
      .join(", ");
    // BGP: convert-bgp.ts carries its attributes into the LoadBalancerBGPPeers, field by field
    if (a.kind !== "BGPAdvertisement")
      notes.push({
        subject: a.object,
        kind: "not imported",
        message: `L2 announcement${detail ? ` (${detail})` : ""}: passlb's LB hosts announce every pool (passlb lb --announce l2 --interface …; docs/vip-announce.md); node selectors and per-Service preferences have no equivalent — passlb spreads traffic over every node instead of pinning a VIP to one`,
      });
    if (a.kind === "L2Advertisement" || a.kind === "BGPAdvertisement") {
      const names = (a.spec.ipAddressPools as string[] | undefined) ?? [];
      const selectors = (a.spec.ipAddressPoolSelectors as unknown[] | undefined) ?? [];
      if (names.length === 0 && selectors.length === 0) all = true;
      for (const n of names) announced.add(n);
      if (selectors.length > 0) all = true;
    }
  }
  if (ads.some((a) => a.kind === "L2Advertisement" || a.kind === "BGPAdvertisement") && !all)
    for (const p of pools)
      if (p.metadata.labels["passlb.io/imported-from"] === "metallb" && !announced.has(p.metadata.name))
        notes.push({
          subject: `LoadBalancerIPPool ${p.metadata.name}`,
          kind: "warning",
          message:
            "no L2Advertisement or BGPAdvertisement named this pool, so MetalLB never announced it; passlb will",
        });
  return notes;
}

function overlapNotes(pools: readonly ImportedPool[]): ImportNote[] {
  const notes: ImportNote[] = [];
  const ranges = pools.map((p) => ({
    name: p.metadata.name,
    ranges: p.spec.addresses.flatMap((a) => {
      const r = poolAddressRange(a);
      return r ? [r] : [];
    }),
  }));
  for (let i = 0; i < ranges.length; i++)
    for (let j = 0; j < i; j++) {
      const a = ranges[i]!;
      const b = ranges[j]!;
      if (
        a.ranges.some((x) =>
          b.ranges.some((y) => x.family === y.family && x.first <= y.last && y.first <= x.last),
        )
      )
        notes.push({
          subject: `LoadBalancerIPPool ${a.name}`,
          kind: "warning",
          message: `overlaps pool ${b.name}: the later pool gets passlb.io/Overlapping (an address is still never given twice)`,
        });
    }
  return notes;
}
