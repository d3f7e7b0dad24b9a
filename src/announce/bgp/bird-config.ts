/**
 * Renders BIRD 2's configuration for an LB host (docs/vip-announce.md "BGP", the settings
 * of specs/scale-out.md §B.1 and §E). Pure: settings in, the text of `bird.conf` out; the
 * same settings always give the same text (golden-tested, and parsed by `bird -p` in the
 * test where BIRD is installed).
 *
 * What the configuration does:
 * - Two `kernel` protocols (`vips4`, `vips6`) *learn* the routes passlb writes into kernel
 *   table `kernelTable` (`ip route replace VIP/32 dev lo table 4242 proto static`) and
 *   export nothing to the kernel: BIRD never touches the host's forwarding. Adding or
 *   deleting a route is the announcement; the configuration never changes per VIP, so there
 *   is no reload (scale-out.md §B.1: 4–5 ms to the router). BIRD doc `learn`:
 *   CZ-NIC/bird@v2.0.12:doc/bird.sgml "kernel" protocol.
 * - One `bgp` protocol per peer; each carries the address family of its peer's address.
 *   Exported are only host routes (/32, /128) learned from those kernel protocols, with
 *   identical attributes on every LB host: origin IGP, no MED, the path this ASN alone (the
 *   routers put only equal paths into ECMP: scale-out.md §E.1, GoBGP's default origin `?`
 *   kept its paths out), `next hop self` (the host's address on the session toward the peer).
 * - `graceful restart off` (§E.5: GR turns a dead LB host into a black hole), `error wait
 *   time 1, 10` and a short `connect retry time` (§E.3: BIRD's default 60 s left a
 *   BFD-downed session idle), `hold time` with keepalive a third of it (the backstop when BFD
 *   is not up, §E.2), `bfd on` with one `bfd` protocol at interval × multiplier.
 * - `import none`: the LB host takes no routes from the routers.
 *
 * - Per session (a LoadBalancerBGPPeer's, bgp-peer-config.ts): its own local ASN, port, hold,
 *   keepalive and connect retry times, BFD on or off, and, with communities or LOCAL_PREF of
 *   its own, its own export filter `passlb_export_peerN` (the same routes, more attributes);
 *   an iBGP session (local ASN = peer ASN) is `direct`, like eBGP: the router is on the link.
 *   With no peer at all (no LoadBalancerBGPPeer selects this host yet) only the kernel
 *   protocols are rendered: BIRD runs and announces nothing.
 *
 * It does not validate settings (lb-announce-bgp.ts and bgp-peer-config.ts do, with
 * messages naming the flag or the object and field); a value out of range here is a bug and throws.
 */
import type { BgpPeer, BgpSettings } from "./bgp-types.ts";

export const KERNEL_PROTOCOL = { IPv4: "vips4", IPv6: "vips6" } as const;

/** protocol names of the peers, in `settings.peers` order: `peer1`, `peer2`, … */
export function peerProtocolName(index: number): string {
  return `peer${index + 1}`;
}

export function renderBirdConfig(settings: BgpSettings): string {
  check(settings);
  const lines: string[] = [
    "# passlb: BIRD 2 configuration of an LB host (rendered; edits are overwritten)",
    `# docs/vip-announce.md "BGP"; VIP routes come from kernel table ${settings.kernelTable}`,
    "log stderr { info, remote, warning, error, auth, fatal, bug };",
  ];
  if (settings.routerId) lines.push(`router id ${settings.routerId};`);
  lines.push("", "protocol device { scan time 10; }", "");
  for (const family of ["IPv4", "IPv6"] as const) {
    const channel = family === "IPv4" ? "ipv4" : "ipv6";
    lines.push(
      `protocol kernel ${KERNEL_PROTOCOL[family]} {`,
      `  kernel table ${settings.kernelTable};`,
      "  learn;",
      "  scan time 10;",
      `  ${channel} { import all; export none; };`,
      "}",
      "",
    );
  }
  if (settings.bfd && settings.peers.some((p) => p.bfd ?? true)) lines.push(...bfdProtocol(settings.bfd), "");
  for (const family of ["IPv4", "IPv6"] as const) {
    if (!settings.peers.some((p) => p.family === family && !ownFilter(p))) continue;
    lines.push(...exportFilter(filterName(family), family, settings.communities), "");
  }
  settings.peers.forEach((peer, i) => {
    const name = peerProtocolName(i);
    if (ownFilter(peer))
      lines.push(
        ...exportFilter(
          `passlb_export_${name}`,
          peer.family,
          [...settings.communities, ...(peer.communities ?? [])],
          peer.localPref,
        ),
        "",
      );
    lines.push(...bgpProtocol(name, peer, settings), "");
  });
  return `${lines.join("\n").trimEnd()}\n`;
}

const filterName = (family: "IPv4" | "IPv6") => `passlb_export_${family === "IPv4" ? "v4" : "v6"}`;

/** a peer with communities or LOCAL_PREF of its own gets its own export filter */
const ownFilter = (p: BgpPeer) => (p.communities?.length ?? 0) > 0 || p.localPref !== undefined;

function bfdProtocol(bfd: NonNullable<BgpSettings["bfd"]>): string[] {
  const rx = bfd.receiveMs ?? bfd.intervalMs;
  const tx = bfd.transmitMs ?? bfd.intervalMs;
  // BIRD doc "BFD": `interval` sets both; `min rx interval` / `min tx interval` one each
  const timing = rx === tx ? `interval ${rx} ms;` : `min rx interval ${rx} ms; min tx interval ${tx} ms;`;
  return ["protocol bfd {", `  interface "*" { ${timing} multiplier ${bfd.multiplier}; };`, "}"];
}

function exportFilter(
  name: string,
  family: "IPv4" | "IPv6",
  communities: readonly string[],
  localPref?: number,
): string[] {
  const len = family === "IPv4" ? 32 : 128;
  // BIRD doc "BGP route attributes": bgp_community (pairs), bgp_large_community (triples)
  const adds = communities.map((c) => {
    const parts = c.split(":");
    return parts[0] === "large"
      ? ` bgp_large_community.add((${parts[1]}, ${parts[2]}, ${parts[3]}));`
      : ` bgp_community.add((${parts[0]}, ${parts[1]}));`;
  });
  const pref = localPref === undefined ? "" : ` bgp_local_pref = ${localPref};`;
  return [
    `filter ${name} {`,
    `  if proto = "${KERNEL_PROTOCOL[family]}" && net.len = ${len} then {`,
    `    bgp_origin = ORIGIN_IGP;${adds.join("")}${pref}`,
    "    accept;",
    "  }",
    "  reject;",
    "}",
  ];
}

function bgpProtocol(name: string, peer: BgpPeer, s: BgpSettings): string[] {
  const channel = peer.family === "IPv4" ? "ipv4" : "ipv6";
  const hold = peer.holdSeconds ?? s.holdSeconds;
  const keepalive = peer.keepaliveSeconds ?? Math.max(1, Math.floor(hold / 3));
  const port = peer.port === undefined || peer.port === 179 ? "" : ` port ${peer.port}`;
  const filter = ownFilter(peer) ? `passlb_export_${name}` : filterName(peer.family);
  return [
    `protocol bgp ${name} {`,
    ...(peer.source ? [`  description "${peer.source}";`] : []),
    `  local as ${peer.localAsn ?? s.asn};`,
    `  neighbor ${peer.address}${port} as ${peer.asn};`,
    // iBGP is multihop by default in BIRD (and BFD then wants a local address): the routers
    // of an LB tier are on the host's own link, as for eBGP (BIRD doc "BGP": `direct`)
    ...((peer.localAsn ?? s.asn) === peer.asn ? ["  direct;"] : []),
    ...(s.bfd && (peer.bfd ?? true) ? ["  bfd on;"] : []),
    "  graceful restart off;",
    `  hold time ${hold};`,
    `  keepalive time ${keepalive};`,
    `  connect retry time ${peer.connectRetrySeconds ?? s.connectRetrySeconds};`,
    "  error wait time 1, 10;",
    `  ${channel} { import none; export filter ${filter}; next hop self; };`,
    "}",
  ];
}

function check(s: BgpSettings): void {
  const asn = (n: number) => Number.isInteger(n) && n >= 1 && n <= 4294967295;
  if (!asn(s.asn)) throw new Error(`bird-config: bad local ASN ${s.asn}`);
  for (const p of s.peers) {
    if (!asn(p.asn) || (p.localAsn !== undefined && !asn(p.localAsn)))
      throw new Error(`bird-config: bad ASN ${p.asn} of ${p.address}`);
    if (p.source !== undefined && !/^[A-Za-z0-9._-]+$/.test(p.source))
      throw new Error(`bird-config: bad peer source ${p.source}`);
    const hold = p.holdSeconds ?? s.holdSeconds;
    if (!(Number.isInteger(hold) && (hold === 0 || hold >= 3)))
      throw new Error(`bird-config: bad hold time ${hold} of ${p.address}`);
    for (const c of p.communities ?? []) checkCommunity(c);
  }
  if (!(Number.isInteger(s.kernelTable) && s.kernelTable >= 1 && s.kernelTable < 2 ** 31))
    throw new Error(`bird-config: bad kernel table ${s.kernelTable}`);
  if (!(Number.isInteger(s.holdSeconds) && (s.holdSeconds === 0 || s.holdSeconds >= 3)))
    throw new Error(`bird-config: bad hold time ${s.holdSeconds}`);
  for (const c of s.communities) checkCommunity(c);
}

function checkCommunity(c: string): void {
  if (!/^(\d{1,5}:\d{1,5}|large:\d{1,10}:\d{1,10}:\d{1,10})$/.test(c))
    throw new Error(`bird-config: bad community ${c}`);
}
