/**
 * The lab's addressing plan and build steps (docs/lab.md "Addressing"), from a topology:
 * every host's network namespace, addresses and routes, as a list of `ip` and `/proc/sys`
 * commands an adapter runs in order. Pure and deterministic: the same topology always
 * gives the same addresses, so tests and docs can rely on them.
 *
 *   LB/router namespace  bridge plbnodes   198.51.100.1/24, fd00:198:51:100::1/64
 *                        bridge plbclients 192.0.2.(64z+1)/26, fd00:192:0:(z+1)::1/64 per zone z
 *   node n of zone z     eth0 198.51.100.(10(z+1)+n+1), fd00:198:51:100::(same digits)
 *   pod slot s (0-61)    203.0.113.(65+s) (/32) and fd00:203::(65+s in hex) (/128) on eth0,
 *                        behind a veth plbp<j> to their node; node routes each pod (/32, /128)
 *   client c of zone z   192.0.2.(64z+10+c)/26, fd00:192:0:(z+1)::(10+c)/64
 * At the first build, slots and indexes follow file order (pod slot s = the s-th pod, node n
 * of zone z = the n-th node of the zone, veth plbp<j> = the node's j-th pod, plbn<i> = the
 * i-th node); a running lab that grows takes the lowest free ones (lab-change.ts), so
 * nothing running is renumbered.
 * Nodes default-route to the LB (198.51.100.1), so replies go straight back through it to
 * the client (direct server return: the LB forwards them as a plain router); every node
 * and the LB route each pod address to its node. Every name is prefixed `plb`; every link
 * is created inside the lab's namespaces, none in the caller's.
 *
 * It does not choose VIPs (the planner does) and does not run anything.
 */

import { type LabBgp, labBgpCommands } from "./lab-bgp.ts";
import {
  CLIENT_BRIDGE,
  type Command,
  clientLinkCommands,
  hostInitCommands,
  LB_NODE_GATEWAY4,
  LB_NODE_GATEWAY6,
  NODE_BRIDGE,
  nodeLinkCommands,
  podLinkCommands,
  podRouteCommands,
  ROUTER_SETTINGS,
  sysctlCommand,
  zoneGatewayCommands,
} from "./lab-host-commands.ts";
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
  /** the node's end of the pod's veth, `plbp<j>` */
  readonly veth: string;
}

export interface LabNode extends LabHost {
  readonly role: "node";
  readonly excludeFromLoadBalancers: boolean;
  readonly pods: readonly LabPod[];
  /** the LB host's end of the node's veth, `plbn<i>` */
  readonly veth: string;
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
  /** the routed LB tier (lab-bgp.ts): the `lb` namespace runs FRR and the LB hosts peer with it */
  readonly bgp?: LabBgp;
  readonly zones: readonly LabZone[];
  readonly clients: readonly LabHost[];
  readonly nodes: readonly LabNode[];
  readonly pods: readonly LabPod[];
  /** argv lists, run in order; every one must succeed (the first build's) */
  readonly commands: readonly (readonly string[])[];
}

export const MAX_POD_SLOTS = 62;
export const MAX_NODES_PER_ZONE = 9;

/** pod slot s (0-based): 203.0.113.(65+s), fd00:203::(65+s, hex) */
export function podAddress(slot: number): { ipv4: string; ipv6: string } {
  const last = 65 + slot;
  return { ipv4: `203.0.113.${last}`, ipv6: `fd00:203::${last.toString(16)}` };
}

/** the pod slot an address of podAddress has */
export function podSlot(ipv4: string): number {
  return Number(ipv4.split(".")[3]) - 65;
}

/** node n (0-based) of zone z (0-based): 198.51.100.(10(z+1)+n+1) */
export function nodeAddress(z: number, n: number): { ipv4: string; ipv6: string } {
  const digits = `${10 * (z + 1) + n + 1}`;
  return { ipv4: `198.51.100.${digits}`, ipv6: `fd00:198:51:100::${digits}` };
}

/** zone z (0-based): its client ranges */
export function labZone(name: string, z: number): LabZone {
  return { name, clientCidr4: `192.0.2.${64 * z}/26`, clientCidr6: `fd00:192:0:${z + 1}::/64` };
}

/** client c (0-based) of zone z (0-based) */
export function clientAddress(z: number, c: number): { ipv4: string; ipv6: string } {
  return { ipv4: `192.0.2.${64 * z + 10 + c}`, ipv6: `fd00:192:0:${z + 1}::${10 + c}` };
}

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
  let nodeIndex = 0;
  t.zones.forEach((zone, z) => {
    zones.push(labZone(zone.name, z));
    zone.clients.forEach((c, i) => {
      clients.push({ name: c, role: "client", ns: ns(c), zone: zone.name, ...clientAddress(z, i) });
    });
    zone.nodes.forEach((n, i) => {
      const nodePods: LabPod[] = n.pods.map((p, j) => ({
        name: p.name,
        role: "pod",
        ns: ns(p.name),
        zone: zone.name,
        ...podAddress(podIndex++),
        node: n.name,
        namespace: p.namespace ?? t.namespace,
        spec: p,
        veth: `plbp${j}`,
      }));
      pods.push(...nodePods);
      nodes.push({
        name: n.name,
        role: "node",
        ns: ns(n.name),
        zone: zone.name,
        ...nodeAddress(z, i),
        excludeFromLoadBalancers: n.excludeFromLoadBalancers,
        pods: nodePods,
        veth: `plbn${nodeIndex++}`,
      });
    });
  });
  if (podIndex > MAX_POD_SLOTS)
    throw new Error(`the lab has room for ${MAX_POD_SLOTS} pods (203.0.113.65-126), not ${podIndex}`);
  const lbHosts = labLbHosts(lbHostNames(t), ns);
  const sysctl = (h: LabHost, settings: readonly string[]) => sysctlCommand(h, ...settings);
  return {
    name: t.name,
    prefix,
    lb,
    lbHosts,
    ...(t.bgp && { bgp: t.bgp }),
    zones,
    clients,
    nodes,
    pods,
    commands: [
      ...buildCommands(lb, zones, clients, nodes),
      ...lbHostCommands(lb, lbHosts, clients, { clients: CLIENT_BRIDGE, nodes: NODE_BRIDGE }, sysctl, !t.bgp),
      ...(t.bgp ? labBgpCommands(lb, lbHosts, clients) : []),
    ],
  };
}

function buildCommands(
  lb: LabHost,
  zones: readonly LabZone[],
  clients: readonly LabHost[],
  nodes: readonly LabNode[],
): Command[] {
  const cmds: Command[] = [];
  const ipn = (host: LabHost, ...args: string[]) => cmds.push(["ip", "-n", host.ns, ...args]);
  const pods = nodes.flatMap((n) => n.pods);
  for (const h of [lb, ...clients, ...nodes, ...pods]) cmds.push(...hostInitCommands(h));
  // ECMP routes (`passlb lab route VIP n1 n2`) spread flows by their ports, not only addresses
  cmds.push(
    sysctlCommand(
      lb,
      ...ROUTER_SETTINGS,
      "net.ipv4.fib_multipath_hash_policy=1",
      "net.ipv6.fib_multipath_hash_policy=1",
    ),
  );
  ipn(lb, "link", "add", NODE_BRIDGE, "type", "bridge");
  ipn(lb, "link", "set", NODE_BRIDGE, "up");
  ipn(lb, "addr", "add", `${LB_NODE_GATEWAY4}/24`, "dev", NODE_BRIDGE);
  ipn(lb, "addr", "add", `${LB_NODE_GATEWAY6}/64`, "dev", NODE_BRIDGE, "nodad");
  ipn(lb, "link", "add", CLIENT_BRIDGE, "type", "bridge");
  ipn(lb, "link", "set", CLIENT_BRIDGE, "up");
  zones.forEach((zone, z) => {
    cmds.push(...zoneGatewayCommands(lb, zone, z));
  });
  clients.forEach((c, i) => {
    const z = zones.findIndex((zone) => zone.name === c.zone);
    cmds.push(...clientLinkCommands(lb, c, z, `plbc${i}`));
  });
  for (const n of nodes) {
    cmds.push(...nodeLinkCommands(lb, n));
    for (const p of n.pods) cmds.push(...podLinkCommands(n, p));
  }
  // Pod addresses are reachable from every node and from the LB, through their node.
  for (const h of [lb, ...nodes])
    for (const owner of nodes) {
      if (h === owner) continue;
      for (const p of owner.pods) cmds.push(...podRouteCommands(h, owner, p));
    }
  return cmds;
}
