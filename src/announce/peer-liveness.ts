/**
 * Who is live among the LB hosts of one segment, from the heartbeats heard so far
 * (docs/vip-announce.md "Failure detection" and "Split brain"). A peer is live while its
 * last heartbeat is younger than `deadAfterMs` and it has not said goodbye since; this host
 * is live while its segment link is up. A host may hold VIPs only while it also has a
 * quorum: at least `quorum` live hosts counting itself (default: a strict majority of the
 * configured hosts when there are three or more, 1 for one or two — two hosts can never
 * keep a majority after one fails, see the docs for what that costs).
 *
 * Pure: heard times and `now` in, the live set out. It does not open sockets or read the
 * clock (heartbeat.ts and vip-announcer.ts do).
 */

export interface PeerHeard {
  /** `now` (ms, same clock) of the last heartbeat from this peer */
  readonly at: number;
  /** the peer said it is leaving (graceful shutdown) in that last message */
  readonly bye: boolean;
}

export interface LivenessInput {
  readonly self: string;
  /** every configured LB host of the segment, this one included */
  readonly hosts: readonly string[];
  readonly heard: ReadonlyMap<string, PeerHeard>;
  readonly now: number;
  readonly deadAfterMs: number;
  /** this host's segment link is up (carrier); false → it holds nothing */
  readonly linkUp: boolean;
  /** this host is shutting down: it no longer counts itself */
  readonly leaving?: boolean;
  /** override of the default quorum */
  readonly quorum?: number;
}

export interface Liveness {
  /** live hosts (sorted), this one included when it may hold VIPs */
  readonly live: readonly string[];
  readonly quorum: number;
  /** false: this host must release every VIP (link down, leaving, or in a minority) */
  readonly mayHold: boolean;
  readonly reason: "ok" | "link_down" | "leaving" | "no_quorum";
}

export function defaultQuorum(hostCount: number): number {
  return hostCount >= 3 ? Math.floor(hostCount / 2) + 1 : 1;
}

export function peerLiveness(input: LivenessInput): Liveness {
  const hosts = [...new Set([...input.hosts, input.self])].sort();
  const quorum = input.quorum ?? defaultQuorum(hosts.length);
  const peers = hosts.filter(
    (h) =>
      h !== input.self &&
      ((heard) => heard !== undefined && !heard.bye && input.now - heard.at < input.deadAfterMs)(
        input.heard.get(h),
      ),
  );
  const reason = !input.linkUp
    ? "link_down"
    : input.leaving
      ? "leaving"
      : peers.length + 1 < quorum
        ? "no_quorum"
        : "ok";
  const mayHold = reason === "ok";
  return {
    live: mayHold ? [...peers, input.self].sort() : peers,
    quorum,
    mayHold,
    reason,
  };
}
