/**
 * A LoadBalancerPlan builder for data-plane tests: one VIP, one TCP listener forwarding to
 * `nodePort` on the given nodes; a mutate callback changes anything else.
 */
import type { Backend, LoadBalancerPlan } from "../../src/plan/load-balancer-plan.ts";

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

export function testPlan(
  vip: string,
  port: number,
  nodePort: number,
  nodes: Record<string, string>,
  mutate: (p: Mutable<LoadBalancerPlan>) => void = () => {},
): LoadBalancerPlan {
  const members: Backend[] = Object.entries(nodes).map(([node, address]) => ({
    node,
    zone: "",
    addresses: { IPv4: address },
    weight: 1,
    included: true,
    reason: "eligible",
    explanation: "",
    ready: true,
    localReadyEndpoints: null,
  }));
  const plan: Mutable<LoadBalancerPlan> = {
    service: `t/${vip}`,
    uid: undefined,
    externalTrafficPolicy: "Cluster",
    ipFamilies: ["IPv4"],
    vips: [{ family: "IPv4", address: vip, pool: "t", source: "requested" }],
    listeners: [{ name: "", protocol: "TCP", port, nodePort, targetPort: nodePort }],
    backends: members,
    members,
    healthChecks: [],
    weighted: false,
    zonalAffinity: false,
    sessionAffinity: { type: "None", timeoutSeconds: null },
    sourceRanges: [],
    ipMode: "Proxy",
    issues: [],
  };
  mutate(plan);
  return plan;
}
