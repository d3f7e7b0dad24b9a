/**
 * `passlb import`, the decision: documents of MetalLB, Cilium, kube-vip, PureLB and OpenELB
 * (and the cluster's Services, Namespaces, Deployments, DaemonSets, ConfigMaps) in; the
 * LoadBalancerIPPools, and from BGP modes the LoadBalancerBGPPeers and
 * LoadBalancerBGPAdvertisements (metallb-bgp.ts, cilium-bgp.ts), to apply; a per-Service
 * report, a per-field account of every BGP setting (bgp-field-report.ts), the foreign
 * controllers still running and the cut-over order out. Pure: the CLI reads files or the
 * cluster and prints.
 *
 * The input is sorted by one table of foreign sources (`SOURCES`: kind → API groups, schema,
 * where it goes); each tool's conversion lives in a file of its own. The per-Service report
 * runs the controller's own address management (plan/ipam.ts) over the converted pools, so
 * "addresses kept" is what `passlb controller` will do, not a guess. Every problem names file,
 * document, object and field; with any problem the result holds no objects (nothing is
 * written on error).
 */
import { decodeDocuments, type InputProblem, problemAt } from "../k8s/decode.ts";
import type { Document } from "../k8s/documents.ts";
import type { Namespace } from "../k8s/objects.ts";
import { type NamespaceLabels, nameOnlyNamespaceLabels, poolAddressRange } from "../plan/address-pools.ts";
import type { FieldOutcome } from "./bgp-field-report.ts";
import { fromCiliumBgp } from "./cilium-bgp.ts";
import type { ImportedPool, ImportNote } from "./convert-pools.ts";
import { cutoverOrder, type ForeignController, foreignControllers } from "./foreign-controllers.ts";
import { type Collected, collect } from "./import-sources.ts";
import { type BgpConversion, fromMetallbBgp, type ImportedBgpObject } from "./metallb-bgp.ts";
import { type ServiceReport, serviceReports } from "./service-report.ts";

export interface ImportResult {
  readonly pools: readonly ImportedPool[];
  /** LoadBalancerBGPPeers from MetalLB BGPPeers (with their BFDProfiles) and Cilium BGP peers */
  readonly bgpPeers: readonly ImportedBgpObject[];
  /** LoadBalancerBGPAdvertisements from MetalLB BGPAdvertisements and CiliumBGPAdvertisements */
  readonly bgpAdvertisements: readonly ImportedBgpObject[];
  /** every BGP field's outcome; `unsupported` ones make the import lossy */
  readonly bgpFields: readonly FieldOutcome[];
  readonly problems: readonly InputProblem[];
  readonly notes: readonly ImportNote[];
  readonly services: readonly ServiceReport[];
  readonly controllers: readonly ForeignController[];
  /** the flags `passlb controller` (and `passlb lb`) need for these Services */
  readonly flags: readonly string[];
  readonly cutover: readonly string[];
}

export function importObjects(documents: readonly Document[]): ImportResult {
  const c = collect(documents);
  const notes: ImportNote[] = [];
  const pools = convertedPools(c, notes);
  const bgp = convertedBgp(c, notes);
  const decoded = decodeDocuments(c.kubeDocs);
  const problems = c.problems;
  problems.push(...decoded.problems);
  notes.push(...announcementNotes(c.advertisements, pools), ...overlapNotes(pools));
  const services = decoded.snapshot.services.filter((s) => s.spec.type === "LoadBalancer");
  for (const e of c.existing)
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
    c.existing,
    namespaces.length > 0 ? namespaceLabels(namespaces) : nameOnlyNamespaceLabels,
  );
  const controllers = foreignControllers(c.workloads, c.configMaps, c.ciliumPools);
  problems.sort((a, b) =>
    a.source < b.source ? -1 : a.source > b.source ? 1 : a.index - b.index || (a.item ?? 0) - (b.item ?? 0),
  );
  const failed = problems.length > 0;
  return {
    pools: failed ? [] : pools,
    bgpPeers: failed ? [] : bgp.peers,
    bgpAdvertisements: failed ? [] : bgp.advertisements,
    bgpFields: bgp.fields,
    problems,
    notes,
    services: failed ? [] : reports,
    controllers,
    flags,
    cutover: cutoverOrder(controllers, flags, bgp.peers.length > 0 ? "bgp" : "l2"),
  };
}

/** The converted pools: field problems, then duplicate names. */
function convertedPools(c: Collected, notes: ImportNote[]): ImportedPool[] {
  const pools: ImportedPool[] = [];
  const seen = new Map<string, string>();
  for (const { at, result } of c.converted) {
    for (const i of result.issues) c.problems.push(problemAt(at.doc, at.object, i.path, i.message));
    notes.push(...result.notes);
    if (result.issues.length > 0) continue;
    for (const p of result.pools) {
      const before = seen.get(p.metadata.name);
      if (before !== undefined) {
        c.problems.push(
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
  return pools;
}

/** MetalLB's and Cilium's BGP objects → LoadBalancerBGPPeers and LoadBalancerBGPAdvertisements. */
function convertedBgp(
  c: Collected,
  notes: ImportNote[],
): Pick<BgpConversion, "peers" | "advertisements" | "fields"> {
  const parts: BgpConversion[] = [];
  const m = c.metallb;
  if (m.peers.length + m.advertisements.length + m.communities.length > 0) parts.push(fromMetallbBgp(m));
  if (m.peers.length === 0 && m.advertisements.length > 0)
    notes.push({
      subject: "BGPAdvertisement",
      kind: "warning",
      message: "BGPAdvertisements without any BGPPeer in the input: nothing to announce to; add the BGPPeers",
    });
  const ci = c.cilium;
  if (ci.clusters.length + ci.peerConfigs.length + ci.advertisements.length > 0)
    parts.push(fromCiliumBgp(ci));
  const out = {
    peers: [] as ImportedBgpObject[],
    advertisements: [] as ImportedBgpObject[],
    fields: [] as FieldOutcome[],
  };
  const names = new Map<string, string>();
  for (const part of parts) {
    out.fields.push(...part.fields);
    for (const { subject: from, issue } of part.issues) {
      const at = c.located.get(from);
      c.problems.push(
        at
          ? problemAt(at.doc, at.object, issue.path, issue.message)
          : { source: "input", index: 0, object: from, path: issue.path, message: issue.message },
      );
    }
    for (const [list, into] of [
      [part.peers, out.peers],
      [part.advertisements, out.advertisements],
    ] as const)
      for (const o of list) {
        const key = `${o.kind} ${o.metadata.name}`;
        const from = o.metadata.annotations["passlb.io/imported-from"] ?? "";
        const before = names.get(key);
        if (before !== undefined) {
          const at = c.located.get(from);
          const message = `${key} is also imported from ${before}; rename one`;
          c.problems.push(
            at
              ? problemAt(at.doc, at.object, ["metadata", "name"], message)
              : { source: "input", index: 0, object: from, path: ["metadata", "name"], message },
          );
          continue;
        }
        names.set(key, from);
        into.push(o);
      }
  }
  return out;
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
    // BGP: metallb-bgp.ts converts BGPAdvertisements field by field
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
