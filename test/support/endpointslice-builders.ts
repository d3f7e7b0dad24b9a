/**
 * Builders for EndpointSlice tests and benchmarks: Services, Pods and Nodes with documented
 * test addresses (10.0.0.0/8 Pod IPs are only ever data here, never configured on a host),
 * each with a mutate callback, and a deterministic name generator standing in for the API
 * server's generateName suffix.
 */
import type { EndpointSlice, Node, Pod, Service } from "../../src/k8s/objects.ts";

export function service(name: string, mutate: (s: Service) => void = () => {}): Service {
  const s: Service = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: "default", uid: `uid-${name}` },
    spec: {
      type: "ClusterIP",
      clusterIP: "10.96.0.10",
      ipFamilies: ["IPv4"],
      selector: { app: name },
      ports: [{ name: "http", protocol: "TCP", port: 80, targetPort: 8080 }],
    },
  };
  mutate(s);
  return s;
}

/** The i-th Pod: IP 10.(i/65536).(i/256%256).(i%256) + 1 offset, on node `node-(i % nodes)`. */
export function pod(i: number, app: string, mutate: (p: Pod) => void = () => {}, nodes = 3): Pod {
  const n = i + 1;
  const ip = `10.${(n >> 16) & 255}.${(n >> 8) & 255}.${n & 255}`;
  const p: Pod = {
    apiVersion: "v1",
    kind: "Pod",
    metadata: { name: `${app}-${i}`, namespace: "default", uid: `uid-${app}-${i}`, labels: { app } },
    spec: {
      nodeName: `node-${i % nodes}`,
      containers: [{ name: "main", ports: [{ name: "http", containerPort: 8080, protocol: "TCP" }] }],
    },
    status: {
      phase: "Running",
      podIP: ip,
      podIPs: [{ ip }],
      conditions: [{ type: "Ready", status: "True" }],
    },
  };
  mutate(p);
  return p;
}

export function node(name: string, zone?: string): Node {
  return {
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, ...(zone !== undefined && { labels: { "topology.kubernetes.io/zone": zone } }) },
    spec: {},
    status: {},
  };
}

export function nodeMap(count: number, zones = ["zone-a", "zone-b", "zone-c"]): Map<string, Node> {
  const m = new Map<string, Node>();
  for (let i = 0; i < count; i++) m.set(`node-${i}`, node(`node-${i}`, zones[i % zones.length]));
  return m;
}

/** Names created slices `<generateName><n>` with a counter: deterministic, never reused. */
export function sequentialNames(): (slice: EndpointSlice, taken: ReadonlySet<string>) => string {
  let n = 0;
  return (slice, taken) => {
    let name: string;
    do name = `${slice.metadata.generateName ?? ""}${(n++).toString(36).padStart(5, "0")}`;
    while (taken.has(name));
    return name;
  };
}
