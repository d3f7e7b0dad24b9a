/**
 * Whether the wire agrees with the announcement (docs/vip-announce.md "Checked from the
 * wire"). Pure: what answered for a VIP (wire-answers.ts), which MAC belongs to which LB
 * host, and who should hold it in; a verdict out. The rule: exactly one MAC answers, and it
 * is an LB host's — normally the host the rendezvous ranking puts first (vip-owners.ts), or
 * the next one while that host cannot serve it (a failover, not a problem).
 *
 * The asking host's own kernel never answers its own request on the wire (a request sent
 * from a packet socket is not looped back to the host's ARP/NDP stack: see
 * `arping-holder.txt` in test/fixtures/wire/), so the host that holds the VIP counts its
 * own answer from the address on its interface and asks the wire for the others: a second
 * device answering is seen from the holder too. Problems (the `problem` label of
 * `passlb_announce_wire_problems`):
 *   - `duplicate_answer`: two or more MACs answer (a second host holding the VIP, a split
 *     VRRP, a device configured with the address);
 *   - `foreign_mac`: one MAC answers and it is none of the LB hosts';
 *   - `no_answer`: nobody answers (every LB host down or not holding it, a filter on the
 *     segment);
 *   - `bgp_not_exported` / `bgp_unexpected_export`: the BGP engine's counterpart
 *     (bgp/bird-export-check.ts), in the same report.
 * Does not ask (wire-checker.ts does).
 */
import type { ForeignSpeaker, VridRange } from "./vrrp-adverts.ts";
import type { WireAnswers } from "./wire-answers.ts";

export type WireProblem =
  | "duplicate_answer"
  | "foreign_mac"
  | "no_answer"
  | "bgp_not_exported"
  | "bgp_unexpected_export";

export const L2_PROBLEMS = ["duplicate_answer", "foreign_mac", "no_answer"] as const;
export const BGP_PROBLEMS = ["bgp_not_exported", "bgp_unexpected_export"] as const;

export interface WireVipCheck {
  readonly vip: string;
  /** null: the wire agrees */
  readonly problem: WireProblem | null;
  /** who answered (L2): each MAC with the LB host it belongs to, when known */
  readonly answers: readonly { readonly mac: string; readonly host?: string }[];
  /** the LB host whose MAC answered alone */
  readonly heldBy?: string;
  /** the host the ranking prefers */
  readonly preferred?: string;
  /** one line: `203.0.113.1: 2 answers: 5e:b5:… (lb-1), 86:df:… (unknown device)` */
  readonly message: string;
}

export interface L2VerdictInput {
  readonly vip: string;
  readonly answers: WireAnswers;
  /** this host's name and its MAC on the segment interface */
  readonly self: { readonly host: string; readonly mac: string };
  /** the VIP's address is on this host's interface now (this host's kernel answers) */
  readonly selfHolds: boolean;
  /** MAC (lower case) → LB host, learnt by asking for the peers' segment addresses */
  readonly hostMacs: ReadonlyMap<string, string>;
  readonly preferred?: string;
}

const named = (a: { mac: string; host?: string }) => `${a.mac} (${a.host ?? "unknown device"})`;

/** The verdict for one VIP; undefined when the tool could not ask (its error is reported apart). */
export function l2Verdict(input: L2VerdictInput): WireVipCheck | undefined {
  if (!input.answers.asked) return undefined;
  const selfMac = input.self.mac.toLowerCase();
  const macs = input.answers.macs.filter((m) => m !== selfMac);
  if (input.selfHolds) macs.unshift(selfMac);
  const hostOf = (mac: string) => (mac === selfMac ? input.self.host : input.hostMacs.get(mac));
  const answers = macs.map((mac) => {
    const host = hostOf(mac);
    return host === undefined ? { mac } : { mac, host };
  });
  const base = { vip: input.vip, answers, ...(input.preferred && { preferred: input.preferred }) };
  if (answers.length === 0)
    return { ...base, problem: "no_answer", message: `${input.vip}: no answer on the segment` };
  if (answers.length > 1)
    return {
      ...base,
      problem: "duplicate_answer",
      message: `${input.vip}: ${answers.length} answers: ${answers.map(named).join(", ")}`,
    };
  const only = answers[0]!;
  if (only.host === undefined)
    return {
      ...base,
      problem: "foreign_mac",
      message: `${input.vip}: answered by ${only.mac}, which is no LB host's`,
    };
  const moved =
    input.preferred !== undefined && only.host !== input.preferred
      ? ` (the ranking prefers ${input.preferred}: it cannot serve it now)`
      : "";
  return {
    ...base,
    problem: null,
    heldBy: only.host,
    message: `${input.vip}: answered by ${only.mac} (${only.host})${moved}`,
  };
}

/** The wire checks of one LB host, under `announce.wire` of its status (dashboard,
 * `/api/v1/state`, `kubectl passlb status`, metrics). */
export interface WireReport {
  /** ms since the epoch of the last round; null before the first */
  readonly checkedAt: number | null;
  readonly periodMs: number;
  /** L2: ARP/NDP per VIP; BGP: the export comparison per VIP */
  readonly vips: readonly WireVipCheck[];
  /** tools that could not run, birdc not answering */
  readonly errors: readonly string[];
  /** L2: VIPs whose changed verdict waits for its confirming round (wire-checker.ts) */
  readonly pending?: readonly string[];
  /** L2: VRRP speakers on our VIDs that are not our LB hosts (vrrp-watch.ts) */
  readonly vrrp?: {
    readonly watching: boolean;
    readonly interface: string;
    readonly range: VridRange;
    readonly foreign: readonly ForeignSpeaker[];
    readonly error?: string;
  };
}
