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
 * It does not validate settings (lb-announce-bgp.ts does, with messages naming the flag);
 * a value out of range here is a bug and throws.
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
  if (settings.bfd)
    lines.push(
      "protocol bfd {",
      `  interface "*" { interval ${settings.bfd.intervalMs} ms; multiplier ${settings.bfd.multiplier}; };`,
      "}",
      "",
    );
  for (const family of ["IPv4", "IPv6"] as const) {
    if (!settings.peers.some((p) => p.family === family)) continue;
    lines.push(...exportFilter(family, settings.communities), "");
  }
  settings.peers.forEach((peer, i) => {
    lines.push(...bgpProtocol(peerProtocolName(i), peer, settings), "");
  });
  return `${lines.join("\n").trimEnd()}\n`;
}

function exportFilter(family: "IPv4" | "IPv6", communities: readonly string[]): string[] {
  const len = family === "IPv4" ? 32 : 128;
  const adds = communities.map((c) => {
    const [a, v] = c.split(":");
    return ` bgp_community.add((${a}, ${v}));`;
  });
  return [
    `filter passlb_export_${family === "IPv4" ? "v4" : "v6"} {`,
    `  if proto = "${KERNEL_PROTOCOL[family]}" && net.len = ${len} then {`,
    `    bgp_origin = ORIGIN_IGP;${adds.join("")}`,
    "    accept;",
    "  }",
    "  reject;",
    "}",
  ];
}

function bgpProtocol(name: string, peer: BgpPeer, s: BgpSettings): string[] {
  const channel = peer.family === "IPv4" ? "ipv4" : "ipv6";
  const keepalive = Math.max(1, Math.floor(s.holdSeconds / 3));
  return [
    `protocol bgp ${name} {`,
    `  local as ${s.asn};`,
    `  neighbor ${peer.address} as ${peer.asn};`,
    ...(s.bfd ? ["  bfd on;"] : []),
    "  graceful restart off;",
    `  hold time ${s.holdSeconds};`,
    `  keepalive time ${keepalive};`,
    `  connect retry time ${s.connectRetrySeconds};`,
    "  error wait time 1, 10;",
    `  ${channel} { import none; export filter passlb_export_${peer.family === "IPv4" ? "v4" : "v6"}; next hop self; };`,
    "}",
  ];
}

function check(s: BgpSettings): void {
  const asn = (n: number) => Number.isInteger(n) && n >= 1 && n <= 4294967295;
  if (!asn(s.asn)) throw new Error(`bird-config: bad local ASN ${s.asn}`);
  if (s.peers.length === 0) throw new Error("bird-config: no peers");
  for (const p of s.peers) if (!asn(p.asn)) throw new Error(`bird-config: bad ASN ${p.asn} of ${p.address}`);
  if (!(Number.isInteger(s.kernelTable) && s.kernelTable >= 1 && s.kernelTable < 2 ** 31))
    throw new Error(`bird-config: bad kernel table ${s.kernelTable}`);
  if (!(Number.isInteger(s.holdSeconds) && (s.holdSeconds === 0 || s.holdSeconds >= 3)))
    throw new Error(`bird-config: bad hold time ${s.holdSeconds}`);
  for (const c of s.communities)
    if (!/^\d{1,5}:\d{1,5}$/.test(c)) throw new Error(`bird-config: bad community ${c}`);
}
