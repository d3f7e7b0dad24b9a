/**
 * The lab's routed zones (docs/lab.md "Routed zones", issue 21): a router namespace between
 * the LB host and subnets of nodes that share no segment with it. Pure: hosts in, addresses
 * and `ip` argv lists out; lab-layout.ts places them among the other build steps.
 *
 *   LB host ── plbrt (veth) ── router eth0     198.51.100.129/30 ↔ .130, fd00:198:51:200::1 ↔ ::2
 *   router bridge plbz<z> (routed zone z)      198.51.100.(64+16z+14)/28, fd00:198:51:(101+z)::fe/64
 *   node n of routed zone z                    198.51.100.(64+16z+n+1)/28, fd00:198:51:(101+z)::(n+1)
 *   router eth1 on the LB host's client bridge 192.0.2.(64z+2)/26, fd00:192:0:(z+1)::2/64 per zone
 * The routed subnets lie inside the node segment's 198.51.100.0/24, so the LB host and the
 * segment's nodes hold more specific routes to them (via the router, via the LB host).
 * Routed nodes default-route to the router, which reaches clients on its own port on their
 * segment: their replies (source VIP, direct server return) never pass the LB host. Their
 * `all.rp_filter` is 2, as Debian and Ubuntu ship it, so the agent's decap handling of loose
 * mode is exercised.
 *
 * The router runs nothing but forwarding; a BGP speaker can be added there later (it has
 * an address on every segment). Does not: choose VIPs, start processes.
 */
import type { Command } from "./lab-host-commands.ts";
import {
  CLIENT_BRIDGE,
  LB_NODE_GATEWAY4,
  LB_NODE_GATEWAY6,
  ROUTER_SETTINGS,
  sysctlCommand,
} from "./lab-host-commands.ts";
import type { LabHost, LabNode, LabZone } from "./lab-layout.ts";

export const ROUTER_TRANSIT4 = { lb: "198.51.100.129", router: "198.51.100.130" } as const;
export const ROUTER_TRANSIT6 = { lb: "fd00:198:51:200::1", router: "fd00:198:51:200::2" } as const;
/** the LB host's end of its link to the router */
export const ROUTER_LINK = "plbrt";
/** the router's port on the client bridge (in the LB host's namespace) */
export const ROUTER_CLIENT_PORT = "plbrc";

/** routed zone z (0-based topology index): its node subnets */
export function routedSubnet(z: number): {
  cidr4: string;
  cidr6: string;
  gateway4: string;
  gateway6: string;
} {
  const base = 64 + 16 * z;
  return {
    cidr4: `198.51.100.${base}/28`,
    cidr6: `fd00:198:51:${101 + z}::/64`,
    gateway4: `198.51.100.${base + 14}`,
    gateway6: `fd00:198:51:${101 + z}::fe`,
  };
}

/** node n (0-based) of routed zone z */
export function routedNodeAddress(z: number, n: number): { ipv4: string; ipv6: string } {
  return { ipv4: `198.51.100.${64 + 16 * z + n + 1}`, ipv6: `fd00:198:51:${101 + z}::${n + 1}` };
}

const ipn = (host: LabHost, ...args: string[]): Command => ["ip", "-n", host.ns, ...args];

/** The router itself: transit link to the LB host, a port on the client bridge, and the
 * routes each side needs. `routedZones` are the topology indexes of the routed zones. */
export function routerCommands(
  lb: LabHost,
  router: LabHost,
  zones: readonly LabZone[],
  routedZones: readonly number[],
): Command[] {
  const cmds: Command[] = [
    sysctlCommand(router, ...ROUTER_SETTINGS),
    ipn(lb, "link", "add", ROUTER_LINK, "type", "veth", "peer", "name", "eth0", "netns", router.ns),
    ipn(lb, "link", "set", ROUTER_LINK, "up"),
    ipn(lb, "addr", "add", `${ROUTER_TRANSIT4.lb}/30`, "dev", ROUTER_LINK),
    ipn(lb, "addr", "add", `${ROUTER_TRANSIT6.lb}/64`, "dev", ROUTER_LINK, "nodad"),
    ipn(router, "link", "set", "eth0", "up"),
    ipn(router, "addr", "add", `${ROUTER_TRANSIT4.router}/30`, "dev", "eth0"),
    ipn(router, "addr", "add", `${ROUTER_TRANSIT6.router}/64`, "dev", "eth0", "nodad"),
    // the router's way to everything the LB host serves (the node segment, pods there)
    ipn(router, "route", "add", "default", "via", ROUTER_TRANSIT4.lb),
    ipn(router, "route", "add", "::/0", "via", ROUTER_TRANSIT6.lb),
    // its own port on the client segment: replies to clients bypass the LB host
    ipn(lb, "link", "add", ROUTER_CLIENT_PORT, "type", "veth", "peer", "name", "eth1", "netns", router.ns),
    ipn(lb, "link", "set", ROUTER_CLIENT_PORT, "master", CLIENT_BRIDGE, "up"),
    ipn(router, "link", "set", "eth1", "up"),
  ];
  zones.forEach((zone, z) => {
    cmds.push(ipn(router, "addr", "add", `192.0.2.${64 * z + 2}/26`, "dev", "eth1"));
    cmds.push(
      ipn(router, "addr", "add", `${zone.clientCidr6.replace("::/64", "::2")}/64`, "dev", "eth1", "nodad"),
    );
  });
  for (const z of routedZones) {
    const s = routedSubnet(z);
    const bridge = `plbz${z}`;
    cmds.push(
      ipn(router, "link", "add", bridge, "type", "bridge"),
      ipn(router, "link", "set", bridge, "up"),
      ipn(router, "addr", "add", `${s.gateway4}/28`, "dev", bridge),
      ipn(router, "addr", "add", `${s.gateway6}/64`, "dev", bridge, "nodad"),
      ipn(lb, "route", "add", s.cidr4, "via", ROUTER_TRANSIT4.router),
      ipn(lb, "route", "add", s.cidr6, "via", ROUTER_TRANSIT6.router),
    );
  }
  return cmds;
}

/** Segment nodes see 198.51.100.0/24 as on-link: the routed subnets go through the LB host
 * (after the nodes' links exist). */
export function segmentToRoutedCommands(
  segmentNodes: readonly LabNode[],
  routedZones: readonly number[],
): Command[] {
  return routedZones.flatMap((z) =>
    segmentNodes.map((n) => ipn(n, "route", "add", routedSubnet(z).cidr4, "via", LB_NODE_GATEWAY4)),
  );
}

/** a node of routed zone z on its router bridge (router side of the veth: `n.veth`) */
export function routedNodeLinkCommands(router: LabHost, n: LabNode, z: number): Command[] {
  const s = routedSubnet(z);
  return [
    sysctlCommand(
      n,
      ...ROUTER_SETTINGS,
      "net.ipv4.conf.all.rp_filter=2",
      "net.ipv4.conf.default.rp_filter=2",
    ),
    ipn(router, "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.ns),
    ipn(router, "link", "set", n.veth, "master", `plbz${z}`, "up"),
    ipn(n, "link", "set", "eth0", "up"),
    ipn(n, "addr", "add", `${n.ipv4}/28`, "dev", "eth0"),
    ipn(n, "addr", "add", `${n.ipv6}/64`, "dev", "eth0", "nodad"),
    ipn(n, "route", "add", "default", "via", s.gateway4),
    ipn(n, "route", "add", "::/0", "via", s.gateway6),
  ];
}

/**
 * Where host `h` sends packets for a pod of `owner`: the owner itself when both share a
 * segment, else the next router on the way (LB host ⇄ router ⇄ routed subnet).
 */
export function podNextHop(
  h: LabHost,
  owner: LabNode,
  where: (host: LabHost) => { kind: "lb" | "router" | "segment" | "routed"; zone?: number },
): { ipv4: string; ipv6: string } {
  const a = where(h);
  const b = where(owner);
  const direct = { ipv4: owner.ipv4, ipv6: owner.ipv6 };
  if (b.kind === "segment") {
    if (a.kind === "lb" || a.kind === "segment") return direct;
    if (a.kind === "router") return { ipv4: ROUTER_TRANSIT4.lb, ipv6: ROUTER_TRANSIT6.lb };
    const s = routedSubnet(a.zone!);
    return { ipv4: s.gateway4, ipv6: s.gateway6 };
  }
  // owner is routed
  if (a.kind === "router" || (a.kind === "routed" && a.zone === b.zone)) return direct;
  if (a.kind === "lb") return { ipv4: ROUTER_TRANSIT4.router, ipv6: ROUTER_TRANSIT6.router };
  if (a.kind === "segment") return { ipv4: LB_NODE_GATEWAY4, ipv6: LB_NODE_GATEWAY6 };
  const s = routedSubnet(a.zone!);
  return { ipv4: s.gateway4, ipv6: s.gateway6 };
}
