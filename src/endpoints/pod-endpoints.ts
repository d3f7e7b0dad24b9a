/**
 * One Pod as the EndpointSlice controller sees it
 * (upstream kubernetes/endpointslice utils.go `podToEndpoint`,
 * `getEndpointPorts`, util/controller_utils.go `ShouldPodBeInEndpoints`, kubernetes
 * pkg/api/v1/pod `FindPort`): whether it is a candidate, the ports its Service's targets
 * resolve to on it, and its endpoint for one address type. Nothing about sets or slices.
 */
import type { Endpoint, EndpointPort, Node, Pod, Service } from "../k8s/objects.ts";
import { canonicalIp } from "../net/ip.ts";
import { ZONE_LABEL } from "../plan/node-facts.ts";
import { sortPorts } from "./endpoint-set.ts";
import type { AddressType } from "./service-slices.ts";

/** Dotted IPv4 text already in canonical form (no leading zeros). */
export const DOTTED_IPV4 = /^(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)(\.(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)){3}$/;

/** Canonical text of an IP, with a fast path for IPv4 already in canonical form. */
export function canonicalAddress(ip: string): string {
  return DOTTED_IPV4.test(ip) ? ip : (canonicalIp(ip) ?? ip);
}

/** Whether the Pod is a candidate at all: not terminal and with an IP (terminating Pods stay). */
export function shouldPodBeInEndpoints(pod: Pod): boolean {
  const phase = pod.status.phase;
  if (phase === "Succeeded" || phase === "Failed") return false;
  return Boolean(pod.status.podIP) || (pod.status.podIPs?.length ?? 0) > 0;
}

/** The container port a Service port's named target resolves to on this Pod: same name and
 * protocol, in containers, then in restartable (sidecar) init containers. */
function findNamedPort(pod: Pod, name: string, protocol: string): number | undefined {
  for (const c of pod.spec.containers)
    for (const p of c.ports ?? []) if (p.name === name && p.protocol === protocol) return p.containerPort;
  for (const c of pod.spec.initContainers ?? []) {
    if (c.restartPolicy !== "Always") continue;
    for (const p of c.ports ?? []) if (p.name === name && p.protocol === protocol) return p.containerPort;
  }
  return undefined;
}

/** The endpoint ports of a Pod for the Service; a port whose named target does not resolve is left out. */
export function endpointPorts(service: Service, pod: Pod): EndpointPort[] {
  const out: EndpointPort[] = [];
  for (const sp of service.spec.ports) {
    const target = sp.targetPort ?? sp.port;
    const port = typeof target === "number" ? target : findNamedPort(pod, target, sp.protocol);
    if (port === undefined) continue;
    const ep: EndpointPort = { name: sp.name ?? "", port, protocol: sp.protocol };
    if (sp.appProtocol !== undefined) ep.appProtocol = sp.appProtocol;
    out.push(ep);
  }
  return sortPorts(out);
}

const isPodReady = (pod: Pod): boolean =>
  (pod.status.conditions ?? []).some((c) => c.type === "Ready" && c.status === "True");

/** The endpoint of a Pod for one address type (its addresses may be empty). */
export function podToEndpoint(
  pod: Pod,
  node: Node | undefined,
  service: Service,
  addressType: AddressType,
): Endpoint {
  const addresses: string[] = [];
  for (const { ip } of pod.status.podIPs ?? [])
    if (ip.includes(":") === (addressType === "IPv6")) addresses.push(canonicalAddress(ip));
  const serving = isPodReady(pod);
  const terminating = Boolean(pod.metadata.deletionTimestamp);
  const ready = service.spec.publishNotReadyAddresses === true || (serving && !terminating);
  const ep: Endpoint = {
    addresses,
    conditions: { ready, serving, terminating },
    targetRef: {
      kind: "Pod",
      namespace: pod.metadata.namespace ?? "default",
      name: pod.metadata.name ?? "",
      uid: pod.metadata.uid ?? "",
    },
  };
  if (pod.spec.nodeName) ep.nodeName = pod.spec.nodeName;
  const zone = node?.metadata.labels?.[ZONE_LABEL];
  if (zone) ep.zone = zone;
  if (
    pod.spec.hostname &&
    pod.spec.subdomain === service.metadata.name &&
    (pod.metadata.namespace ?? "default") === (service.metadata.namespace ?? "default")
  )
    ep.hostname = pod.spec.hostname;
  return ep;
}
