/**
 * VRRP advertisements seen on the segment, and which of them come from a speaker that is
 * not one of our LB hosts but uses one of our VRIDs (docs/vip-announce.md "VRRP hygiene").
 * Pure: lines of `tcpdump -l -n -e -i IFACE 'ip proto 112 or ip6 proto 112'` (tcpdump(8);
 * the VRRP printer is print-vrrp.c in the-tcpdump-group/tcpdump: `VRRPv3, Advertisement,
 * vrid 3, prio 100, intvl 50cs, length 12`) in, adverts and foreign speakers out.
 *
 * A foreign speaker on a passlb VRID is a clash: RFC 5798 §5.2.3 gives a segment 255 VRIDs
 * per family, and two routers with one VRID take each other for peers. passlb's keepalived
 * runs unicast (it joins no multicast group, so multicast adverts never reach it) with
 * `vrrp_check_unicast_src` (unicast adverts from non-peers are dropped), so the clash cannot
 * take a VIP away from passlb's hosts; passlb reports it so the operator renumbers one side
 * (`--vrid-range`) before someone turns multicast on or the other router's VIPs suffer. Fixture:
 * test/fixtures/wire/tcpdump-vrrp-foreign.txt. Does not run tcpdump (vrrp-watch.ts does).
 */

export interface VrrpAdvert {
  readonly family: "IPv4" | "IPv6";
  readonly mac: string;
  readonly source: string;
  readonly destination: string;
  readonly version: number;
  readonly vrid: number;
  readonly priority: number;
}

const LINE =
  /^\S+ ([0-9a-f:]{17}) > [0-9a-f:]{17}, ethertype (IPv4|IPv6) \(0x[0-9a-f]+\), length \d+: (\S+) > (\S+): VRRPv(\d), Advertisement, vrid (\d+), prio (\d+)/;

/** One line of tcpdump's output; undefined for anything else (its banner, other packets). */
export function parseVrrpLine(line: string): VrrpAdvert | undefined {
  const m = LINE.exec(line.trim());
  if (!m) return undefined;
  return {
    mac: m[1]!,
    family: m[2] as VrrpAdvert["family"],
    source: m[3]!,
    destination: m[4]!.replace(/:$/, ""),
    version: Number(m[5]),
    vrid: Number(m[6]),
    priority: Number(m[7]),
  };
}

export interface VridRange {
  readonly first: number;
  readonly last: number;
}

/** `A-B` (or one number) within 1..255; a message naming the flag otherwise. */
export function parseVridRange(text: string, flag = "--vrid-range"): VridRange | string {
  const m = /^(\d{1,3})(?:-(\d{1,3}))?$/.exec(text.trim());
  const first = m ? Number(m[1]) : Number.NaN;
  const last = m ? Number(m[2] ?? m[1]) : Number.NaN;
  if (!m || first < 1 || last > 255 || first > last)
    return `${flag}: "${text}" is not A-B with 1 ≤ A ≤ B ≤ 255 (VRRP router IDs, RFC 5798 §5.2.3)`;
  return { first, last };
}

export interface ForeignSpeaker {
  readonly interface: string;
  readonly family: "IPv4" | "IPv6";
  readonly vrid: number;
  readonly source: string;
  readonly mac: string;
  readonly priority: number;
  /** ms (the caller's clock) of the last advert seen */
  readonly lastSeen: number;
  readonly adverts: number;
}

/**
 * Folds one advert into the speakers seen: adverts from our own LB hosts' addresses, or on
 * a VRID outside our range, are not foreign (a router of the site on its own VRIDs is
 * fine). Returns the updated list.
 */
export function noteAdvert(
  speakers: readonly ForeignSpeaker[],
  advert: VrrpAdvert,
  context: {
    readonly interface: string;
    readonly ours: ReadonlySet<string>;
    readonly range: VridRange;
    readonly now: number;
  },
): ForeignSpeaker[] {
  if (context.ours.has(advert.source)) return [...speakers];
  if (advert.vrid < context.range.first || advert.vrid > context.range.last) return [...speakers];
  const same = (s: ForeignSpeaker) =>
    s.family === advert.family && s.vrid === advert.vrid && s.source === advert.source;
  const before = speakers.find(same);
  const next: ForeignSpeaker = {
    interface: context.interface,
    family: advert.family,
    vrid: advert.vrid,
    source: advert.source,
    mac: advert.mac,
    priority: advert.priority,
    lastSeen: context.now,
    adverts: (before?.adverts ?? 0) + 1,
  };
  return [...speakers.filter((s) => !same(s)), next].sort(
    (a, b) => a.vrid - b.vrid || (a.source < b.source ? -1 : 1),
  );
}

/** The speakers heard within `holdMs` (VRRP advertises at least every 40.95 s, RFC 5798 §5.2.7). */
export function currentSpeakers(
  speakers: readonly ForeignSpeaker[],
  now: number,
  holdMs: number,
): ForeignSpeaker[] {
  return speakers.filter((s) => now - s.lastSeen <= holdMs);
}
