/**
 * Parses what `birdc` prints (BIRD 2.0.x text; there is no JSON output) into the speaker's
 * state (bgp-types.ts SpeakerState): `show protocols all` (one block per protocol: the
 * summary line `name proto table state since info`, then indented `Key: value` lines),
 * `show bfd sessions` (`address interface state since interval timeout`) and `show route
 * export <peer>` (one line per prefix). Pure: text in, data out; fixtures are real output
 * captured from BIRD 2.0.12 against FRR 8.4 (test/fixtures/bgp/).
 *
 * Health (issue #19, docs/vip-announce.md "Speaker state"): "healthy" = every configured peer's session
 * is Established and, with BFD on, its BFD session is Up; a session up whose BFD session is
 * not is "degraded" (the router would only notice this host's death after the hold time);
 * no session established, or BIRD not answering, is "down". It does not run birdc
 * (bird-speaker.ts does).
 */
import type { BfdSessionState, BgpSessionState, SpeakerState } from "./bgp-types.ts";

export interface BirdProtocol {
  readonly name: string;
  readonly proto: string;
  readonly state: string;
  readonly info: string;
  /** the indented `Key: value` lines of `show protocols all` (first occurrence of each key) */
  readonly fields: Readonly<Record<string, string>>;
}

const SUMMARY =
  /^(\S+)\s+(\S+)\s+(\S+)\s+(up|down|start|stop|flush)\s+(\S+(?: \d\d:\d\d:\d\d(?:\.\d+)?)?)\s*(.*)$/;

/** `show protocols` or `show protocols all` → one entry per protocol. */
export function parseBirdProtocols(text: string): BirdProtocol[] {
  const out: { name: string; proto: string; state: string; info: string; fields: Record<string, string> }[] =
    [];
  for (const line of text.split("\n")) {
    if (line.trim() === "" || line.startsWith("BIRD ") || line.startsWith("Name ")) continue;
    if (!/^\s/.test(line)) {
      const m = SUMMARY.exec(line.trimEnd());
      if (m) out.push({ name: m[1]!, proto: m[2]!, state: m[4]!, info: m[6]!.trim(), fields: {} });
      continue;
    }
    const current = out[out.length - 1];
    const kv = /^\s+([A-Za-z][A-Za-z0-9 -]*?):\s+(.*)$/.exec(line);
    if (current && kv && !(kv[1]! in current.fields)) current.fields[kv[1]!] = kv[2]!.trim();
  }
  return out;
}

/** `show bfd sessions` → one entry per session. */
export function parseBirdBfdSessions(text: string): BfdSessionState[] {
  const out: BfdSessionState[] = [];
  for (const line of text.split("\n")) {
    const m = /^(\S+)\s+(\S+)\s+(Up|Down|Init|AdminDown)\s+/.exec(line.trim());
    if (m && m[1] !== "IP") out.push({ peer: m[1]!, interface: m[2]!, state: m[3]! });
  }
  return out;
}

/** `show route export <peer>` → the prefixes exported to that peer. */
export function parseBirdRouteExport(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split("\n")) {
    const m = /^([0-9a-fA-F.:]+\/\d+)\s+/.exec(line);
    if (m) out.push(m[1]!);
  }
  return out;
}

/** The BGP sessions of `show protocols all`. */
export function bgpSessionsOf(protocols: readonly BirdProtocol[]): BgpSessionState[] {
  return protocols
    .filter((p) => p.proto === "BGP")
    .map((p) => {
      const bgpState = p.fields["BGP state"] ?? (p.info.split(/\s+/)[0] || p.state);
      const routes = /(\d+) exported/.exec(p.fields.Routes ?? "");
      const error = p.fields["Last error"] ?? /Error: (.*)$/.exec(p.info)?.[1];
      return {
        name: p.name,
        peer: p.fields["Neighbor address"] ?? "",
        state: bgpState,
        established: bgpState === "Established",
        exported: routes ? Number(routes[1]) : 0,
        ...(error ? { lastError: error.trim() } : {}),
      };
    });
}

/**
 * The speaker's state from the two outputs; `bfd` is whether BFD is configured (then every
 * established session needs its BFD session Up), or the peer addresses whose sessions have
 * BFD (LoadBalancerBGPPeers may turn it off per session). `undefined` text = BIRD did not answer.
 */
export function birdSpeakerState(
  protocolsText: string | undefined,
  bfdText: string | undefined,
  bfd: boolean | ReadonlySet<string>,
  /** peer addresses whose sessions have a TCP MD5 key */
  md5: ReadonlySet<string> = new Set(),
): SpeakerState {
  if (protocolsText === undefined)
    return { running: false, sessions: [], bfd: [], health: "down", findings: ["BIRD is not answering"] };
  const MD5_HINT =
    "TCP MD5 is set on this session: a key that differs from the router's keeps it down without any BGP error";
  // a wrong MD5 key gives no BGP error: the kernel drops the unsigned or mis-signed segments
  // (RFC 2385 §2.0), so BIRD only ever sees Connect/Active; say so where the session is shown
  const sessions = bgpSessionsOf(parseBirdProtocols(protocolsText)).map((s) =>
    !s.established && md5.has(s.peer)
      ? { ...s, lastError: s.lastError ? `${s.lastError}; ${MD5_HINT}` : MD5_HINT }
      : s,
  );
  const wants = (peer: string) => (typeof bfd === "boolean" ? bfd : bfd.has(peer));
  const bfdSessions = bfd !== false && bfdText !== undefined ? parseBirdBfdSessions(bfdText) : [];
  const findings: string[] = [];
  for (const s of sessions) {
    if (!s.established) {
      findings.push(`BGP ${s.name} (${s.peer}) is ${s.state}${s.lastError ? `: ${s.lastError}` : ""}`);
      continue;
    }
    if (!wants(s.peer)) continue;
    const b = bfdSessions.find((x) => x.peer === s.peer);
    if (b?.state !== "Up")
      findings.push(`BGP ${s.name} (${s.peer}) is up, BFD ${b ? b.state : "has no session"}`);
  }
  const up = sessions.filter((s) => s.established).length;
  const health = up === 0 ? "down" : findings.length > 0 ? "degraded" : "healthy";
  if (sessions.length === 0) findings.push("no BGP session configured");
  return { running: true, sessions, bfd: bfdSessions, health, findings };
}
