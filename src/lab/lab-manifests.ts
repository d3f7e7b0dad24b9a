/**
 * The manifests a lab runs against: a Node per lab node (its lab addresses and zone), a
 * Pod per lab pod, and the EndpointSlices the control plane would write for them, from
 * the Services' selectors. Pure: layout and Services in, plain objects out (the adapter
 * writes them next to the Services and PasslbConfig it copied).
 *
 * Slices follow the EndpointSlice controller's shape closely enough for the consumers
 * (kubernetes `pkg/controller/endpointslicemirroring/reconciler.go`): one slice per Service, address family
 * and resolved port set; `targetPort` names resolve against the pod's container ports; an endpoint is
 * ready when the Pod is Ready and not terminating, serving when Ready, terminating when
 * the Pod is being deleted. IPv6 slices only for Services whose `ipFamilies` list IPv6.
 * It does not model Pods without an address, publishNotReadyAddresses or slice limits.
 */
import type { Service } from "../k8s/objects.ts";
import { EXCLUDE_LB_LABEL, ZONE_LABEL } from "../plan/node-facts.ts";
import type { LabLayout, LabPod } from "./lab-layout.ts";

/** A fixed deletion time for terminating pods: manifests stay reproducible. */
const DELETION_TIMESTAMP = "2026-01-01T00:00:00Z";

export interface LabManifests {
  readonly nodes: readonly object[];
  readonly pods: readonly object[];
  readonly endpointSlices: readonly object[];
}

export function labManifests(layout: LabLayout, services: readonly Service[]): LabManifests {
  const nodes = layout.nodes.map((n) => ({
    apiVersion: "v1",
    kind: "Node",
    metadata: {
      name: n.name,
      labels: {
        [ZONE_LABEL]: n.zone,
        "kubernetes.io/hostname": n.name,
        ...(n.excludeFromLoadBalancers ? { [EXCLUDE_LB_LABEL]: "" } : {}),
      },
    },
    spec: {},
    status: {
      addresses: [
        { type: "InternalIP", address: n.ipv4 },
        { type: "InternalIP", address: n.ipv6 },
        { type: "Hostname", address: n.name },
      ],
      conditions: [{ type: "Ready", status: "True" }],
    },
  }));
  const pods = layout.pods.map((p) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: p.name,
      namespace: p.namespace,
      labels: p.spec.labels,
      uid: `lab-${p.name}`,
      ...(p.spec.terminating ? { deletionTimestamp: DELETION_TIMESTAMP } : {}),
    },
    spec: {
      nodeName: p.node,
      containers: [
        {
          name: "echo",
          image: "passlb/lab-echo",
          ports: p.spec.ports.map((port) => ({
            ...(port.name ? { name: port.name } : {}),
            containerPort: port.port,
            protocol: port.protocol,
          })),
        },
      ],
    },
    status: {
      phase: "Running",
      podIP: p.ipv4,
      podIPs: [{ ip: p.ipv4 }, { ip: p.ipv6 }],
      conditions: [{ type: "Ready", status: p.spec.ready ? "True" : "False" }],
    },
  }));
  const endpointSlices: object[] = [];
  for (const svc of services) {
    const selector = svc.spec.selector;
    if (!selector || Object.keys(selector).length === 0) continue;
    const ns = svc.metadata.namespace ?? "default";
    const name = svc.metadata.name ?? "";
    const selected = layout.pods.filter(
      (p) => p.namespace === ns && Object.entries(selector).every(([k, v]) => p.spec.labels[k] === v),
    );
    const families = svc.spec.ipFamilies ?? ["IPv4"];
    for (const family of families) {
      // group pods by the port numbers their targetPorts resolve to
      const groups = new Map<string, { ports: SlicePort[]; pods: LabPod[] }>();
      for (const p of selected) {
        const ports = resolvePorts(svc, p);
        if (ports.length === 0) continue;
        const key = JSON.stringify(ports);
        const g = groups.get(key);
        if (g) g.pods.push(p);
        else groups.set(key, { ports, pods: [p] });
      }
      let i = 0;
      for (const g of groups.values()) {
        endpointSlices.push({
          apiVersion: "discovery.k8s.io/v1",
          kind: "EndpointSlice",
          metadata: {
            name: `${name}-lab-${family === "IPv4" ? "v4" : "v6"}-${i++}`,
            namespace: ns,
            labels: {
              "kubernetes.io/service-name": name,
              "endpointslice.kubernetes.io/managed-by": "lab.passlb.io",
            },
          },
          addressType: family,
          ports: g.ports,
          endpoints: g.pods.map((p) => ({
            addresses: [family === "IPv4" ? p.ipv4 : p.ipv6],
            conditions: {
              ready: p.spec.ready && !p.spec.terminating,
              serving: p.spec.ready,
              terminating: p.spec.terminating,
            },
            nodeName: p.node,
            zone: p.zone,
            targetRef: { kind: "Pod", namespace: p.namespace, name: p.name, uid: `lab-${p.name}` },
          })),
        });
      }
    }
  }
  return { nodes, pods, endpointSlices };
}

interface SlicePort {
  readonly name: string;
  readonly port: number;
  readonly protocol: string;
}

function resolvePorts(svc: Service, pod: LabPod): SlicePort[] {
  const out: SlicePort[] = [];
  for (const sp of svc.spec.ports) {
    const protocol = sp.protocol ?? "TCP";
    const target = sp.targetPort ?? sp.port;
    const port =
      typeof target === "number"
        ? target
        : pod.spec.ports.find((p) => p.name === target && p.protocol === protocol)?.port;
    if (port === undefined) continue;
    out.push({ name: sp.name ?? "", port, protocol });
  }
  return out;
}
