/**
 * The generated cluster the nftables benchmarks program: `services` Services on `nodes`
 * nodes (IPv6 node addresses fd00:1::/64, pods fd00:2::/64, VIPs from fd00:10::/112: ULA,
 * nothing is sent anywhere). eTP Cluster: every Service on every node (one shared Maglev
 * table); eTP Local: each Service on `localNodes` random nodes with 1–3 pods each and
 * pod-count weights (a distinct table per Service). Seeded: the same cluster every run.
 * clusterBackendLimit is raised to the node count (when above GKE's default 250), so the eTP
 * Cluster shape stays one shared table at 1,000 nodes; with the default, every Service would
 * get its own stable subset of 250 nodes (10,000 distinct tables of M = 4,093 at 10,000
 * Services: 41 M kernel elements, not a shape a single nft table is meant to hold).
 */
import type { HealthState } from "../src/forwarding/forwarding-state.ts";
import type { EndpointSlice, Node, Service } from "../src/k8s/objects.ts";
import { DEFAULT_CONFIG, type Snapshot } from "../src/k8s/snapshot.ts";
import { seededRandom } from "../src/net/seeded-random.ts";

/** The n-th Pod address, RFC 5952 text (as Go prints it), past 65,535 in two groups. */
const podAddress = (n: number) =>
  n > 0xffff
    ? `fd00:2::${(n >>> 16).toString(16)}:${(n & 0xffff).toString(16)}`
    : `fd00:2::${n.toString(16)}`;

export function benchCluster(o: {
  readonly services: number;
  readonly nodes: number;
  readonly localNodes: number;
  readonly local: boolean;
}): Snapshot {
  const { local } = o;
  const rand = seededRandom(7);
  const nodes: Node[] = Array.from({ length: o.nodes }, (_, i) => ({
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: `node-${i}`, labels: { "topology.kubernetes.io/zone": `zone-${i % 3}` } },
    spec: {},
    status: {
      addresses: [{ type: "InternalIP", address: `fd00:1::${(i + 1).toString(16)}` }],
      conditions: [{ type: "Ready", status: "True" }],
    },
  }));
  const services: Service[] = [];
  const endpointSlices: EndpointSlice[] = [];
  let pod = 0;
  for (let s = 0; s < o.services; s++) {
    const name = `svc-${s}`;
    services.push({
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name,
        namespace: "bench",
        ...(local && { annotations: { "networking.gke.io/weighted-load-balancing": "pods-per-node" } }),
      },
      spec: {
        type: "LoadBalancer",
        ipFamilies: ["IPv6"],
        externalTrafficPolicy: local ? "Local" : "Cluster",
        ...(local && { healthCheckNodePort: 30000 + s }),
        ports: [{ name: "http", port: 80, protocol: "TCP", targetPort: 8080 }],
      },
    });
    const endpoints = [];
    for (let k = 0; k < o.localNodes; k++) {
      const node = `node-${Math.floor(rand() * o.nodes)}`;
      for (let p = 0; p < 1 + Math.floor(rand() * 3); p++)
        endpoints.push({
          addresses: [podAddress(++pod)],
          conditions: { ready: true, serving: true, terminating: false },
          nodeName: node,
        });
    }
    endpointSlices.push({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: { name: `${name}-1`, namespace: "bench", labels: { "kubernetes.io/service-name": name } },
      addressType: "IPv6",
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
      endpoints,
    });
  }
  return {
    services,
    nodes,
    pods: [],
    endpointSlices,
    endpoints: [],
    namespaces: [],
    config: {
      ...DEFAULT_CONFIG,
      defaultClass: true,
      clusterBackendLimit: Math.max(DEFAULT_CONFIG.clusterBackendLimit, o.nodes),
      pools: [{ name: "bench", addresses: ["fd00:10::/112"], autoAssign: true, avoidBuggyIPs: false }],
    },
  };
}

/** The benchmarks' endpoint change `i`: Service `(i >> 1) mod services` loses its first
 * endpoint (even `i`) or gets it back (odd `i`), in `current`, from `original`'s slices. */
export function endpointChange(original: Snapshot, current: Snapshot, i: number): Snapshot {
  const s = (i >> 1) % original.endpointSlices.length;
  const slices = [...current.endpointSlices];
  const slice = original.endpointSlices[s]!;
  slices[s] = i % 2 === 0 ? { ...slice, endpoints: (slice.endpoints ?? []).slice(1) } : slice;
  return { ...current, endpointSlices: slices };
}

/** The benchmarks' health change `i`: node `(i >> 1) mod nodes` turns unhealthy (even `i`)
 * or recovers (odd `i`). */
export function healthChange(health: Map<string, HealthState>, nodes: number, i: number): void {
  const node = `node-${(i >> 1) % nodes}`;
  if (i % 2 === 0) health.set(node, "unhealthy");
  else health.delete(node);
}
