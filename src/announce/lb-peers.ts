/**
 * The LB hosts of a segment from the cluster's Nodes (docs/vip-announce.md "Peers"): every
 * Node carrying the LB-host label (`key` or `key=value`) is a peer, at its InternalIP of the
 * family asked for (both, for the IPv4 and IPv6 VRRP instances). This is how Kubernetes mode (and standalone mode with Nodes in the
 * manifests, `--peer-label`) gets the peer list instead of `--peers`. Pure: Nodes in, a
 * name → address map out; a Node without such an address is left out.
 */
import type { Node } from "../k8s/objects.ts";

export interface PeerLabel {
  readonly key: string;
  readonly value?: string;
}

export function parsePeerLabel(text: string): PeerLabel | undefined {
  const [key, value, ...rest] = text.split("=");
  if (!key || rest.length > 0 || !/^([a-z0-9.-]+\/)?[A-Za-z0-9_.-]{1,63}$/.test(key)) return undefined;
  return value === undefined ? { key } : { key, value };
}

export function lbPeersFromNodes(
  nodes: readonly Node[],
  label: PeerLabel,
  family: "IPv4" | "IPv6" = "IPv4",
): Map<string, string> {
  const peers = new Map<string, string>();
  for (const n of [...nodes].sort((a, b) => (a.metadata.name ?? "").localeCompare(b.metadata.name ?? ""))) {
    const name = n.metadata.name;
    if (name === undefined) continue;
    const v = n.metadata.labels?.[label.key];
    if (v === undefined || (label.value !== undefined && v !== label.value)) continue;
    const address = (n.status.addresses ?? []).find(
      (a) => a.type === "InternalIP" && a.address.includes(":") === (family === "IPv6"),
    )?.address;
    if (address !== undefined) peers.set(name, address);
  }
  return peers;
}
