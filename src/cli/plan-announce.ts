/**
 * `passlb plan --announce l2|bgp`: what tells plan the announcement mode and the LB hosts,
 * and the per-VIP view built from it (docs/plan.md "Announcement"). The same flags as
 * `passlb lb`: `--peers name=address,…` (the LB hosts and their segment addresses) or
 * `--peer-label key[=value]` (every Node of the input carrying the label is an LB host, at
 * its InternalIPs, with its labels). In BGP mode the LoadBalancerBGPPeer objects of the input
 * say which hosts peer with which router (their nodeSelectors against the hosts' Node labels);
 * with none, every host is taken to announce to its `--bgp-peer` routers.
 *
 * Wiring and validation (messages name the flag, or file, object and field); the decision is
 * src/announce/announce-plan.ts.
 */
import type { Command } from "commander";
import {
  type AnnouncePlanInput,
  announcePlan,
  type LbHost,
  type VipAnnouncePlan,
} from "../announce/announce-plan.ts";
import { lbPeersFromNodes, parsePeerLabel } from "../announce/lb-peers.ts";
import type { Document } from "../k8s/documents.ts";
import {
  BGP_PEER_API_VERSION,
  BGP_PEER_KIND,
  decodeBgpPeer,
  formatBgpPeerProblem,
  type LoadBalancerBGPPeer,
} from "../k8s/load-balancer-bgp-peer.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { parsePeers } from "./lb-announce.ts";

export interface PlanAnnounceFlags {
  announce?: string;
  peers?: string[];
  peerLabel?: string;
}

export function addPlanAnnounceOptions(command: Command): void {
  command
    .option("--announce <mode>", "also show which LB hosts announce each VIP and why: l2 or bgp")
    .option(
      "--peers <list>",
      "with --announce: the LB hosts as name=address,… (as passlb lb --peers); repeatable",
      (v: string, p: string[]) => [...p, v],
      [],
    )
    .option(
      "--peer-label <key[=value]>",
      "with --announce: every Node of the input with this label is an LB host",
    );
}

/** undefined without --announce; else the input of announce-plan.ts, or the error message. */
export function planAnnounceFrom(
  flags: PlanAnnounceFlags,
  snapshot: Snapshot,
  documents: readonly Document[],
): Omit<AnnouncePlanInput, "plans"> | string | undefined {
  const peersGiven = (flags.peers ?? []).length > 0;
  if (flags.announce === undefined) {
    if (peersGiven || flags.peerLabel !== undefined) return "--peers and --peer-label need --announce l2|bgp";
    return undefined;
  }
  if (flags.announce !== "l2" && flags.announce !== "bgp")
    return `--announce must be l2 or bgp (got "${flags.announce}")`;
  if (peersGiven === (flags.peerLabel !== undefined))
    return "--announce needs the LB hosts: --peers name=address,… or --peer-label key[=value] (one of them)";
  const labelsOf = (name: string) => snapshot.nodes.find((n) => n.metadata.name === name)?.metadata.labels;
  const hosts: LbHost[] = [];
  if (peersGiven) {
    const parsed = parsePeers(flags.peers ?? []);
    if (typeof parsed === "string") return parsed;
    for (const [name, addresses] of [...parsed].sort(([a], [b]) => a.localeCompare(b))) {
      const labels = labelsOf(name);
      hosts.push({ name, addresses, ...(labels && { labels: { ...labels } as Record<string, string> }) });
    }
  } else {
    const label = parsePeerLabel(flags.peerLabel!);
    if (!label) return "--peer-label must be key or key=value";
    const v4 = lbPeersFromNodes(snapshot.nodes, label, "IPv4");
    const v6 = lbPeersFromNodes(snapshot.nodes, label, "IPv6");
    for (const name of [...new Set([...v4.keys(), ...v6.keys()])].sort()) {
      const labels = labelsOf(name) ?? {};
      hosts.push({
        name,
        addresses: {
          ...(v4.has(name) && { IPv4: v4.get(name)! }),
          ...(v6.has(name) && { IPv6: v6.get(name)! }),
        },
        labels: { ...labels } as Record<string, string>,
      });
    }
    if (hosts.length === 0)
      return `--peer-label ${flags.peerLabel}: no Node of the input carries it (with an InternalIP)`;
  }
  if (flags.announce === "l2") return { mode: "l2", hosts };
  const bgpPeers: LoadBalancerBGPPeer[] = [];
  const problems: string[] = [];
  for (const d of documents) {
    const v = d.value as { kind?: unknown; apiVersion?: unknown };
    if (v?.kind !== BGP_PEER_KIND || v.apiVersion !== BGP_PEER_API_VERSION) continue;
    const r = decodeBgpPeer(d.value);
    if (r.peer) bgpPeers.push(r.peer);
    for (const p of r.problems)
      problems.push(`${d.source} (document ${d.index}): ${formatBgpPeerProblem(p)}`);
  }
  if (problems.length > 0) return `the input has ${problems.length} problem(s):\n  ${problems.join("\n  ")}`;
  return { mode: "bgp", hosts, bgpPeers };
}

/** The announcement of every VIP, looked up per Service for the views. */
export function announceView(input: Omit<AnnouncePlanInput, "plans">, plans: readonly LoadBalancerPlan[]) {
  const vips = announcePlan({ ...input, plans });
  return {
    mode: input.mode,
    forService: (service: string): VipAnnouncePlan[] => vips.filter((v) => v.services.includes(service)),
  };
}
