/**
 * `kubectl passlb status`: the lines of the announcement checked from the wire
 * (docs/kubectl-passlb.md "Wire", docs/vip-announce.md "Checked from the wire"). Pure: what
 * each LB host's `announce.wire` says about a VIP in, one line per VIP out — the agreed
 * answer (the MAC and its host) when every host agrees, else one line per host that sees a
 * problem, naming the MACs and, where known, their hosts — plus one line per foreign VRRP
 * speaker an LB host hears.
 */

export interface WireView {
  readonly vip: string;
  readonly problem: string | null;
  readonly message: string;
}

export interface ForeignView {
  readonly vrid: number;
  readonly source: string;
  readonly mac: string;
  readonly interface: string;
  readonly priority: number;
}

/** per LB host pod, its check of one VIP → the `Wire:` lines for that VIP (each message names it) */
export function wireLines(byHost: Readonly<Record<string, WireView>>): string[] {
  const hosts = Object.keys(byHost).sort();
  if (hosts.length === 0) return [];
  const problems = hosts.filter((h) => byHost[h]!.problem !== null);
  if (problems.length === 0)
    return [`  Wire:        ${byHost[hosts[0]!]!.message} (checked by ${hosts.join(", ")})`];
  return problems.map((h) => `  Wire:        ${h}: ${byHost[h]!.message} [${byHost[h]!.problem}]`);
}

/** the detail lines under an LB host's row */
export function foreignSpeakerLines(foreign: readonly ForeignView[]): string[] {
  return foreign.map(
    (f) =>
      `      FOREIGN VRRP SPEAKER ${f.source} (${f.mac}) on VRID ${f.vrid} (${f.interface}, priority ${f.priority}): renumber it or --vrid-range`,
  );
}
