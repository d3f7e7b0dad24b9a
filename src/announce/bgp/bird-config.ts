/**
 * Renders BIRD 2's configuration for an LB host (docs/vip-announce.md "BGP", the settings
 * of docs/vip-announce.md "How a VIP is announced"). Pure: settings in, the text of `bird.conf` out; the
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
 * - `graceful restart off` unless a peer asks for it (§E.5: GR turns a dead LB host into a
 *   black hole), `error wait
 *   time 1, 10` and a short `connect retry time` (§E.3: BIRD's default 60 s left a
 *   BFD-downed session idle), `hold time` with keepalive a third of it (the backstop when BFD
 *   is not up, §E.2), `bfd on` with one `bfd` protocol at interval × multiplier.
 * - `import none`: the LB host takes no routes from the routers.
 *
 * - Per session (a LoadBalancerBGPPeer's, bgp-peer-config.ts): every MetalLB BGPPeer setting
 *   (docs/vip-announce.md "Field reference": local/peer/dynamic ASN, port, source address,
 *   timers, router id, TCP MD5 password, BFD timing, graceful restart, multihop, VRF, both
 *   families) and its own export filter per family from its advertisement rules
 *   (`passlb_out_<protocol>_<family>`: which prefixes, with which communities and LOCAL_PREF);
 *   an iBGP session is `direct` unless multihop: the router is on the link.
 *   With no peer at all (no LoadBalancerBGPPeer selects this host yet) only the kernel
 *   protocols are rendered: BIRD runs and announces nothing.
 *
 * It does not validate settings (lb-announce-bgp.ts and bgp-peer-config.ts do, with
 * messages naming the flag or the object and field); a value out of range here is a bug and throws.
 */
import type { BgpPeer, BgpSettings } from "./bgp-types.ts";

export const KERNEL_PROTOCOL = { IPv4: "vips4", IPv6: "vips6" } as const;

/**
 * Protocol names of the peers, in `settings.peers` order: `peer1`, `peer2`, … for the flags'
 * peers; `p_<object name>` for a LoadBalancerBGPPeer's, so that adding or removing another
 * object never renames (and so never restarts) this session: BIRD `configure` matches
 * protocols by name (CZ-NIC/bird nest/proto.c protos_commit).
 */
export function peerProtocolNames(peers: readonly BgpPeer[]): string[] {
  const used = new Set<string>();
  return peers.map((p, i) => {
    let name = p.source ? `p_${p.source.replace(/[^A-Za-z0-9_]/g, "_")}` : `peer${i + 1}`;
    while (used.has(name)) name = `${name}_`;
    used.add(name);
    return name;
  });
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
  lines.push(...bfdProtocols(settings));
  for (const family of ["IPv4", "IPv6"] as const) {
    if (!settings.peers.some((p) => p.family === family && !ownFilter(p))) continue;
    lines.push(...exportFilter(filterName(family), family, settings.communities), "");
  }
  const names = peerProtocolNames(settings.peers);
  settings.peers.forEach((peer, i) => {
    const name = names[i]!;
    if (peer.exports)
      for (const family of familiesOf(peer))
        lines.push(...rulesFilter(`passlb_out_${name}_${channelOf(family)}`, family, settings, peer), "");
    else if (ownFilter(peer))
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
const channelOf = (family: "IPv4" | "IPv6") => (family === "IPv4" ? "ipv4" : "ipv6");
const familiesOf = (p: BgpPeer) => (p.dualStack ? (["IPv4", "IPv6"] as const) : ([p.family] as const));

/** a flags-mode peer with communities or LOCAL_PREF of its own gets its own export filter */
const ownFilter = (p: BgpPeer) =>
  p.exports !== undefined || (p.communities?.length ?? 0) > 0 || p.localPref !== undefined;

/** Whether the session runs BFD: its own timing, or the host's (`--bfd-*` flags). */
export function sessionHasBfd(p: BgpPeer, s: BgpSettings): boolean {
  if (p.bfd === false) return false;
  return p.bfdTiming !== undefined || s.bfd !== undefined;
}

/** One `protocol bfd` per VRF with BFD sessions (BIRD doc "BFD": a bfd protocol serves one
 * VRF); the flags' host-wide timing on its interface block, per-session timing in each bgp's `bfd { }`. */
function bfdProtocols(s: BgpSettings): string[] {
  const vrfs = [...new Set(s.peers.filter((p) => sessionHasBfd(p, s)).map((p) => p.vrf ?? ""))].sort();
  const out: string[] = [];
  for (const vrf of vrfs) {
    const name = vrf === "" ? "" : ` passlb_bfd_${vrf.replace(/[^A-Za-z0-9_]/g, "_")}`;
    const body: string[] = vrf === "" ? [] : [`  vrf "${vrf}";`];
    if (s.bfd && vrf === "") {
      const rx = s.bfd.receiveMs ?? s.bfd.intervalMs;
      const tx = s.bfd.transmitMs ?? s.bfd.intervalMs;
      // BIRD doc "BFD": `interval` sets both; `min rx interval` / `min tx interval` one each
      const timing = rx === tx ? `interval ${rx} ms;` : `min rx interval ${rx} ms; min tx interval ${tx} ms;`;
      body.push(`  interface "*" { ${timing} multiplier ${s.bfd.multiplier}; };`);
    }
    out.push(`protocol bfd${name} {`, ...body, "}", "");
  }
  return out;
}

function exportFilter(
  name: string,
  family: "IPv4" | "IPv6",
  communities: readonly string[],
  localPref?: number,
): string[] {
  const len = family === "IPv4" ? 32 : 128;
  const pref = localPref === undefined ? "" : ` bgp_local_pref = ${localPref};`;
  return [
    `filter ${name} {`,
    `  if proto = "${KERNEL_PROTOCOL[family]}" && net.len = ${len} then {`,
    `    bgp_origin = ORIGIN_IGP;${communityAdds(communities)}${pref}`,
    "    accept;",
    "  }",
    "  reject;",
    "}",
  ];
}

/** BIRD doc "BGP route attributes": bgp_community (pairs), bgp_large_community (triples) */
function communityAdds(communities: readonly string[]): string {
  return communities
    .map((c) => {
      const parts = c.split(":");
      return parts[0] === "large"
        ? ` bgp_large_community.add((${parts[1]}, ${parts[2]}, ${parts[3]}));`
        : ` bgp_community.add((${parts[0]}, ${parts[1]}));`;
    })
    .join("");
}

/**
 * A session's export filter from its advertisement rules (bgp-advertisements.ts): only routes
 * learned from the kernel table; each rule adds its communities and LOCAL_PREF to the routes
 * in its prefix set; the union of the selecting rules' sets is accepted, the rest rejected.
 * Depends on pools and advertisements, never on VIPs: a VIP change reloads nothing.
 */
function rulesFilter(name: string, family: "IPv4" | "IPv6", s: BgpSettings, peer: BgpPeer): string[] {
  const rules = peer.exports?.[family] ?? [];
  const body = [
    `filter ${name} {`,
    `  if proto != "${KERNEL_PROTOCOL[family]}" then reject;`,
    `  bgp_origin = ORIGIN_IGP;${communityAdds(s.communities)}`,
  ];
  for (const r of rules) {
    const adds = communityAdds(r.communities);
    const pref = r.localPref === undefined ? "" : ` bgp_local_pref = ${r.localPref};`;
    if (adds === "" && pref === "") continue;
    body.push(`  # ${r.from}`, `  if net ~ [ ${r.prefixes.join(", ")} ] then {${adds}${pref} }`);
  }
  const selected = [...new Set(rules.filter((r) => !r.attributesOnly).flatMap((r) => r.prefixes))];
  if (selected.length > 0) body.push(`  if net ~ [ ${selected.join(", ")} ] then accept;`);
  body.push("  reject;", "}");
  return body;
}

function bgpProtocol(name: string, peer: BgpPeer, s: BgpSettings): string[] {
  const hold = peer.holdSeconds ?? s.holdSeconds;
  const keepalive = peer.keepaliveSeconds ?? Math.max(1, Math.floor(hold / 3));
  const port = peer.port === undefined || peer.port === 179 ? "" : ` port ${peer.port}`;
  const remote = peer.dynamicAsn ?? `as ${peer.asn}`;
  const internal = peer.dynamicAsn ? peer.dynamicAsn === "internal" : (peer.localAsn ?? s.asn) === peer.asn;
  const channels = familiesOf(peer).map((f) => {
    const filter = peer.exports
      ? `passlb_out_${name}_${channelOf(f)}`
      : ownFilter(peer)
        ? `passlb_export_${name}`
        : filterName(f);
    return `  ${channelOf(f)} { import none; export filter ${filter}; next hop self; };`;
  });
  return [
    `protocol bgp ${name} {`,
    ...(peer.source ? [`  description "${peer.source}";`] : []),
    ...(peer.vrf ? [`  vrf "${peer.vrf}";`] : []),
    ...(peer.routerId ? [`  router id ${peer.routerId};`] : []),
    `  local as ${peer.localAsn ?? s.asn};`,
    `  neighbor ${peer.address}${port} ${remote};`,
    ...(peer.sourceAddress ? [`  source address ${peer.sourceAddress};`] : []),
    // eBGP multihop: TTL 255 as FRR's `ebgp-multihop` (a bare `multihop` is 64: proto/bgp/config.Y).
    // iBGP is multihop by default in BIRD (its BFD then multihop too, which a ToR's
    // single-hop BFD never answers): the routers of an LB tier are on the link (BIRD doc "BGP": `direct`)
    ...(peer.multihop ? ["  multihop 255;"] : internal ? ["  direct;"] : []),
    ...(peer.password !== undefined ? [`  password "${peer.password}";`] : []),
    ...bfdLines(peer, s),
    ...(peer.gracefulRestart
      ? ["  graceful restart on;", "  graceful restart time 120;", "  long lived graceful restart off;"]
      : ["  graceful restart off;"]),
    `  hold time ${hold};`,
    ...(hold === 0 ? [] : [`  keepalive time ${keepalive};`]),
    `  connect retry time ${peer.connectRetrySeconds ?? s.connectRetrySeconds};`,
    "  error wait time 1, 10;",
    ...channels,
    "}",
  ];
}

function bfdLines(peer: BgpPeer, s: BgpSettings): string[] {
  if (!sessionHasBfd(peer, s)) return [];
  const t = peer.bfdTiming;
  if (!t) return ["  bfd on;"];
  // BIRD doc "BGP" `bfd { options }`: per-session BFD options, applied without a session reset
  return [
    `  bfd { min rx interval ${t.receiveMs} ms; min tx interval ${t.transmitMs} ms; multiplier ${t.multiplier}; passive ${t.passive ? "on" : "off"}; };`,
  ];
}

function check(s: BgpSettings): void {
  const asn = (n: number) => Number.isInteger(n) && n >= 1 && n <= 4294967295;
  if (!asn(s.asn)) throw new Error(`bird-config: bad local ASN ${s.asn}`);
  for (const p of s.peers) {
    if ((p.dynamicAsn === undefined && !asn(p.asn ?? 0)) || (p.localAsn !== undefined && !asn(p.localAsn)))
      throw new Error(`bird-config: bad ASN ${p.asn} of ${p.address}`);
    if (p.password !== undefined && (/["\n\r\0]/.test(p.password) || p.password === ""))
      throw new Error(`bird-config: a password BIRD cannot carry for ${p.address}`);
    if (p.vrf !== undefined && !/^[A-Za-z0-9_.-]{1,15}$/.test(p.vrf))
      throw new Error(`bird-config: bad vrf of ${p.address}`);
    for (const r of [...(p.exports?.IPv4 ?? []), ...(p.exports?.IPv6 ?? [])]) {
      for (const x of r.prefixes)
        if (!/^[0-9a-fA-F.:]+\/\d{1,3}\{\d{1,3},\d{1,3}\}$/.test(x))
          throw new Error(`bird-config: bad prefix ${x}`);
      for (const c of r.communities) checkCommunity(c);
      if (r.from.includes("\n")) throw new Error("bird-config: bad rule source");
    }
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
