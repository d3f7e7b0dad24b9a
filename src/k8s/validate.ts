/**
 * Semantic validation of decoded objects: the Kubernetes API server's rules that matter to
 * a load balancer (core/v1 validation.go `ValidateService`, discovery/v1 `ValidateEndpointSlice`),
 * plus passlb's own config. Structural checks (types, enums) are the schemas' job.
 *
 * Each function returns every problem it finds, each with a field path; it never throws.
 */
import { isSpecialPurposeEndpointIp, parseCidr, parseIp, parseIpRange } from "../net/ip.ts";
import { dns1035Label, dns1123Label, dns1123Subdomain, ianaServiceName, qualifiedName } from "./names.ts";
import type { EndpointSlice, Endpoints, Node, PasslbConfigSpec, Pod, Service } from "./objects.ts";

export type FieldPath = readonly (string | number)[];

export interface FieldProblem {
  readonly path: FieldPath;
  readonly message: string;
}

export const SOURCE_RANGES_ANNOTATION = "service.beta.kubernetes.io/load-balancer-source-ranges";

export interface PortRange {
  readonly first: number;
  readonly last: number;
}

/** `30000-32767` → {first, last}; undefined when malformed. */
export function parsePortRange(text: string): PortRange | undefined {
  const m = /^([0-9]{1,5})-([0-9]{1,5})$/.exec(text.trim());
  if (!m) return undefined;
  const first = Number(m[1]);
  const last = Number(m[2]);
  if (first < 1 || last > 65535 || first > last) return undefined;
  return { first, last };
}

const DEFAULT_NODE_PORTS: PortRange = { first: 30000, last: 32767 };

export function validateService(svc: Service, config: PasslbConfigSpec): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const add = (path: FieldPath, message: string) => problems.push({ path, message });
  const spec = svc.spec;
  const isLB = spec.type === "LoadBalancer";
  const external = isLB || spec.type === "NodePort";
  const nodePorts = parsePortRange(config.nodePortRange) ?? DEFAULT_NODE_PORTS;
  validateMetaName(svc.metadata, add, dns1035Label);

  if (spec.type !== "ExternalName" && spec.ports.length === 0)
    add(["spec", "ports"], "at least one port is required");
  const names = new Set<string>();
  const portKeys = new Set<string>();
  spec.ports.forEach((p, i) => {
    const at = ["spec", "ports", i];
    if (spec.ports.length > 1 && !p.name)
      add([...at, "name"], "a name is required when a Service has more than one port");
    if (p.name) {
      const e = dns1123Label(p.name);
      if (e) add([...at, "name"], e);
      if (names.has(p.name)) add([...at, "name"], `duplicate port name "${p.name}"`);
      names.add(p.name);
    }
    const key = `${p.protocol}/${p.port}`;
    if (portKeys.has(key)) add([...at, "port"], `duplicate port ${p.port}/${p.protocol}`);
    portKeys.add(key);
    if (typeof p.targetPort === "number" && (p.targetPort < 1 || p.targetPort > 65535))
      add([...at, "targetPort"], `must be between 1 and 65535 (got ${p.targetPort})`);
    if (typeof p.targetPort === "string") {
      const e = ianaServiceName(p.targetPort);
      if (e) add([...at, "targetPort"], `a named targetPort ${e}`);
    }
    if (p.nodePort !== undefined && p.nodePort !== 0) {
      if (!external) add([...at, "nodePort"], `may only be set when type is NodePort or LoadBalancer`);
      else if (p.nodePort < nodePorts.first || p.nodePort > nodePorts.last)
        add(
          [...at, "nodePort"],
          `${p.nodePort} is outside the node port range ${nodePorts.first}-${nodePorts.last}`,
        );
    }
  });

  const etp = spec.externalTrafficPolicy;
  if (etp !== undefined && !external)
    add(["spec", "externalTrafficPolicy"], "may only be set when type is NodePort or LoadBalancer");
  const hcnp = spec.healthCheckNodePort;
  if (hcnp !== undefined && hcnp !== 0) {
    if (!isLB || etp !== "Local")
      add(
        ["spec", "healthCheckNodePort"],
        "may only be set when type is LoadBalancer and externalTrafficPolicy is Local",
      );
    else if (hcnp < nodePorts.first || hcnp > nodePorts.last)
      add(
        ["spec", "healthCheckNodePort"],
        `${hcnp} is outside the node port range ${nodePorts.first}-${nodePorts.last}`,
      );
    else if (spec.ports.some((p) => p.nodePort === hcnp))
      add(["spec", "healthCheckNodePort"], `${hcnp} is also used as a nodePort of this Service`);
  }

  const families = spec.ipFamilies ?? [];
  if (families.length > 2) add(["spec", "ipFamilies"], "at most two families may be given");
  if (families.length === 2 && families[0] === families[1])
    add(["spec", "ipFamilies", 1], `duplicate family ${families[1]}`);
  const policy = spec.ipFamilyPolicy;
  if (families.length === 2 && (policy === undefined || policy === "SingleStack"))
    add(
      ["spec", "ipFamilyPolicy"],
      `must be PreferDualStack or RequireDualStack when two ipFamilies are given (got ${policy ?? "unset, which means SingleStack"})`,
    );

  if (spec.loadBalancerClass !== undefined) {
    if (!isLB) add(["spec", "loadBalancerClass"], "may only be set when type is LoadBalancer");
    const e = qualifiedName(spec.loadBalancerClass, true);
    if (e) add(["spec", "loadBalancerClass"], e);
  }
  if (spec.loadBalancerIP !== undefined && spec.loadBalancerIP !== "" && !parseIp(spec.loadBalancerIP))
    add(["spec", "loadBalancerIP"], `"${spec.loadBalancerIP}" is not a valid IP address`);

  const ranges = spec.loadBalancerSourceRanges ?? [];
  if (ranges.length > 0) {
    if (!isLB) add(["spec", "loadBalancerSourceRanges"], "may only be set when type is LoadBalancer");
    ranges.forEach((r, i) => {
      if (!parseCidr(r.trim(), true))
        add(
          ["spec", "loadBalancerSourceRanges", i],
          `"${r}" is not a valid CIDR (expected e.g. 192.0.2.0/24)`,
        );
    });
  } else {
    const annotated = svc.metadata.annotations?.[SOURCE_RANGES_ANNOTATION];
    if (annotated !== undefined && isLB) {
      for (const r of annotated.split(",")) {
        if (r.trim() !== "" && !parseCidr(r.trim(), true))
          add(["metadata", "annotations", SOURCE_RANGES_ANNOTATION], `"${r.trim()}" is not a valid CIDR`);
      }
    }
  }

  const timeout = spec.sessionAffinityConfig?.clientIP?.timeoutSeconds;
  if (timeout !== undefined) {
    const at = ["spec", "sessionAffinityConfig", "clientIP", "timeoutSeconds"];
    if (spec.sessionAffinity !== "ClientIP") add(at, "may only be set when sessionAffinity is ClientIP");
    else if (timeout < 1 || timeout > 86400) add(at, `must be between 1 and 86400 seconds (got ${timeout})`);
  }

  (svc.status?.loadBalancer?.ingress ?? []).forEach((ing, i) => {
    if (ing.ip !== undefined && !parseIp(ing.ip))
      add(["status", "loadBalancer", "ingress", i, "ip"], `"${ing.ip}" is not a valid IP address`);
  });
  return problems;
}

export function validateNode(node: Node): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const add = (path: FieldPath, message: string) => problems.push({ path, message });
  validateMetaName(node.metadata, add, dns1123Subdomain, false);
  (node.status.addresses ?? []).forEach((a, i) => {
    if ((a.type === "InternalIP" || a.type === "ExternalIP") && !parseIp(a.address))
      add(["status", "addresses", i, "address"], `"${a.address}" is not a valid IP address`);
  });
  if (node.spec.podCIDR && !parseCidr(node.spec.podCIDR, true))
    add(["spec", "podCIDR"], `"${node.spec.podCIDR}" is not a valid CIDR`);
  return problems;
}

export function validatePod(pod: Pod): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const add = (path: FieldPath, message: string) => problems.push({ path, message });
  validateMetaName(pod.metadata, add, dns1123Subdomain);
  if (pod.status.podIP && !parseIp(pod.status.podIP))
    add(["status", "podIP"], `"${pod.status.podIP}" is not a valid IP address`);
  (pod.status.podIPs ?? []).forEach((p, i) => {
    if (!parseIp(p.ip)) add(["status", "podIPs", i, "ip"], `"${p.ip}" is not a valid IP address`);
  });
  return problems;
}

/** discovery/v1 ValidateEndpointSlice, as far as a consumer cares (kubernetes pkg/apis/discovery/validation/validation.go). */
export function validateEndpointSlice(slice: EndpointSlice): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const add = (path: FieldPath, message: string) => problems.push({ path, message });
  validateMetaName(slice.metadata, add, dns1123Subdomain);
  const endpoints = slice.endpoints ?? [];
  if (endpoints.length > 1000)
    add(["endpoints"], `at most 1000 endpoints are allowed (got ${endpoints.length})`);
  endpoints.forEach((ep, i) => {
    if (ep.addresses.length < 1 || ep.addresses.length > 100)
      add(["endpoints", i, "addresses"], "must have between 1 and 100 addresses");
    ep.addresses.forEach((a, j) => {
      if (slice.addressType === "FQDN") {
        const e = dns1123Subdomain(a);
        if (e) add(["endpoints", i, "addresses", j], e);
        return;
      }
      const ip = parseIp(a);
      if (!ip || ip.family !== slice.addressType)
        add(["endpoints", i, "addresses", j], `"${a}" is not a valid ${slice.addressType} address`);
      else if (isSpecialPurposeEndpointIp(ip))
        add(
          ["endpoints", i, "addresses", j],
          `"${a}" may not be unspecified, loopback, link-local or link-local multicast (ValidateEndpointIP)`,
        );
    });
    if (ep.hostname) {
      const e = dns1123Label(ep.hostname);
      if (e) add(["endpoints", i, "hostname"], e);
    }
  });
  const seen = new Set<string>();
  (slice.ports ?? []).forEach((p, i) => {
    const name = p.name ?? "";
    if (name !== "") {
      const e = dns1123Label(name);
      if (e) add(["ports", i, "name"], e);
    }
    if (seen.has(name)) add(["ports", i, "name"], `duplicate port name "${name}"`);
    seen.add(name);
    if (p.port !== null && p.port !== undefined && (p.port < 0 || p.port > 65535))
      add(["ports", i, "port"], `must be between 0 and 65535 (got ${p.port})`);
  });
  return problems;
}

export function validateEndpoints(ep: Endpoints): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const add = (path: FieldPath, message: string) => problems.push({ path, message });
  validateMetaName(ep.metadata, add, dns1035Label);
  (ep.subsets ?? []).forEach((s, i) => {
    for (const field of ["addresses", "notReadyAddresses"] as const) {
      (s[field] ?? []).forEach((a, j) => {
        if (!parseIp(a.ip)) add(["subsets", i, field, j, "ip"], `"${a.ip}" is not a valid IP address`);
      });
    }
  });
  return problems;
}

export function validateConfig(spec: PasslbConfigSpec): FieldProblem[] {
  const problems: FieldProblem[] = [];
  const add = (path: FieldPath, message: string) => problems.push({ path, message });
  if (!parsePortRange(spec.nodePortRange))
    add(["spec", "nodePortRange"], `"${spec.nodePortRange}" must be a port range like 30000-32767`);
  const poolNames = new Set<string>();
  spec.pools.forEach((pool, i) => {
    if (poolNames.has(pool.name)) add(["spec", "pools", i, "name"], `duplicate pool name "${pool.name}"`);
    poolNames.add(pool.name);
    pool.addresses.forEach((a, j) => {
      const text = a.trim();
      const ok = text.includes("-")
        ? parseIpRange(text)
        : text.includes("/")
          ? parseCidr(text)
          : parseIp(text);
      if (!ok)
        add(
          ["spec", "pools", i, "addresses", j],
          `"${a}" is not a CIDR (203.0.113.0/28), a range (203.0.113.10-203.0.113.20) or an address` +
            (text.includes("/") && parseCidr(text, true) ? " (host bits are set)" : ""),
        );
    });
  });
  spec.zones.forEach((z, i) => {
    z.clientCIDRs.forEach((c, j) => {
      if (!parseCidr(c, true)) add(["spec", "zones", i, "clientCIDRs", j], `"${c}" is not a valid CIDR`);
    });
  });
  return problems;
}

function validateMetaName(
  meta: { name?: string | undefined; namespace?: string | undefined },
  add: (path: FieldPath, message: string) => void,
  rule: (v: string) => string | undefined,
  namespaced = true,
): void {
  if (!meta.name) add(["metadata", "name"], "is required");
  else {
    const e = rule(meta.name);
    if (e) add(["metadata", "name"], e);
  }
  if (namespaced && meta.namespace !== undefined) {
    const e = dns1123Label(meta.namespace);
    if (e) add(["metadata", "namespace"], e);
  }
}
