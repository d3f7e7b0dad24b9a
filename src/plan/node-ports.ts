/**
 * Whether a Service can be served in the chosen mode without NodePorts. With
 * `spec.allocateLoadBalancerNodePorts: false` (GA 1.24) the API server gives the ports no
 * nodePort. passlb's passthrough modes (ipMode VIP) need none: the packet reaches the node
 * with the VIP as its destination and kube-proxy (or passlb agent) serves the VIP there, as
 * with MetalLB and kube-vip (docs/migrate.md "What behaves differently, and why"). The userspace proxy
 * (ipMode Proxy) connects to the nodes' NodePorts, so there a port without one cannot be served. Pure.
 */
import type { Service } from "../k8s/objects.ts";

/** The ports (`TCP/80`) ipMode Proxy cannot reach for want of a nodePort; [] when fine. */
export function portsWithoutNodePort(svc: Service, ipMode: "VIP" | "Proxy"): string[] {
  if (ipMode !== "Proxy") return [];
  return svc.spec.ports
    .filter((p) => !p.nodePort && p.protocol !== "SCTP")
    .map((p) => `${p.protocol}/${p.port}`);
}

export function nodePortsMessage(missing: readonly string[]): string {
  return `ipMode Proxy (userspace LB hosts) reaches the nodes on NodePorts, but ${missing.join(", ")} ${missing.length === 1 ? "has" : "have"} none (allocateLoadBalancerNodePorts: false?): not served on ${missing.length === 1 ? "it" : "them"}; use a passthrough data plane (ipMode VIP)`;
}
