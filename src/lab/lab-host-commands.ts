/**
 * The `ip` and `/proc/sys` steps that build (and unroute) one lab host, shared by the
 * lab's first build (lab-layout.ts) and by a running lab that grows or shrinks
 * (lab-change.ts): a namespace's basics, a client on its zone's segment, a node on the node
 * segment, a pod behind its veth, and the routes other hosts hold to a pod. The addressing
 * plan itself (which host gets which address) is docs/lab.md "Addressing". Pure: hosts in,
 * argv lists out; nothing here runs them.
 */
import type { LabHost, LabNode, LabPod, LabZone } from "./lab-layout.ts";

export type Command = string[];

export const NODE_BRIDGE = "plbnodes";
export const CLIENT_BRIDGE = "plbclients";
export const LB_NODE_GATEWAY4 = "198.51.100.1";
export const LB_NODE_GATEWAY6 = "fd00:198:51:100::1";

/** what a node's namespace sets to forward for its pods */
export const ROUTER_SETTINGS = [
  "net.ipv4.ip_forward=1",
  "net.ipv6.conf.all.forwarding=1",
  "net.ipv4.conf.all.rp_filter=0",
  "net.ipv4.conf.default.rp_filter=0",
];

const ipn = (host: LabHost, ...args: string[]): Command => ["ip", "-n", host.ns, ...args];

/** Kernel settings are written to /proc/sys from inside the namespace (no procps needed). */
export const sysctlCommand = (host: LabHost, ...settings: string[]): Command => [
  "ip",
  "netns",
  "exec",
  host.ns,
  "sh",
  "-c",
  procSysScript(settings),
];

/** A new namespace with loopback up; no duplicate address detection (addresses never clash). */
export function hostInitCommands(h: LabHost): Command[] {
  return [
    ["ip", "netns", "add", h.ns],
    sysctlCommand(h, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"),
    ipn(h, "link", "set", "lo", "up"),
  ];
}

/** zone z's gateway addresses on the LB host's client bridge (`replace`: also when present) */
export function zoneGatewayCommands(
  lb: LabHost,
  zone: LabZone,
  z: number,
  verb: "add" | "replace" = "add",
): Command[] {
  return [
    ipn(lb, "addr", verb, `192.0.2.${64 * z + 1}/26`, "dev", CLIENT_BRIDGE),
    ipn(lb, "addr", verb, `${zone.clientCidr6.replace("::/64", "::1")}/64`, "dev", CLIENT_BRIDGE, "nodad"),
  ];
}

/** client host `c` of zone index `z` on the client bridge, through LB port `port` */
export function clientLinkCommands(lb: LabHost, c: LabHost, z: number, port: string): Command[] {
  return [
    ipn(lb, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", c.ns),
    ipn(lb, "link", "set", port, "master", CLIENT_BRIDGE, "up"),
    ipn(c, "link", "set", "eth0", "up"),
    ipn(c, "addr", "add", `${c.ipv4}/26`, "dev", "eth0"),
    ipn(c, "addr", "add", `${c.ipv6}/64`, "dev", "eth0", "nodad"),
    ipn(c, "route", "add", "default", "via", `192.0.2.${64 * z + 1}`),
    ipn(c, "route", "add", "::/0", "via", `fd00:192:0:${z + 1}::1`),
  ];
}

/** a node on the node bridge (LB side of its veth: `n.veth`), default-routed to the LB */
export function nodeLinkCommands(lb: LabHost, n: LabNode): Command[] {
  return [
    sysctlCommand(n, ...ROUTER_SETTINGS),
    ipn(lb, "link", "add", n.veth, "type", "veth", "peer", "name", "eth0", "netns", n.ns),
    ipn(lb, "link", "set", n.veth, "master", NODE_BRIDGE, "up"),
    ipn(n, "link", "set", "eth0", "up"),
    ipn(n, "addr", "add", `${n.ipv4}/24`, "dev", "eth0"),
    ipn(n, "addr", "add", `${n.ipv6}/64`, "dev", "eth0", "nodad"),
    ipn(n, "route", "add", "default", "via", LB_NODE_GATEWAY4),
    ipn(n, "route", "add", "::/0", "via", LB_NODE_GATEWAY6),
  ];
}

/** a pod behind its veth on its node (node side: `p.veth`) */
export function podLinkCommands(n: LabHost, p: LabPod): Command[] {
  return [
    ipn(n, "link", "add", p.veth, "type", "veth", "peer", "name", "eth0", "netns", p.ns),
    ipn(n, "link", "set", p.veth, "up"),
    // The pod's gateway: proxy ARP answers for every address (IPv4) — at once, not after
    // the default random delay of up to 0.8 s — and fe80::1 (IPv6).
    sysctlCommand(n, `net.ipv4.conf.${p.veth}.proxy_arp=1`, `net.ipv4.neigh.${p.veth}.proxy_delay=0`),
    ipn(n, "addr", "add", "fe80::1/64", "dev", p.veth, "nodad"),
    ipn(n, "route", "add", `${p.ipv4}/32`, "dev", p.veth),
    ipn(n, "route", "add", `${p.ipv6}/128`, "dev", p.veth),
    ipn(p, "link", "set", "eth0", "up"),
    ipn(p, "addr", "add", `${p.ipv4}/32`, "dev", "eth0"),
    ipn(p, "addr", "add", `${p.ipv6}/128`, "dev", "eth0", "nodad"),
    ipn(p, "route", "add", "default", "dev", "eth0"),
    ipn(p, "route", "add", "::/0", "via", "fe80::1", "dev", "eth0"),
  ];
}

/** host `h` (the LB or another node) reaches pod `p` through `owner` (its node, or the
 * next router on the way: lab-router.ts podNextHop) */
export function podRouteCommands(h: LabHost, owner: Pick<LabHost, "ipv4" | "ipv6">, p: LabPod): Command[] {
  return [
    ipn(h, "route", "add", `${p.ipv4}/32`, "via", owner.ipv4),
    ipn(h, "route", "add", `${p.ipv6}/128`, "via", owner.ipv6),
  ];
}

/** the reverse of podRouteCommands (the owner's own routes go with the pod's veth) */
export function podUnrouteCommands(h: LabHost, p: LabPod): Command[] {
  return [ipn(h, "route", "del", `${p.ipv4}/32`), ipn(h, "route", "del", `${p.ipv6}/128`)];
}

/** `a.b.c=v` settings as one shell line writing /proc/sys/a/b/c (names here have no dots). */
export function procSysScript(settings: readonly string[]): string {
  return settings
    .map((kv) => {
      const [key, value] = kv.split("=");
      return `echo ${value} > /proc/sys/${key!.replaceAll(".", "/")}`;
    })
    .join(" && ");
}
