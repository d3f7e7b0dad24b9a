/**
 * The desired endpoints of a selector Service: for each address type, for each port-map key,
 * the endpoints its Pods should have (upstream
 * kubernetes/endpointslice reconciler.go `reconcileByAddressType`). Each Pod's part comes
 * from `pod-endpoints.ts`. Every port-map key a candidate Pod yields is desired, even when
 * the Pod has no address of a family (so that family gets a placeholder, not nothing).
 *
 * It does not select Pods (the caller passes the Service's Pods) and does not pack slices.
 * Inputs are treated as immutable: the endpoints of a Pod are memoised per Pod object (and
 * reused only for the same Service and Node objects), and when a Service object is synced
 * again with the same Node map and a Pod list that differs at a few positions only, the
 * previous groups are patched at those positions instead of being rebuilt. A sync after one
 * Pod changed thus touches one endpoint, not ten thousand. The memos never change a result.
 * A Pod on a Node that does not exist is skipped with a finding unless the Service publishes
 * not-ready addresses, as upstream does.
 */
import type { EndpointPort, Node, Pod, Service } from "../k8s/objects.ts";
import { type DesiredEntry, type DesiredSet, desiredEntry, indexDesired } from "./desired-index.ts";
import { portMapKey } from "./endpoint-set.ts";
import { endpointPorts, podToEndpoint, shouldPodBeInEndpoints } from "./pod-endpoints.ts";
import type { AddressType } from "./service-slices.ts";
import type { SliceFinding } from "./slice-writes.ts";

export interface PortGroup {
  readonly ports: EndpointPort[];
  /** the desired endpoints, in Pod order */
  readonly desired: DesiredSet;
}

export interface DesiredEndpoints {
  /** address type → port-map key → group; every key is present for every address type */
  readonly byType: Map<AddressType, Map<string, PortGroup>>;
  readonly findings: SliceFinding[];
}

interface PodMemo {
  readonly service: Service;
  /** the Node map the Node was looked up in: the same map means the same Node */
  readonly nodes: ReadonlyMap<string, Node>;
  readonly node: Node | undefined;
  readonly types: readonly AddressType[];
  readonly ports: EndpointPort[];
  readonly key: string;
  /** per address type (same order as `types`): the entry, or undefined without an address */
  readonly endpoints: readonly (DesiredEntry | undefined)[];
}
const memo = new WeakMap<Pod, PodMemo>();

function sameTypes(a: readonly AddressType[], b: readonly AddressType[]): boolean {
  return a === b || (a.length === b.length && a.every((t, i) => t === b[i]));
}

const hasNamedTarget = (service: Service) => service.spec.ports.some((p) => typeof p.targetPort === "string");

type Group = { readonly ports: EndpointPort[]; readonly entries: DesiredEntry[] };

/** What the previous sync of a Service object saw, so the next one can patch positions. */
interface LastSync {
  readonly pods: readonly Pod[];
  readonly nodes: ReadonlyMap<string, Node>;
  readonly types: readonly AddressType[];
  readonly token: object;
  /** the memo each Pod position contributed, or undefined */
  readonly used: readonly (PodMemo | undefined)[];
  /** per address type, per Pod position: the index in its group's entries, or -1 */
  readonly slots: readonly Int32Array[];
  readonly collected: readonly ReadonlyMap<string, Group>[];
}
const lastSyncs = new WeakMap<Service, LastSync>();

interface Context {
  readonly service: Service;
  readonly nodes: ReadonlyMap<string, Node>;
  readonly types: readonly AddressType[];
  readonly shared: EndpointPort[] | undefined;
  readonly sharedKey: string;
}

/** The memo of a Pod for this sync, computed when missing or stale. */
function podMemo(pod: Pod, c: Context): PodMemo {
  const m = memo.get(pod);
  const node = m && m.nodes === c.nodes ? m.node : c.nodes.get(pod.spec.nodeName ?? "");
  if (m && m.service === c.service && m.node === node && sameTypes(m.types, c.types)) return m;
  const ports = c.shared ?? endpointPorts(c.service, pod);
  const fresh: PodMemo = {
    service: c.service,
    nodes: c.nodes,
    node,
    types: c.types,
    ports,
    key: c.shared ? c.sharedKey : portMapKey(ports),
    endpoints: c.types.map((t) => {
      const ep = podToEndpoint(pod, node, c.service, t);
      return ep.addresses.length > 0 ? desiredEntry(ep) : undefined;
    }),
  };
  memo.set(pod, fresh);
  return fresh;
}

/** The previous sync's groups with a few Pod positions replaced, or undefined when the
 * change is not a same-shape replacement (then everything is recomputed). */
function patchLastSync(last: LastSync, pods: readonly Pod[], c: Context): LastSync | undefined {
  if (last.nodes !== c.nodes || last.pods.length !== pods.length || !sameTypes(last.types, c.types))
    return undefined;
  const changed: number[] = [];
  for (let i = 0; i < pods.length; i++)
    if (pods[i] !== last.pods[i] && changed.push(i) > 16) return undefined;
  if (changed.length === 0) return { ...last, pods };
  const copies = c.types.map(() => new Map<string, Group>());
  const used = [...last.used];
  for (const i of changed) {
    const pod = pods[i]!;
    const before = last.used[i];
    const after = shouldPodBeInEndpoints(pod) ? podMemo(pod, c) : undefined;
    if (after && !after.node && c.service.spec.publishNotReadyAddresses !== true) return undefined; // a finding
    if (!before && !after) continue;
    if (!before || !after || before.key !== after.key) return undefined;
    for (let t = 0; t < c.types.length; t++) {
      const b = before.endpoints[t];
      const a = after.endpoints[t];
      if (!b !== !a) return undefined;
      if (!a || !b || a === b) continue;
      const slot = last.slots[t]![i]!;
      if (slot < 0 || a.seen === last.token) return undefined;
      let group = copies[t]!.get(after.key);
      if (!group) {
        const old = last.collected[t]!.get(after.key)!;
        group = { ports: old.ports, entries: [...old.entries] };
        copies[t]!.set(after.key, group);
      }
      group.entries[slot] = a;
      delete b.seen;
      a.seen = last.token;
    }
    used[i] = after;
  }
  const collected = last.collected.map((groups, t) => {
    const out = new Map(groups);
    for (const [key, g] of copies[t]!) out.set(key, g);
    return out;
  });
  return { ...last, pods, used, collected };
}

export function desiredEndpoints(
  service: Service,
  pods: readonly Pod[],
  nodes: ReadonlyMap<string, Node>,
  addressTypes: readonly AddressType[],
): DesiredEndpoints {
  // Without named targets every Pod has the same ports: compute them once.
  const shared = hasNamedTarget(service) ? undefined : endpointPorts(service, pods[0] ?? emptyPod);
  const c: Context = {
    service,
    nodes,
    types: addressTypes,
    shared,
    sharedKey: shared ? portMapKey(shared) : "",
  };
  const last = lastSyncs.get(service);
  const patched = last && patchLastSync(last, pods, c);
  const sync = patched ? { state: patched, findings: [], unique: true } : fullSync(pods, c);
  if (sync.findings.length === 0 && sync.unique) lastSyncs.set(service, sync.state);
  else lastSyncs.delete(service);
  const byType = new Map<AddressType, Map<string, PortGroup>>();
  addressTypes.forEach((t, i) => {
    const groups = new Map<string, PortGroup>();
    for (const [key, g] of sync.state.collected[i]!)
      groups.set(key, {
        ports: g.ports,
        desired: indexDesired(service, `${t}|${key}`, g.entries, sync.state.token),
      });
    byType.set(t, groups);
  });
  return { byType, findings: sync.findings };
}

function fullSync(
  pods: readonly Pod[],
  c: Context,
): { state: LastSync; findings: SliceFinding[]; unique: boolean } {
  const { service } = c;
  const collected = c.types.map(() => new Map<string, Group>());
  const token = {};
  const findings: SliceFinding[] = [];
  const used: (PodMemo | undefined)[] = new Array(pods.length);
  const slots = c.types.map(() => new Int32Array(pods.length).fill(-1));
  let unique = true;
  const subject = `Service ${service.metadata.namespace ?? "default"}/${service.metadata.name ?? ""}`;
  let lastKey: string | undefined;
  let lastGroups: DesiredEntry[][] = [];
  for (let p = 0; p < pods.length; p++) {
    const pod = pods[p]!;
    if (!shouldPodBeInEndpoints(pod)) continue;
    const m = podMemo(pod, c);
    if (m.key !== lastKey) {
      lastGroups = collected.map((map) => {
        let group = map.get(m.key);
        if (!group) {
          group = { ports: m.ports, entries: [] };
          map.set(m.key, group);
        }
        return group.entries;
      });
      lastKey = m.key;
    }
    if (!m.node && service.spec.publishNotReadyAddresses !== true) {
      findings.push({
        code: "endpointslice_pod_node_missing",
        severity: "warning",
        subject,
        message: `Pod ${pod.metadata.namespace}/${pod.metadata.name} is left out: its Node "${pod.spec.nodeName ?? ""}" does not exist (the controller retries the Service)`,
      });
      continue;
    }
    used[p] = m;
    for (let t = 0; t < lastGroups.length; t++) {
      const e = m.endpoints[t];
      if (!e) continue;
      if (e.seen === token) {
        unique = false; // the same Pod object twice
        continue;
      }
      e.seen = token;
      slots[t]![p] = lastGroups[t]!.push(e) - 1;
    }
  }
  return { state: { pods, nodes: c.nodes, types: c.types, token, used, slots, collected }, findings, unique };
}

const emptyPod: Pod = { apiVersion: "v1", kind: "Pod", metadata: {}, spec: { containers: [] }, status: {} };
