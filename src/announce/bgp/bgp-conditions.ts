/**
 * The conditions one LB host reports on each LoadBalancerBGPPeer and
 * LoadBalancerBGPAdvertisement (docs/vip-announce.md "Status"), under `status.hosts.<host>`
 * so that every host writes its own key and none overwrites another's. Pure: the host's
 * decided settings (bgp-peer-config.ts) and its speaker as read back in; the conditions out
 * (metav1.Condition fields but lastTransitionTime, which the writer keeps stable).
 *
 * LoadBalancerBGPPeer:
 * - `Accepted`: True (`Selected`) when the host runs a session for it; False with
 *   `NotSelected` (its nodeSelectors do not match this host) or `Refused` and the finding's
 *   words (a duplicate session, a password that cannot be used);
 * - `SessionEstablished`: the BGP state, BFD state and routes exported, or why it is down
 *   (for a session with a TCP MD5 key: that a wrong key keeps it down silently).
 * LoadBalancerBGPAdvertisement:
 * - `Accepted`: True (`Applied`, with what was not applied), False (`Refused`, why), or True
 *   with `NotSelected` when its nodeSelectors leave this host out.
 */
import type { BgpPeerConfig } from "./bgp-peer-config.ts";
import type { SpeakerState } from "./bgp-types.ts";

export interface BgpCondition {
  readonly type: "Accepted" | "SessionEstablished";
  readonly status: "True" | "False" | "Unknown";
  readonly reason: string;
  readonly message: string;
}

export interface BgpObjectConditions {
  readonly kind: "LoadBalancerBGPPeer" | "LoadBalancerBGPAdvertisement";
  readonly name: string;
  readonly conditions: readonly BgpCondition[];
}

export function bgpConditions(input: {
  /** every decoded LoadBalancerBGPPeer and LoadBalancerBGPAdvertisement name */
  readonly peers: readonly string[];
  readonly advertisements: readonly string[];
  readonly config: BgpPeerConfig;
  /** BIRD protocol name per selected peer name (bird-config.ts peerProtocolNames) */
  readonly protocols: ReadonlyMap<string, string>;
  readonly speaker: SpeakerState;
}): BgpObjectConditions[] {
  const out: BgpObjectConditions[] = [];
  for (const name of [...input.peers].sort())
    out.push({ kind: "LoadBalancerBGPPeer", name, conditions: peerConditions(name, input) });
  for (const name of [...input.advertisements].sort()) {
    const v = input.config.advertisements.find((a) => a.name === name);
    const notHere = v?.messages.some((m) => m.startsWith("spec.nodeSelectors: this host is not selected"));
    const accepted: BgpCondition = !v
      ? { type: "Accepted", status: "True", reason: "Applied", message: "" }
      : !v.accepted
        ? { type: "Accepted", status: "False", reason: "Refused", message: v.messages.join("; ") }
        : notHere
          ? {
              type: "Accepted",
              status: "True",
              reason: "NotSelected",
              message: "its nodeSelectors leave this host out",
            }
          : { type: "Accepted", status: "True", reason: "Applied", message: v.messages.join("; ") };
    out.push({ kind: "LoadBalancerBGPAdvertisement", name, conditions: [accepted] });
  }
  return out;
}

function peerConditions(name: string, input: Parameters<typeof bgpConditions>[0]): BgpCondition[] {
  const subject = `LoadBalancerBGPPeer ${name}`;
  const findings = input.config.findings.filter((f) => f.subject === subject);
  if (!input.config.selected.includes(name)) {
    const refusal = findings.find(
      (f) => f.code === "bgp_peer_duplicate" || f.code === "bgp_password_unavailable",
    );
    return [
      refusal
        ? { type: "Accepted", status: "False", reason: "Refused", message: refusal.message }
        : {
            type: "Accepted",
            status: "False",
            reason: "NotSelected",
            message: "its nodeSelectors do not match this host",
          },
    ];
  }
  const accepted: BgpCondition = {
    type: "Accepted",
    status: "True",
    reason: "Selected",
    message: findings.map((f) => f.message).join("; "),
  };
  const protocol = input.protocols.get(name);
  const session = input.speaker.sessions.find((s) => s.name === protocol);
  if (!input.speaker.running || !session)
    return [
      accepted,
      {
        type: "SessionEstablished",
        status: "Unknown",
        reason: "SpeakerNotAnswering",
        message: input.speaker.findings.join("; "),
      },
    ];
  const bfd = input.speaker.bfd.find((b) => b.peer === session.peer)?.state;
  const detail = `${session.state}${bfd ? `, BFD ${bfd}` : ""}, ${session.exported} route(s) exported`;
  return [
    accepted,
    session.established
      ? { type: "SessionEstablished", status: "True", reason: "Established", message: detail }
      : {
          type: "SessionEstablished",
          status: "False",
          reason: session.state,
          message: `${detail}${session.lastError ? `: ${session.lastError}` : ""}`,
        },
  ];
}
