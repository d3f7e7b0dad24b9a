/**
 * Routed networks (issue 21; docs/dataplane-nftables.md): how the LB host reaches a node that is
 * not on its own segment, and what the node needs to take the packet back out. Pure: the
 * forwarding mode and node addresses in; per-node paths, tunnel devices (argv for `ip`),
 * the sysctls and the MSS clamp out. Nothing here runs a command.
 *
 * The model is the kernel's own tunnelling, so the nftables table and the Maglev maps stay
 * as they are (a mark still names a node and its routing table):
 *   - `route`: the node is a neighbour on a shared segment; its table holds `default via
 *     NODE` (policy-routes.ts, unchanged);
 *   - `encap` with a metadata ("external", collect_md) device — `vxlan gpe external`, `ipip
 *     external` + `ip6tnl external`, `gre external` + `ip6gre external`: the node's table holds
 *     one lightweight-tunnel route per VIP, `VIP encap ip dst NODE dev DEVICE` (ip-route(8)
 *     `encap ip`);
 *   - `encap` with GUE: lwt `encap ip` takes id/src/dst/tos/ttl only, no FOU/GUE fields (ip-route(8)
 *     `ENCAP_IP`), so GUE uses one NBMA (`remote any`) `ipip`/`ip6tnl` device with `encap gue`, and the
 *     route `VIP via NODE dev DEVICE onlink` gives the outer destination (Calico's tunl0
 *     layout).
 * The outer packet keeps the mark (docs/dataplane-nftables.md): its own route lookup uses the node's
 * table again, so a node table holds only VIP host routes, never a default — else the outer
 * destination resolves back into the tunnel. The same-segment `route` path keeps `default`,
 * which is harmless there (no outer packet).
 *
 * Overheads (outer IP + UDP/GRE/GUE header; IPv4 outer 20, IPv6 outer 40): VXLAN-GPE 8 UDP +
 * 8 VXLAN (RFC 7348 §5, draft-ietf-nvo3-vxlan-gpe §3), IPIP 0 (RFC 2003), GRE 4 without key,
 * checksum or sequence (RFC 2784 §2, lwt sets no flags), GUE 8 UDP + 4 GUE
 * (draft-ietf-intarea-gue §3.1). The MSS a node advertises for VIP flows is the underlay MTU
 * minus that, minus the inner IP (20/40) and TCP (20) headers (docs/agent-dataplane.md "MSS clamp").
 *
 * Does not: pick the node (Maglev), run `ip` (src/drivers/ip-routes.ts, agent-decap.ts), or decide
 * which CIDRs are one hop away — the operator lists them (`--direct`), so `passlb plan`
 * shows the same per-node paths as the LB host without a kernel.
 */
import { type Cidr, cidrContains, parseCidr, parseIp } from "../../net/ip.ts";
import type { Fam } from "../nftables/render/nft-state.ts";

export const ENCAP_KINDS = ["vxlan-gpe", "ipip", "gre", "gue"] as const;
export type EncapKind = (typeof ENCAP_KINDS)[number];

/** IANA: 4790 VXLAN-GPE (draft-ietf-nvo3-vxlan-gpe §3.1); 6080 is Katran's GUE_DPORT
 * (facebookincubator/katran@19f08fe:katran/lib/bpf/balancer_consts.h). IPIP/GRE: no port. */
export const DEFAULT_ENCAP_PORT: Readonly<Record<EncapKind, number | undefined>> = {
  "vxlan-gpe": 4790,
  ipip: undefined,
  gre: undefined,
  gue: 6080,
};

/** bytes the outer headers add, by kind and outer family */
export const ENCAP_OVERHEAD: Readonly<Record<EncapKind, Readonly<Record<Fam, number>>>> = {
  "vxlan-gpe": { 4: 36, 6: 56 },
  ipip: { 4: 20, 6: 40 },
  gre: { 4: 24, 6: 44 },
  gue: { 4: 32, 6: 52 },
};

export interface Encap {
  readonly kind: EncapKind;
  /** UDP port (VXLAN-GPE, GUE); undefined for IPIP and GRE */
  readonly port: number | undefined;
  /** MTU of the underlay toward the nodes (default 1500) */
  readonly mtu: number;
}

export type Forward =
  | { readonly mode: "route" }
  | {
      readonly mode: "encap";
      readonly encap: Encap;
      /** nodes inside these prefixes are neighbours: routed directly (mixed sites) */
      readonly direct: readonly Cidr[];
      /** `--encap-check`: each routed node is also probed through the tunnel (encap-check.ts) */
      readonly check?: boolean;
    };

export const ROUTE_FORWARD: Forward = { mode: "route" };

export type NodePath = "route" | "encap";

/** The per-node decision: encapsulate unless the mode is `route` or the node is listed as a
 * neighbour. */
export function nodePath(forward: Forward, address: string): NodePath {
  if (forward.mode === "route") return "route";
  const ip = parseIp(address);
  if (ip && forward.direct.some((c) => cidrContains(c, ip))) return "route";
  return "encap";
}

/** A device the LB host needs for a family (`via` tells the route form: lwt or NBMA next hop). */
export interface TunnelDevice {
  readonly name: string;
  /** `ip link add NAME …` arguments after the name */
  readonly args: readonly string[];
  /** the `info_kind` `ip -d -j link show` reports */
  readonly kernelKind: string;
  /** lwt `encap ip[6] dst NODE` routes (metadata device) or `via NODE onlink` (NBMA) */
  readonly route: "lwt" | "nbma";
  readonly mtu: number;
}

/** The LB host's devices per outer family (one device may serve both). */
export function lbTunnelDevices(encap: Encap): Readonly<Record<Fam, TunnelDevice>> {
  const port = String(encap.port ?? DEFAULT_ENCAP_PORT[encap.kind] ?? 0);
  const mtu4 = encap.mtu - ENCAP_OVERHEAD[encap.kind][4];
  const mtu6 = encap.mtu - ENCAP_OVERHEAD[encap.kind][6];
  switch (encap.kind) {
    case "vxlan-gpe": {
      // IPv6 outer needs zero-checksum UDP on both ends (measured in the lab: Udp6InCsumErrors
      // until `udp6zerocsumtx udp6zerocsumrx`); one device carries both families.
      const d: TunnelDevice = {
        name: "plbvg0",
        args: ["type", "vxlan", "gpe", "external", "dstport", port, "udp6zerocsumtx", "udp6zerocsumrx"],
        kernelKind: "vxlan",
        route: "lwt",
        mtu: mtu4,
      };
      return { 4: d, 6: d };
    }
    case "ipip":
      return {
        4: {
          name: "plbipip0",
          args: ["type", "ipip", "external"],
          kernelKind: "ipip",
          route: "lwt",
          mtu: mtu4,
        },
        6: {
          name: "plbip6tnl0",
          args: ["type", "ip6tnl", "mode", "ip6ip6", "external"],
          kernelKind: "ip6tnl",
          route: "lwt",
          mtu: mtu6,
        },
      };
    case "gre":
      return {
        4: { name: "plbgre0", args: ["type", "gre", "external"], kernelKind: "gre", route: "lwt", mtu: mtu4 },
        6: {
          name: "plbip6gre0",
          args: ["type", "ip6gre", "external"],
          kernelKind: "ip6gre",
          route: "lwt",
          mtu: mtu6,
        },
      };
    case "gue": {
      const gue = ["encap", "gue", "encap-sport", "auto", "encap-dport", port];
      return {
        4: {
          name: "plbgue4",
          args: ["type", "ipip", "remote", "any", "local", "any", ...gue],
          kernelKind: "ipip",
          route: "nbma",
          mtu: mtu4,
        },
        6: {
          name: "plbgue6",
          args: ["type", "ip6tnl", "mode", "ip6ip6", "remote", "any", "local", "any", ...gue],
          kernelKind: "ip6tnl",
          route: "nbma",
          mtu: mtu6,
        },
      };
    }
  }
}

/** The distinct devices of lbTunnelDevices, in a stable order. */
export function lbDeviceList(encap: Encap): TunnelDevice[] {
  const d = lbTunnelDevices(encap);
  return d[4] === d[6] ? [d[4]] : [d[4], d[6]];
}

/** `ip link` argv (without `ip`) that create and raise one device. */
export function deviceCommands(d: TunnelDevice): string[][] {
  return [
    ["link", "add", d.name, ...d.args],
    ["link", "set", d.name, "mtu", String(d.mtu), "up"],
  ];
}

/** The route text (after the destination) of one VIP in a node's table, for `ip -batch`. */
export function encapRouteSpec(encap: Encap, family: Fam, node: string): string {
  const d = lbTunnelDevices(encap)[family];
  // the route MTU makes forwarding answer an oversized DF packet with ICMP "fragmentation
  // needed" / "packet too big" (ip_dst_mtu_maybe_forward honours a route's mtu), instead of
  // the tunnel fragmenting the outer packet (VXLAN's default `df unset`, spec §C "MTU")
  const mtu = encap.mtu - ENCAP_OVERHEAD[encap.kind][family];
  if (d.route === "nbma") return `via ${node} dev ${d.name} onlink mtu ${mtu}`;
  return `encap ${family === 4 ? "ip" : "ip6"} id 0 dst ${node} dev ${d.name} mtu ${mtu}`;
}

/** TCP MSS a node advertises for VIP flows so that client → node segments fit the tunnel. */
export function clampedMss(encap: Encap, family: Fam): number {
  return encap.mtu - ENCAP_OVERHEAD[encap.kind][family] - (family === 4 ? 20 : 40) - 20;
}

export type ForwardFlags = {
  readonly forward?: string;
  readonly encap?: string;
  readonly encapPort?: string;
  readonly encapMtu?: string;
  readonly direct?: readonly string[];
  readonly encapCheck?: boolean;
};

/** Decodes the CLI flags shared by `passlb lb` and `passlb plan`; a string is the problem. */
export function forwardFromFlags(flags: ForwardFlags): Forward | string {
  const mode = flags.forward ?? "route";
  if (mode !== "route" && mode !== "encap") return `--forward ${mode}: expected route or encap`;
  if (mode === "route") {
    if (flags.encap !== undefined) return "--encap needs --forward encap";
    if (flags.encapCheck) return "--encap-check needs --forward encap";
    return ROUTE_FORWARD;
  }
  const encap = encapFromFlags(flags.encap ?? "vxlan-gpe", flags.encapPort, flags.encapMtu, "--encap");
  if (typeof encap === "string") return encap;
  const direct: Cidr[] = [];
  for (const text of flags.direct ?? []) {
    const c = parseCidr(text);
    if (!c) return `--direct ${text}: expected a CIDR such as 198.51.100.0/26`;
    direct.push(c);
  }
  return { mode: "encap", encap, direct, ...(flags.encapCheck && { check: true }) };
}

/** `--encap`/`--decap KIND [--encap-port N] [--encap-mtu N]` → Encap, or the problem. */
export function encapFromFlags(
  kind: string,
  portText: string | undefined,
  mtuText: string | undefined,
  flag: string,
): Encap | string {
  if (!(ENCAP_KINDS as readonly string[]).includes(kind))
    return `${flag} ${kind}: expected one of ${ENCAP_KINDS.join(", ")}`;
  const k = kind as EncapKind;
  let port = DEFAULT_ENCAP_PORT[k];
  if (portText !== undefined) {
    if (port === undefined) return `--encap-port: ${k} has no port`;
    port = Number(portText);
    if (!Number.isInteger(port) || port < 1 || port > 65535)
      return `--encap-port ${portText}: expected 1..65535`;
  }
  const mtu = Number(mtuText ?? "1500");
  if (!Number.isInteger(mtu) || mtu < 1280 || mtu > 65535)
    return `--encap-mtu ${mtuText}: expected 1280..65535`;
  return { kind: k, port, mtu };
}

/** Each member node's path label (describePath) under `forward`, by its first address
 * (IPv4, else IPv6): what `passlb plan` and the dashboard show. */
export function memberPaths(
  forward: Forward,
  members: readonly {
    readonly node: string;
    readonly addresses: { readonly IPv4?: string; readonly IPv6?: string };
  }[],
): Map<string, string> {
  const out = new Map<string, string>();
  for (const m of members) {
    const address = m.addresses.IPv4 ?? m.addresses.IPv6;
    if (address !== undefined) out.set(m.node, describePath(forward, nodePath(forward, address)));
  }
  return out;
}

/** One line for logs and `passlb plan`: `encap vxlan-gpe:4790` / `route`; with
 * `--encap-check`, `encap vxlan-gpe:4790, tunnel-checked` (a failed check takes the node
 * out with the reason `tunnel_check_failed`). */
export function describePath(forward: Forward, path: NodePath): string {
  if (path === "route" || forward.mode === "route") return "route";
  const e = forward.encap;
  return `encap ${e.kind}${e.port === undefined ? "" : `:${e.port}`}${forward.check ? ", tunnel-checked" : ""}`;
}
