/**
 * A change to a running lab — hosts to add, hosts to remove, echo servers to restart — and
 * the `ip` steps that carry it out around the processes (lab-grow.ts runs them). Who
 * decides the change is the caller (a live reload: src/quickstart/lab-reload.ts); this only
 * says what it takes on the wire: namespaces, veths, addresses and routes exactly as the
 * first build makes them (lab-host-commands.ts), and the routes other hosts held to a
 * removed pod taken out again. Deleting a namespace takes its veth pair and the owner's
 * routes through it along; the process work (stop, start, wait) is the adapter's.
 * Pure: layouts in, argv lists out.
 */
import {
  type Command,
  clientLinkCommands,
  hostInitCommands,
  nodeLinkCommands,
  podLinkCommands,
  podRouteCommands,
  podUnrouteCommands,
  zoneGatewayCommands,
} from "./lab-host-commands.ts";
import type { LabHost, LabLayout, LabNode, LabPod, LabZone } from "./lab-layout.ts";
import { LAB_VIP_RANGE4, LAB_VIP_RANGE6 } from "./lab-lb-hosts.ts";

export interface LabChange {
  /** the layout once the change is made (running hosts keep their addresses and links) */
  readonly layout: LabLayout;
  /** hosts to build, as in `layout` */
  readonly add: {
    readonly zones: readonly LabZone[];
    readonly clients: readonly LabHost[];
    readonly nodes: readonly LabNode[];
    readonly pods: readonly LabPod[];
  };
  /** hosts of the running layout to tear down (a removed node's pods are in `pods` too) */
  readonly remove: { readonly nodes: readonly LabNode[]; readonly pods: readonly LabPod[] };
  /**
   * namespaces of `remove` that a new host takes over (same name, or its address): torn
   * down before anything is built; the others only once the manifests no longer name them
   */
  readonly removeFirst: readonly string[];
  /** running pods whose echo server starts again with other ports, as in `layout` */
  readonly restart: readonly LabPod[];
}

export interface LabChangeCommands {
  /** unlinking and route removals for the hosts of `removeFirst` (run once their processes stopped) */
  readonly first: readonly Command[];
  /** building the new hosts (before their processes start) */
  readonly build: readonly Command[];
  /** the same for the other removed hosts */
  readonly last: readonly Command[];
}

// a removed host's veth goes first (its name is free at once, whenever the kernel gets to
// the namespace)
const unlink = (h: LabHost, veth: string): Command => ["ip", "-n", h.ns, "link", "del", veth];

export function labChangeCommands(running: LabLayout, change: LabChange): LabChangeCommands {
  const { layout, add } = change;
  if (running.router || layout.router)
    throw new Error("a lab with routed zones cannot grow or shrink yet: take it down and up again");
  const lb = layout.lb;
  // route removals: on the LB and every node that stays, for each removed pod of another node
  const gone = new Set(change.remove.nodes.map((n) => n.name));
  const staying = [lb, ...running.nodes.filter((n) => !gone.has(n.name))];
  const stayingNode = new Map(staying.map((h) => [h.name, h]));
  const unroute = (pods: readonly LabPod[], nodes: readonly LabNode[]) => [
    ...nodes.map((n) => unlink(lb, n.veth)),
    ...pods.flatMap((p) => {
      const owner = stayingNode.get(p.node);
      return [
        ...(owner ? [unlink(owner, p.veth)] : []),
        ...staying.filter((h) => h.name !== p.node).flatMap((h) => podUnrouteCommands(h, p)),
      ];
    }),
  ];
  const first = new Set(change.removeFirst);
  const isFirst = (h: LabHost) => first.has(h.ns);
  const build: Command[] = [];
  for (const h of [...add.clients, ...add.nodes, ...add.pods]) build.push(...hostInitCommands(h));
  for (const zone of add.zones)
    build.push(...zoneGatewayCommands(lb, zone, layout.zones.indexOf(zone), "replace"));
  for (const c of add.clients) {
    const z = layout.zones.findIndex((zone) => zone.name === c.zone);
    build.push(...clientLinkCommands(lb, c, z, `plbc${layout.clients.indexOf(c)}`));
    // several LB hosts: clients ask the segment for VIPs (lab-lb-hosts.ts)
    if (layout.lbHosts.length > 0)
      for (const range of [LAB_VIP_RANGE4, LAB_VIP_RANGE6])
        build.push(["ip", "-n", c.ns, "route", "add", range, "dev", "eth0"]);
  }
  const newPods = new Set(add.pods.map((p) => p.ns));
  for (const n of add.nodes) {
    build.push(...nodeLinkCommands(lb, n));
    // the pods that were already running elsewhere; new pods route themselves below
    for (const owner of layout.nodes)
      if (owner.name !== n.name)
        for (const p of owner.pods) if (!newPods.has(p.ns)) build.push(...podRouteCommands(n, owner, p));
  }
  const nodeByName = new Map(layout.nodes.map((n) => [n.name, n]));
  for (const p of add.pods) {
    const owner = nodeByName.get(p.node);
    if (!owner) throw new Error(`lab change: pod ${p.name} on ${p.node}, which the layout lacks`);
    build.push(...podLinkCommands(owner, p));
    for (const h of [lb, ...layout.nodes])
      if (h.name !== owner.name) build.push(...podRouteCommands(h, owner, p));
  }
  return {
    first: unroute(change.remove.pods.filter(isFirst), change.remove.nodes.filter(isFirst)),
    build,
    last: unroute(
      change.remove.pods.filter((p) => !isFirst(p)),
      change.remove.nodes.filter((n) => !isFirst(n)),
    ),
  };
}

/**
 * Undoing a change that failed half-way: the namespaces of every host it added, and the
 * unlinking and route removals on the hosts that were there before. (A new zone's gateway
 * addresses on the LB stay; building the zone again replaces them.)
 */
export function labUndoAdd(change: LabChange): { namespaces: string[]; commands: Command[] } {
  const { layout, add } = change;
  const lb = layout.lb;
  const added = new Set([...add.nodes, ...add.clients, ...add.pods].map((h) => h.ns));
  const before = [lb, ...layout.nodes.filter((n) => !added.has(n.ns))];
  const commands: Command[] = [
    ...add.nodes.map((n) => unlink(lb, n.veth)),
    ...add.clients.map((c) => unlink(lb, `plbc${layout.clients.indexOf(c)}`)),
    ...add.pods.flatMap((p) => [
      ...before.filter((h) => h.name === p.node).map((owner) => unlink(owner, p.veth)),
      ...before.filter((h) => h.name !== p.node).flatMap((h) => podUnrouteCommands(h, p)),
    ]),
  ];
  return { namespaces: [...added], commands };
}

/** The layout without the hosts in these namespaces (and without a removed node's pods). */
export function layoutWithout(layout: LabLayout, namespaces: readonly string[]): LabLayout {
  const gone = new Set(namespaces);
  const nodes = layout.nodes
    .filter((n) => !gone.has(n.ns))
    .map((n) => ({ ...n, pods: n.pods.filter((p) => !gone.has(p.ns)) }));
  return {
    ...layout,
    clients: layout.clients.filter((c) => !gone.has(c.ns)),
    nodes,
    pods: nodes.flatMap((n) => n.pods),
  };
}
