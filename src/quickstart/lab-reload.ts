/**
 * A live reload in lab mode: what of a changed folder a running lab can show without being
 * rebuilt. The lab's hosts and addresses are fixed when it starts (lab-layout.ts assigns
 * them by position), so from the running layout and the newly derived topology
 * (lab-rewrite.ts) this keeps every running node and pod that is still in the folder,
 * with the pod's new labels, readiness and termination and the node's exclusion label;
 * nodes and pods that left are dropped (their Node, Pod and endpoints disappear from the
 * manifests; their namespaces and echo servers stay, unused). Nodes and pods that are new,
 * moved to another node or zone, or serve other ports cannot be shown without a rebuild:
 * each is a `lab_restart_needed` note. Services and the PasslbConfig always follow.
 * Pure: layouts and topology in, a layout for lab-manifests.ts and notes out.
 */
import type { LabLayout, LabNode, LabPod } from "../lab/lab-layout.ts";
import type { Topology, TopologyPod } from "../lab/topology.ts";
import type { Finding } from "../plan/load-balancer-plan.ts";

export interface LabReload {
  readonly layout: LabLayout;
  readonly notes: readonly Finding[];
}

const portsKey = (ports: TopologyPod["ports"]) =>
  ports
    .map((p) => `${p.protocol}/${p.port}`)
    .sort()
    .join(",");

export function labReloadLayout(running: LabLayout, next: Topology): LabReload {
  const notes: Finding[] = [];
  const restart = (subject: string, message: string) =>
    notes.push({
      code: "lab_restart_needed",
      severity: "warning",
      subject,
      message: `${message}; restart passlb up to rebuild the lab`,
    });
  const nextNodes = new Map<string, { zone: string; excluded: boolean }>();
  const nextPods = new Map<string, { node: string; pod: TopologyPod }>();
  for (const z of next.zones)
    for (const n of z.nodes) {
      nextNodes.set(n.name, { zone: z.name, excluded: n.excludeFromLoadBalancers });
      for (const p of n.pods)
        nextPods.set(`${p.namespace ?? next.namespace}/${p.name}`, { node: n.name, pod: p });
    }
  const runningPods = new Map(running.pods.map((p) => [`${p.namespace}/${p.name}`, p]));
  const nodes: LabNode[] = [];
  for (const n of running.nodes) {
    const want = nextNodes.get(n.name);
    if (!want) continue;
    if (want.zone !== n.zone) restart(`Node ${n.name}`, `moved from zone ${n.zone} to ${want.zone}`);
    const pods: LabPod[] = [];
    for (const p of n.pods) {
      const key = `${p.namespace}/${p.name}`;
      const w = nextPods.get(key);
      if (!w) continue;
      if (w.node !== n.name) {
        restart(`Pod ${key}`, `moved from ${n.name} to ${w.node}`);
        continue;
      }
      if (portsKey(w.pod.ports) !== portsKey(p.spec.ports))
        restart(
          `Pod ${key}`,
          `now serves ${portsKey(w.pod.ports)}; its echo server serves ${portsKey(p.spec.ports)}`,
        );
      pods.push({
        ...p,
        spec: { ...p.spec, labels: w.pod.labels, ready: w.pod.ready, terminating: w.pod.terminating },
      });
    }
    nodes.push({ ...n, excludeFromLoadBalancers: want.excluded, pods });
  }
  const runningNodes = new Set(running.nodes.map((n) => n.name));
  for (const name of nextNodes.keys()) if (!runningNodes.has(name)) restart(`Node ${name}`, "is new");
  for (const [key, w] of nextPods)
    if (!runningPods.has(key))
      restart(`Pod ${key}`, `is new (on ${w.node}): the lab has no namespace for it`);
  return { layout: { ...running, nodes, pods: nodes.flatMap((n) => n.pods) }, notes };
}
