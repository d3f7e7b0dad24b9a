/**
 * `--peer-label`: the labelled Nodes as the announcer's peers, with their InternalIPs of
 * both families (announce/lb-peers.ts picks them per family).
 */
import type { PeerAddresses } from "../../../announce/announcer.ts";
import { lbPeersFromNodes, type PeerLabel } from "../../../announce/lb-peers.ts";
import type { Snapshot } from "../../../k8s/snapshot.ts";

export function labelledPeers(nodes: Snapshot["nodes"], label: PeerLabel): PeerAddresses {
  const v4 = lbPeersFromNodes(nodes, label, "IPv4");
  const v6 = lbPeersFromNodes(nodes, label, "IPv6");
  const out = new Map<string, { IPv4?: string; IPv6?: string }>();
  for (const name of [...new Set([...v4.keys(), ...v6.keys()])].sort()) {
    const a = v4.get(name);
    const b = v6.get(name);
    out.set(name, { ...(a === undefined ? {} : { IPv4: a }), ...(b === undefined ? {} : { IPv6: b }) });
  }
  return out;
}
