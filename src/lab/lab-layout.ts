/**
 * The lab's addressing plan and build steps (docs/lab.md "Addressing"), from a topology:
 * every host's network namespace, addresses and routes, as a list of `ip` and `/proc/sys`
 * commands an adapter runs in order. Pure and deterministic: the same topology always
 * gives the same addresses, so tests and docs can rely on them.
 *
 *   LB/router namespace  bridge plbnodes   198.51.100.1/24, fd00:198:51:100::1/64
 *                        bridge plbclients 192.0.2.(64z+1)/26, fd00:192:0:(z+1)::1/64 per zone z
 *   node n of zone z     eth0 198.51.100.(10(z+1)+n+1), fd00:198:51:100::(same digits)
 *   pods, in file order  203.0.113.65 upwards (/32) and fd00:203::41 upwards (/128) on eth0,
 *                        behind a veth to their node; node routes each pod (/32, /128)
 *   client c of zone z   192.0.2.(64z+10+c)/26, fd00:192:0:(z+1)::(10+c)/64
 * Nodes default-route to the LB (198.51.100.1), so replies go straight back through it to
 * the client (direct server return: the LB forwards them as a plain router); every node
 * and the LB route each pod address to its node. Every name is prefixed `plb`; every link
 * is created inside the lab's namespaces, none in the caller's.
 *
 * It does not choose VIPs (the planner does) and does not run anything.
 */
import { type LabLbHost, labLbHosts, lbHostCommands } from "./lab-lb-hosts.ts";
import { lbHostNames, type Topology, type TopologyPod } from "./topology.ts";

export type HostRole = "lb" | "client" | "node" | "pod";

export interface LabHost {
  readonly name: string;
  readonly role: HostRole;
  /** network namespace name */
  readonly ns: string;
  readonly zone: string | undefined;
  readonly ipv4: string;
  readonly ipv6: string;
}

export interface LabPod extends LabHost {
  readonly role: "pod";
  readonly node: string;
  readonly namespace: string;
  readonly spec: TopologyPod;
}

export interface LabNode extends LabHost {
  readonly role: "node";
  readonly excludeFromLoadBalancers: boolean;
  readonly pods: readonly LabPod[];
}

export interface LabZone {
  readonly name: string;
  readonly clientCidr4: string;
  readonly clientCidr6: string;
}

export interface LabLayout {
  readonly name: string;
  /** every namespace of this lab starts with it: `plb-<name>-` */
  readonly prefix: string;
  /** the LB host; with `lbHosts` ≥ 2 only the segments' router (lab-lb-hosts.ts) */
  readonly lb: LabHost;
  /** LB hosts on the shared client segment (empty in the classic lab) */
  readonly lbHosts: readonly LabLbHost[];
  readonly zones: readonly LabZone[];
  readonly clients: readonly LabHost[];
  readonly nodes: readonly LabNode[];
  readonly pods: readonly LabPod[];
  /** argv lists, run in order; every one must succeed */
  readonly commands: readonly (readonly string[])[];
}

const NODE_BRIDGE = "plbnodes";
const CLIENT_BRIDGE = "plbclients";
export const LB_NODE_GATEWAY4 = "198.51.100.1";
export const LB_NODE_GATEWAY6 = "fd00:198:51:100::1";

export function labPrefix(name: string): string {
  return `plb-${name}-`;
}

export function labLayout(t: Topology): LabLayout {
  const prefix = labPrefix(t.name);
  const ns = (host: string) => `${prefix}${host}`;
  const lb: LabHost = {
    name: t.lb.name,
    role: "lb",
    ns: ns(t.lb.name),
    zone: undefined,
    ipv4: LB_NODE_GATEWAY4,
    ipv6: LB_NODE_GATEWAY6,
  };
  const zones: LabZone[] = [];
  const clients: LabHost[] = [];
  const nodes: LabNode[] = [];
  const pods: LabPod[] = [];
  let podIndex = 0;
  t.zones.forEach((zone, z) => {
    zones.push({
      name: zone.name,
      clientCidr4: `192.0.2.${64 * z}/26`,
      clientCidr6: `fd00:192:0:${z + 1}::/64`,
    });
    zone.clients.forEach((c, i) => {
      clients.push({
        name: c,
        role: "client",
        ns: ns(c),
        zone: zone.name,
        ipv4: `192.0.2.${64 * z + 10 + i}`,
        ipv6: `fd00:192:0:${z + 1}::${10 + i}`,
      });
    });
    zone.nodes.forEach((n, i) => {
      const digits = `${10 * (z + 1) + i + 1}`;
      const nodePods: LabPod[] = n.pods.map((p) => {
        const last = 65 + podIndex++;
        return {
          name: p.name,
          role: "pod",
          ns: ns(p.name),
          zone: zone.name,
          ipv4: `203.0.113.${last}`,
          ipv6: `fd00:203::${last.toString(16)}`,
          node: n.name,
          namespace: p.namespace ?? t.namespace,
          spec: p,
        };
      });
      pods.push(...nodePods);
      nodes.push({
        name: n.name,
        role: "node",
        ns: ns(n.name),
        zone: zone.name,
        ipv4: `198.51.100.${digits}`,
        ipv6: `fd00:198:51:100::${digits}`,
        excludeFromLoadBalancers: n.excludeFromLoadBalancers,
        pods: nodePods,
      });
    });
  });
  if (podIndex > 62) throw new Error(`the lab has room for 62 pods (203.0.113.65-126), not ${podIndex}`);
  const lbHosts = labLbHosts(lbHostNames(t), ns);
  const sysctl = (h: LabHost, settings: readonly string[]) => [
    "ip",
    "netns",
    "exec",
    h.ns,
    "sh",
    "-c",
    procSysScript(settings),
  ];
  return {
    name: t.name,
    prefix,
    lb,
    lbHosts,
    zones,
    clients,
    nodes,
    pods,
    commands: [
      ...buildCommands(lb, zones, clients, nodes),
      ...lbHostCommands(lb, lbHosts, clients, { clients: CLIENT_BRIDGE, nodes: NODE_BRIDGE }, sysctl),
    ],
  };
}

function buildCommands(
  lb: LabHost,
  zones: readonly LabZone[],
  clients: readonly LabHost[],
  nodes: readonly LabNode[],
): string[][] {
  const cmds: string[][] = [];
  const ipn = (host: LabHost, ...args: string[]) => cmds.push(["ip", "-n", host.ns, ...args]);
  // Kernel settings are written to /proc/sys from inside the namespace (no procps needed).
  const sysctl = (host: LabHost, ...settings: string[]) =>
    cmds.push(["ip", "netns", "exec", host.ns, "sh", "-c", procSysScript(settings)]);
  const pods = nodes.flatMap((n) => n.pods);
  const all: LabHost[] = [lb, ...clients, ...nodes, ...pods];
  for (const h of all) {
    cmds.push(["ip", "netns", "add", h.ns]);
    // No duplicate address detection: addresses are usable at once and never clash here.
    sysctl(h, "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0");
    ipn(h, "link", "set", "lo", "up");
  }
  const router = [
    "net.ipv4.ip_forward=1",
    "net.ipv6.conf.all.forwarding=1",
    "net.ipv4.conf.all.rp_filter=0",
    "net.ipv4.conf.default.rp_filter=0",
  ];
  // ECMP routes (`passlb lab route VIP n1 n2`) spread flows by their ports, not only addresses
  sysctl(lb, ...router, "net.ipv4.fib_multipath_hash_policy=1", "net.ipv6.fib_multipath_hash_policy=1");
  ipn(lb, "link", "add", NODE_BRIDGE, "type", "bridge");
  ipn(lb, "link", "set", NODE_BRIDGE, "up");
  ipn(lb, "addr", "add", `${LB_NODE_GATEWAY4}/24`, "dev", NODE_BRIDGE);
  ipn(lb, "addr", "add", `${LB_NODE_GATEWAY6}/64`, "dev", NODE_BRIDGE, "nodad");
  ipn(lb, "link", "add", CLIENT_BRIDGE, "type", "bridge");
  ipn(lb, "link", "set", CLIENT_BRIDGE, "up");
  zones.forEach((zone, z) => {
    ipn(lb, "addr", "add", `192.0.2.${64 * z + 1}/26`, "dev", CLIENT_BRIDGE);
    ipn(lb, "addr", "add", `${zone.clientCidr6.replace("::/64", "::1")}/64`, "dev", CLIENT_BRIDGE, "nodad");
  });
  clients.forEach((c, i) => {
    const port = `plbc${i}`;
    const z = zones.findIndex((zone) => zone.name === c.zone);
    ipn(lb, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", c.ns);
    ipn(lb, "link", "set", port, "master", CLIENT_BRIDGE, "up");
    ipn(c, "link", "set", "eth0", "up");
    ipn(c, "addr", "add", `${c.ipv4}/26`, "dev", "eth0");
    ipn(c, "addr", "add", `${c.ipv6}/64`, "dev", "eth0", "nodad");
    ipn(c, "route", "add", "default", "via", `192.0.2.${64 * z + 1}`);
    ipn(c, "route", "add", "::/0", "via", `fd00:192:0:${z + 1}::1`);
  });
  nodes.forEach((n, i) => {
    const port = `plbn${i}`;
    sysctl(n, ...router);
    ipn(lb, "link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", n.ns);
    ipn(lb, "link", "set", port, "master", NODE_BRIDGE, "up");
    ipn(n, "link", "set", "eth0", "up");
    ipn(n, "addr", "add", `${n.ipv4}/24`, "dev", "eth0");
    ipn(n, "addr", "add", `${n.ipv6}/64`, "dev", "eth0", "nodad");
    ipn(n, "route", "add", "default", "via", LB_NODE_GATEWAY4);
    ipn(n, "route", "add", "::/0", "via", LB_NODE_GATEWAY6);
    n.pods.forEach((p, j) => {
      const veth = `plbp${j}`;
      ipn(n, "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", p.ns);
      ipn(n, "link", "set", veth, "up");
      // The pod's gateway: proxy ARP answers for every address (IPv4) — at once, not after
      // the default random delay of up to 0.8 s — and fe80::1 (IPv6).
      sysctl(n, `net.ipv4.conf.${veth}.proxy_arp=1`, `net.ipv4.neigh.${veth}.proxy_delay=0`);
      ipn(n, "addr", "add", "fe80::1/64", "dev", veth, "nodad");
      ipn(n, "route", "add", `${p.ipv4}/32`, "dev", veth);
      ipn(n, "route", "add", `${p.ipv6}/128`, "dev", veth);
      ipn(p, "link", "set", "eth0", "up");
      ipn(p, "addr", "add", `${p.ipv4}/32`, "dev", "eth0");
      ipn(p, "addr", "add", `${p.ipv6}/128`, "dev", "eth0", "nodad");
      ipn(p, "route", "add", "default", "dev", "eth0");
      ipn(p, "route", "add", "::/0", "via", "fe80::1", "dev", "eth0");
    });
  });
  // Pod addresses are reachable from every node and from the LB, through their node.
  for (const h of [lb, ...nodes])
    for (const owner of nodes) {
      if (h === owner) continue;
      for (const p of owner.pods) {
        ipn(h, "route", "add", `${p.ipv4}/32`, "via", owner.ipv4);
        ipn(h, "route", "add", `${p.ipv6}/128`, "via", owner.ipv6);
      }
    }
  return cmds;
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
