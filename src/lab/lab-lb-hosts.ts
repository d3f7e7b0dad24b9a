/**
 * The lab's LB hosts on a shared segment (docs/lab.md "Several LB hosts"), for topologies
 * with `lbHosts: 2` or more: their addresses and the `ip` commands that attach each to both
 * bridges of the router namespace. Pure, like lab-layout.ts.
 *
 *   LB host i (0-based)  eth0 on plbclients  192.0.2.(2+i)/26, fd00:192:0:1::(2+i)/64
 *                        eth1 on plbnodes    198.51.100.(2+i)/24, fd00:198:51:100::(2+i)/64
 *   clients              on-link routes for the VIP ranges 203.0.113.0/26 and fd00:10::/64,
 *                        so they ask the segment (ARP / neighbour solicitation) who holds a
 *                        VIP instead of sending it to their router
 * The router namespace (the topology's `lb` host) keeps its bridges, addresses and routes;
 * it only routes (the nodes' replies to clients still pass through it).
 */
import type { LabHost } from "./lab-layout.ts";

export interface LabLbHost extends LabHost {
  readonly role: "lb";
  /** the segment interface VIPs are held on (the client side) */
  readonly segmentInterface: "eth0";
  /** address on the node segment (eth1) */
  readonly nodeIpv4: string;
  readonly nodeIpv6: string;
}

export const LAB_VIP_RANGE4 = "203.0.113.0/26";
export const LAB_VIP_RANGE6 = "fd00:10::/64";

export function labLbHosts(names: readonly string[], ns: (host: string) => string): LabLbHost[] {
  return names.map((name, i) => ({
    name,
    role: "lb",
    ns: ns(name),
    zone: undefined,
    ipv4: `192.0.2.${2 + i}`,
    ipv6: `fd00:192:0:1::${2 + i}`,
    segmentInterface: "eth0",
    nodeIpv4: `198.51.100.${2 + i}`,
    nodeIpv6: `fd00:198:51:100::${2 + i}`,
  }));
}

/** `--peers` of `passlb lb --announce l2` for these hosts: name=client-segment address, both families. */
export function labPeers(hosts: readonly LabLbHost[]): string {
  return hosts.flatMap((h) => [`${h.name}=${h.ipv4}`, `${h.name}=${h.ipv6}`]).join(",");
}

export function lbHostCommands(
  router: LabHost,
  hosts: readonly LabLbHost[],
  clients: readonly LabHost[],
  bridges: { clients: string; nodes: string },
  procSys: (host: LabHost, settings: readonly string[]) => string[],
  /** false in a BGP lab (lab-bgp.ts): clients reach VIPs through their router instead */
  onLinkVips = true,
): string[][] {
  if (hosts.length === 0) return [];
  const cmds: string[][] = [];
  const ipn = (host: LabHost, ...args: string[]) => cmds.push(["ip", "-n", host.ns, ...args]);
  hosts.forEach((h, i) => {
    cmds.push(["ip", "netns", "add", h.ns]);
    cmds.push(
      procSys(h, [
        "net.ipv6.conf.all.accept_dad=0",
        "net.ipv6.conf.default.accept_dad=0",
        "net.ipv4.ip_forward=1",
        "net.ipv6.conf.all.forwarding=1",
        "net.ipv4.conf.all.rp_filter=0",
        "net.ipv4.conf.default.rp_filter=0",
        // a host whose links go down and up again keeps its IPv6 addresses, as its IPv4 ones
        // (the L2 test's "holder dies" downs the links; keepalived's IPv6 instances need them)
        "net.ipv6.conf.all.keep_addr_on_down=1",
      ]),
    );
    ipn(h, "link", "set", "lo", "up");
    for (const [dev, port, bridge] of [
      ["eth0", `plbl${i}c`, bridges.clients],
      ["eth1", `plbl${i}n`, bridges.nodes],
    ] as const) {
      ipn(router, "link", "add", port, "type", "veth", "peer", "name", dev, "netns", h.ns);
      ipn(router, "link", "set", port, "master", bridge, "up");
      ipn(h, "link", "set", dev, "up");
    }
    ipn(h, "addr", "add", `${h.ipv4}/26`, "dev", "eth0");
    ipn(h, "addr", "add", `${h.ipv6}/64`, "dev", "eth0", "nodad");
    ipn(h, "addr", "add", `${h.nodeIpv4}/24`, "dev", "eth1");
    ipn(h, "addr", "add", `${h.nodeIpv6}/64`, "dev", "eth1", "nodad");
  });
  for (const c of onLinkVips ? clients : []) {
    ipn(c, "route", "add", LAB_VIP_RANGE4, "dev", "eth0");
    ipn(c, "route", "add", LAB_VIP_RANGE6, "dev", "eth0");
  }
  return cmds;
}
