/**
 * Who answered on the wire for an address, from the output of the tools operators use
 * (docs/vip-announce.md "Checked from the wire"). Pure: a tool's text in, the MACs that
 * answered out. The tools, not passlb, send the requests:
 *
 *   - IPv4: iputils `arping -b -I IFACE -s SRC -c N -w S VIP` (arping(8)): `-b` keeps every
 *     request a broadcast (without it arping switches to unicast after the first reply and
 *     a second answering device would go unseen); one `Unicast reply from VIP [MAC]` line
 *     per reply, then `Sent N probes …` and `Received N response(s)`. Its exit status mixes
 *     "fewer replies than -c" with "no reply" (arping(8) `-w`), so only the text counts.
 *   - IPv6: `ndisc6 -m -n -r 1 -w MS -s SRC VIP IFACE` (ndisc6(8)): `-m` waits for and prints
 *     every advertisement (`Target link-layer address: MAC`), `Timed out.` / `No response.`
 *     when none came; exit 1 is an error (no such interface), 2 "no response" — and also
 *     after `-m` printed answers, so again only the text counts.
 *
 * Fixtures: real output in test/fixtures/wire/ (README there). Does not run the tools
 * (wire-checker.ts does) and does not judge the answers (wire-verdict.ts does).
 */

export interface WireAnswers {
  /** the tool ran and asked (false: an error, `error` says which) */
  readonly asked: boolean;
  /** the MACs that answered, lower case, each once, in the order first seen */
  readonly macs: readonly string[];
  /** replies counted (a MAC answering every probe counts each time) */
  readonly replies: number;
  readonly error?: string;
}

const MAC = "[0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5}";

function collect(text: string, line: RegExp, asked: RegExp): WireAnswers {
  const macs: string[] = [];
  let replies = 0;
  for (const m of text.matchAll(line)) {
    replies++;
    const mac = m[1]!.toLowerCase();
    if (!macs.includes(mac)) macs.push(mac);
  }
  if (replies > 0 || asked.test(text)) return { asked: true, macs, replies };
  const error = text.trim().split("\n")[0]?.trim() || "no output";
  return { asked: false, macs, replies, error };
}

/** iputils arping's output (with `-b`). */
export function parseArping(text: string): WireAnswers {
  return collect(text, new RegExp(`^Unicast reply from \\S+ \\[(${MAC})\\]`, "gm"), /^Sent \d+ probes/m);
}

/** ndisc6's output (with `-m`). */
export function parseNdisc6(text: string): WireAnswers {
  return collect(
    text,
    new RegExp(`^Target link-layer address: (${MAC})`, "gm"),
    /^(Timed out\.|No response\.)/m,
  );
}
