/**
 * Which sessions a new configuration will restart, and why, so the restart is logged before
 * `birdc configure` does it (docs/vip-announce.md "Changes and session resets"). Pure.
 *
 * BIRD 2.0.12 compares a BGP protocol's options on reconfiguration and restarts the protocol
 * when any differs (CZ-NIC/bird proto/bgp/bgp.c bgp_reconfigure, the memcmp over struct
 * bgp_config up to `password`, plus the password string): neighbour, ASNs, port, source
 * address, multihop, timers, graceful restart, router id, VRF, password, and an added or
 * removed channel (the families). Not a restart: the `bfd` options (applied in place by
 * bgp_update_bfd) and the export filters (nest/proto.c channel_reconfigure reloads the
 * channel: routes are re-sent, the session stays up). Passwords are compared, never shown.
 */
import type { BgpPeer, BgpSettings } from "./bgp-types.ts";
import { peerProtocolNames } from "./bird-config.ts";

export interface SessionReset {
  /** BIRD protocol name */
  readonly protocol: string;
  /** the LoadBalancerBGPPeer, when it came from one */
  readonly source?: string;
  /** what changed (field names of the LoadBalancerBGPPeer; `password` without its value) */
  readonly changed: readonly string[];
}

/** BgpPeer fields that are protocol options, by the LoadBalancerBGPPeer field they come from. */
const OPTIONS: readonly [keyof BgpPeer, string][] = [
  ["address", "peerAddress"],
  ["asn", "peerASN"],
  ["dynamicAsn", "dynamicASN"],
  ["localAsn", "localASN/myASN"],
  ["port", "peerPort"],
  ["sourceAddress", "sourceAddress"],
  ["multihop", "ebgpMultiHop"],
  ["holdSeconds", "holdTime"],
  ["keepaliveSeconds", "keepaliveTime"],
  ["connectRetrySeconds", "connectTime"],
  ["gracefulRestart", "enableGracefulRestart"],
  ["routerId", "routerID"],
  ["vrf", "vrf"],
  ["password", "password"],
  ["dualStack", "dualStackAddressFamily"],
];

export function sessionResets(before: BgpSettings, after: BgpSettings): SessionReset[] {
  const oldNames = peerProtocolNames(before.peers);
  const newNames = peerProtocolNames(after.peers);
  const out: SessionReset[] = [];
  newNames.forEach((name, i) => {
    const j = oldNames.indexOf(name);
    if (j < 0) return; // a new session: nothing to reset
    const a = before.peers[j]!;
    const b = after.peers[i]!;
    const changed = OPTIONS.filter(([k]) => a[k] !== b[k]).map(([, field]) => field);
    const hold = (p: BgpPeer, s: BgpSettings) => p.holdSeconds ?? s.holdSeconds;
    if (!changed.includes("holdTime") && hold(a, before) !== hold(b, after)) changed.push("holdTime");
    if (changed.length > 0) out.push({ protocol: name, ...(b.source && { source: b.source }), changed });
  });
  return out;
}
