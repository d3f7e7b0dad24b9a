/**
 * A live reload in lab mode: how a running lab follows a changed folder. From the running
 * layout and the newly derived topology (lab-rewrite.ts) it decides the lab change
 * (src/lab/lab-change.ts) and the layout the lab's manifests are generated from:
 *
 *   in the folder and running, same node (and zone)   kept: labels, readiness, termination
 *                                                     and the exclusion label follow; other
 *                                                     ports restart its echo server
 *   new                                               built: zone, client, node, pod
 *   gone                                              torn down (processes, namespace, routes)
 *   pod on another node, node in another zone         torn down and built again
 *
 * Addresses never move while a host runs (docs/lab.md "Addressing"): a new pod takes the
 * lowest pod slot no running pod holds, a new node the lowest node number of its zone no
 * running node holds, new veths the lowest free `plbp<j>` on their node and `plbn<i>` on
 * the LB, a new zone the next zone number. Only when every slot is held does a host that is
 * being removed give its slot up: it is then torn down first (so is one whose namespace
 * name a new host takes). The folder's limits (lab-rewrite.ts) keep a slot always at hand.
 * Pure: layouts and topology in, a change out.
 */
import type { LabChange } from "../lab/lab-change.ts";
import {
  clientAddress,
  type LabHost,
  type LabLayout,
  type LabNode,
  type LabPod,
  type LabZone,
  labZone,
  MAX_NODES_PER_ZONE,
  MAX_POD_SLOTS,
  nodeAddress,
  podAddress,
  podSlot,
} from "../lab/lab-layout.ts";
import type { Topology, TopologyPod } from "../lab/topology.ts";

const portsKey = (ports: TopologyPod["ports"]) =>
  ports
    .map((p) => `${p.protocol}/${p.port}`)
    .sort()
    .join(",");

/** lowest index from 0 not in `used` */
const lowestFree = (used: ReadonlySet<number>, limit = Number.POSITIVE_INFINITY): number | undefined => {
  for (let i = 0; i < limit; i++) if (!used.has(i)) return i;
  return undefined;
};

const vethIndex = (veth: string) => Number(/\d+$/.exec(veth)?.[0] ?? -1);

/**
 * In steps: zones and clients → what stays and what goes → slots (free first, a removed
 * host's last) → kept nodes with their pods → new nodes → which removals go first.
 */
export function labReloadLayout(running: LabLayout, next: Topology): LabChange {
  const ns = (host: string) => `${running.prefix}${host}`;
  const z = reloadZones(running, next, ns);
  const plan = keptAndRemoved(running, next);
  const slots = new Slots(running, plan, (name) => z.zones.findIndex((x) => x.name === name));
  const addPods: LabPod[] = [];
  const restart: LabPod[] = [];
  const buildPods = (node: string, zone: string, podVeths: Set<number>, pods: readonly TopologyPod[]) => {
    const out: LabPod[] = [];
    for (const p of pods) {
      if (plan.runningPodKeys.has(plan.podKey(p))) continue;
      const j = lowestFree(podVeths)!;
      podVeths.add(j);
      const pod: LabPod = {
        name: p.name,
        role: "pod",
        ns: ns(p.name),
        zone,
        ...podAddress(slots.takePodSlot()),
        node,
        namespace: p.namespace ?? next.namespace,
        spec: p,
        veth: `plbp${j}`,
      };
      out.push(pod);
      addPods.push(pod);
    }
    return out;
  };

  const nodes: LabNode[] = [];
  for (const n of plan.keptNodes) {
    const w = plan.want.get(n.name)!;
    const specs = new Map(w.pods.map((p) => [plan.podKey(p), p]));
    const pods: LabPod[] = [];
    for (const p of n.pods) {
      const spec = specs.get(plan.podKey(p));
      if (!spec || !plan.keptPod(p)) continue;
      const pod: LabPod = { ...p, spec: { ...p.spec, ...spec } };
      if (portsKey(spec.ports) !== portsKey(p.spec.ports)) restart.push(pod);
      pods.push(pod);
    }
    // veths of every running pod of the node stay taken in this change
    const podVeths = new Set(running.pods.filter((p) => p.node === n.name).map((p) => vethIndex(p.veth)));
    pods.push(...buildPods(n.name, n.zone!, podVeths, w.pods));
    nodes.push({ ...n, excludeFromLoadBalancers: w.excluded, pods });
  }
  const addNodes: LabNode[] = [];
  for (const [name, w] of plan.want) {
    if (plan.kept.has(name)) continue;
    const node: LabNode = {
      name,
      role: "node",
      ns: ns(name),
      zone: w.zone,
      ...nodeAddress(slots.zoneIndex(w.zone), slots.takeNodeSlot(w.zone)),
      excludeFromLoadBalancers: w.excluded,
      pods: [],
      veth: `plbn${slots.takeNodeVeth()}`,
    };
    const withPods: LabNode = { ...node, pods: buildPods(name, w.zone, new Set(), w.pods) };
    nodes.push(withPods);
    addNodes.push(withPods);
  }
  const removeFirst = slots.removeFirst;
  // a removed host whose namespace name a new host takes goes first
  const newNs = new Set([...addNodes, ...addPods, ...z.addClients].map((h) => h.ns));
  for (const h of [...plan.removeNodes, ...plan.removePods]) if (newNs.has(h.ns)) removeFirst.add(h.ns);
  // a node that goes first takes its pods along
  for (const p of plan.removePods)
    if (plan.removeNodes.some((n) => n.name === p.node && removeFirst.has(n.ns))) removeFirst.add(p.ns);

  return {
    layout: { ...running, zones: z.zones, clients: z.clients, nodes, pods: nodes.flatMap((n) => n.pods) },
    add: { zones: z.addZones, clients: z.addClients, nodes: addNodes, pods: addPods },
    remove: { nodes: plan.removeNodes, pods: plan.removePods },
    removeFirst: [...removeFirst],
    restart,
  };
}

/** Zones: running ones keep their numbers; new ones take the next, with their clients. */
function reloadZones(running: LabLayout, next: Topology, ns: (host: string) => string) {
  const zones: LabZone[] = [...running.zones];
  const addZones: LabZone[] = [];
  const addClients: LabHost[] = [];
  const clients: LabHost[] = [...running.clients];
  for (const z of next.zones) {
    if (zones.some((x) => x.name === z.name)) continue;
    const zone = labZone(z.name, zones.length);
    zones.push(zone);
    addZones.push(zone);
    z.clients.forEach((c, i) => {
      const client: LabHost = {
        name: c,
        role: "client",
        ns: ns(c),
        zone: z.name,
        ...clientAddress(zones.length - 1, i),
      };
      clients.push(client);
      addClients.push(client);
    });
  }
  return { zones, addZones, clients, addClients };
}

interface KeptAndRemoved {
  /** the wanted nodes, by name */
  readonly want: ReadonlyMap<string, { zone: string; excluded: boolean; pods: readonly TopologyPod[] }>;
  readonly podKey: (p: { namespace?: string | undefined; name: string }) => string;
  /** running nodes still wanted in the same zone */
  readonly keptNodes: readonly LabNode[];
  readonly kept: ReadonlySet<string>;
  readonly removeNodes: LabNode[];
  /** a running pod still wanted on the same (kept) node */
  readonly keptPod: (p: LabPod) => boolean;
  readonly removePods: LabPod[];
  readonly runningPodKeys: ReadonlySet<string>;
}

/** What stays (same node, same zone) and what goes. */
function keptAndRemoved(running: LabLayout, next: Topology): KeptAndRemoved {
  const want = new Map<string, { zone: string; excluded: boolean; pods: readonly TopologyPod[] }>();
  for (const z of next.zones)
    for (const n of z.nodes)
      want.set(n.name, { zone: z.name, excluded: n.excludeFromLoadBalancers, pods: n.pods });
  const podKey = (p: { namespace?: string | undefined; name: string }) =>
    `${p.namespace ?? next.namespace}/${p.name}`;
  const keptNodes = running.nodes.filter((n) => want.get(n.name)?.zone === n.zone);
  const kept = new Set(keptNodes.map((n) => n.name));
  const removeNodes = running.nodes.filter((n) => !kept.has(n.name));
  const wantPodNode = new Map<string, string>();
  for (const [node, w] of want) for (const p of w.pods) wantPodNode.set(podKey(p), node);
  const keptPod = (p: LabPod) => kept.has(p.node) && wantPodNode.get(podKey(p)) === p.node;
  const removePods = running.pods.filter((p) => !keptPod(p));
  const runningPodKeys = new Set(running.pods.filter(keptPod).map(podKey));
  return { want, podKey, keptNodes, kept, removeNodes, keptPod, removePods, runningPodKeys };
}

/** Pod slots, node slots and node veths: free ones first; a removed host's only when none is
 * left, and that host is then torn down first (`removeFirst`). */
class Slots {
  readonly removeFirst = new Set<string>();
  private readonly podSlots: Set<number>;
  private readonly nodeSlots = new Map<string, Set<number>>();
  private readonly nodeVeths: Set<number>;

  constructor(
    running: LabLayout,
    private readonly plan: KeptAndRemoved,
    readonly zoneIndex: (zone: string) => number,
  ) {
    this.podSlots = new Set(running.pods.map((p) => podSlot(p.ipv4)));
    for (const n of running.nodes) {
      const set = this.nodeSlots.get(n.zone!) ?? new Set<number>();
      set.add(this.slotOfNode(n));
      this.nodeSlots.set(n.zone!, set);
    }
    this.nodeVeths = new Set(running.nodes.map((n) => vethIndex(n.veth)));
  }

  private slotOfNode(n: LabNode): number {
    return Number(n.ipv4.split(".")[3]) - 10 * (this.zoneIndex(n.zone!) + 1) - 1;
  }

  takePodSlot(): number {
    const free = lowestFree(this.podSlots, MAX_POD_SLOTS);
    const freed = this.plan.removePods.find((p) => !this.removeFirst.has(p.ns));
    const slot = free ?? (freed ? podSlot(freed.ipv4) : undefined);
    if (slot === undefined) throw new Error(`the lab has room for ${MAX_POD_SLOTS} pods`);
    if (free === undefined && freed) this.removeFirst.add(freed.ns);
    this.podSlots.add(slot);
    return slot;
  }

  takeNodeSlot(zone: string): number {
    const used = this.nodeSlots.get(zone) ?? new Set<number>();
    this.nodeSlots.set(zone, used);
    const free = lowestFree(used, MAX_NODES_PER_ZONE);
    const freed = this.plan.removeNodes.find((n) => n.zone === zone && !this.removeFirst.has(n.ns));
    const slot = free ?? (freed ? this.slotOfNode(freed) : undefined);
    if (slot === undefined) throw new Error(`zone ${zone}: the lab has room for ${MAX_NODES_PER_ZONE} nodes`);
    if (free === undefined && freed) this.removeFirst.add(freed.ns);
    used.add(slot);
    return slot;
  }

  /** the lowest free `plbn<i>` index on the LB */
  takeNodeVeth(): number {
    const i = lowestFree(this.nodeVeths)!;
    this.nodeVeths.add(i);
    return i;
  }
}
