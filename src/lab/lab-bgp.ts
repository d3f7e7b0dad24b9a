/**
 * The lab's routed LB tier (docs/lab.md "A router with BGP"), for topologies with `bgp:`:
 * the router's FRR configuration (bgpd + bfdd: a different speaker than the LB hosts' BIRD,
 * so interoperation is what is tested, as with a real ToR), the `passlb lb` flags of each LB
 * host, and the kernel settings the topology needs. Pure, like lab-layout.ts.
 *
 *   router (the topology's `lb` namespace)  FRR AS `routerAsn`, a neighbour per LB host on the
 *        node segment (198.51.100.(2+i), fd00:198:51:100::(2+i)), BFD profile interval ×
 *        multiplier, `maximum-paths 16` per family (ECMP; all LB hosts share one ASN, so
 *        their paths are equal without `multipath-relax`: docs/lab.md "A router with BGP"), L4
 *        hashing (`fib_multipath_hash_policy=1`, set by lab-layout.ts), no redirects
 *        accepted (a redirect would send VIP traffic past the LB hosts).
 *   LB host i   `passlb lb --announce bgp --bgp-asn asn --bgp-peer 198.51.100.1:routerAsn
 *        --bgp-peer [fd00:198:51:100::1]:routerAsn`, router id = its node-segment address;
 *        no ICMP redirects sent (it forwards out the interface the packet came in on).
 *   clients     `net.core.txrehash=0`: across veth the sender's flow hash reaches the
 *        router's multipath hash, and a retransmission would re-roll it and move the flow to
 *        another LB host by itself, hiding failures (issue #19 §2).
 * FRR syntax: FRRouting/frr@frr-8.4.4:doc/user/bgp.rst (neighbor, peer-group, maximum-paths,
 * bfd profile), doc/user/bfd.rst (profile, receive-interval, transmit-interval,
 * detect-multiplier).
 */
import { type Command, LB_NODE_GATEWAY4, LB_NODE_GATEWAY6, sysctlCommand } from "./lab-host-commands.ts";
import type { LabHost } from "./lab-layout.ts";
import type { LabLbHost } from "./lab-lb-hosts.ts";
import type { Topology } from "./topology.ts";

export type LabBgp = NonNullable<Topology["bgp"]>;

export interface FrrFiles {
  readonly "zebra.conf": string;
  readonly "bfdd.conf": string;
  readonly "bgpd.conf": string;
}

export function frrRouterFiles(hosts: readonly LabLbHost[], bgp: LabBgp): FrrFiles {
  const group = (name: string) => [
    ` neighbor ${name} peer-group`,
    ` neighbor ${name} remote-as ${bgp.asn}`,
    ` neighbor ${name} bfd`,
    ` neighbor ${name} bfd profile passlb`,
    ` neighbor ${name} timers 3 ${bgp.holdSeconds}`,
    ` neighbor ${name} timers connect 1`,
  ];
  const bgpd = [
    "! passlb lab router (lab-bgp.ts)",
    `router bgp ${bgp.routerAsn}`,
    ` bgp router-id ${LB_NODE_GATEWAY4}`,
    " no bgp ebgp-requires-policy",
    " no bgp default ipv4-unicast",
    ...group("LBS"),
    ...group("LBS6"),
    ...hosts.flatMap((h) => [
      ` neighbor ${h.nodeIpv4} peer-group LBS`,
      ` neighbor ${h.nodeIpv6} peer-group LBS6`,
    ]),
    " address-family ipv4 unicast",
    "  neighbor LBS activate",
    "  maximum-paths 16",
    " exit-address-family",
    " address-family ipv6 unicast",
    "  neighbor LBS6 activate",
    "  maximum-paths 16",
    " exit-address-family",
    "exit",
    "",
  ];
  const bfdd = [
    "! passlb lab router (lab-bgp.ts)",
    "bfd",
    " profile passlb",
    `  receive-interval ${bgp.bfdIntervalMs}`,
    `  transmit-interval ${bgp.bfdIntervalMs}`,
    `  detect-multiplier ${bgp.bfdMultiplier}`,
    " exit",
    "exit",
    "",
  ];
  return {
    "zebra.conf": "! passlb lab router (lab-bgp.ts)\n",
    "bfdd.conf": bfdd.join("\n"),
    "bgpd.conf": bgpd.join("\n"),
  };
}

/** The `passlb lb` flags of one LB host of a BGP lab; `stateDir` is where its BIRD lives. */
export function labBgpLbArgs(host: LabLbHost, bgp: LabBgp, stateDir: string): string[] {
  return [
    "--dataplane=nftables",
    "--announce=bgp",
    `--bgp-asn=${bgp.asn}`,
    `--bgp-peer=${LB_NODE_GATEWAY4}:${bgp.routerAsn}`,
    `--bgp-peer=[${LB_NODE_GATEWAY6}]:${bgp.routerAsn}`,
    `--bgp-router-id=${host.nodeIpv4}`,
    `--bfd-interval-ms=${bgp.bfdIntervalMs}`,
    `--bfd-multiplier=${bgp.bfdMultiplier}`,
    `--bgp-hold-s=${bgp.holdSeconds}`,
    `--state-dir=${stateDir}`,
    // the router takes a withdrawal in milliseconds (docs/vip-announce.md "How a VIP is announced"); 1 s is
    // ample and keeps a graceful stop inside the lab's 3 s SIGTERM grace
    "--bgp-converge-ms=1000",
    "--claim-nat",
  ];
}

/** Kernel settings of a BGP lab (run after the hosts and links exist). */
export function labBgpCommands(
  router: LabHost,
  hosts: readonly LabLbHost[],
  clients: readonly LabHost[],
): Command[] {
  const noRedirects = (prefix: string, devs: readonly string[]) =>
    ["all", "default", ...devs].map((d) => `net.ipv4.conf.${d}.${prefix}_redirects=0`);
  return [
    sysctlCommand(router, ...noRedirects("accept", []), "net.ipv6.conf.all.accept_redirects=0"),
    ...hosts.map((h) => sysctlCommand(h, ...noRedirects("send", ["eth0", "eth1"]))),
    ...clients.map((c) => sysctlCommand(c, "net.core.txrehash=0")),
  ];
}
