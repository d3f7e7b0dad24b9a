/**
 * Service-level warnings for the Azure view: annotations cloud-provider-azure silently
 * ignores, removed or non-existent keys, and manifest gaps that change the names or ports
 * it would use. These are passlb's advice, not upstream behaviour: upstream logs nothing
 * for any of them (docs/providers-azure.md "Facts that surprise users"). Port-specific warnings that depend on
 * the probe actually built live in azure-probes.ts and azure-plan.ts.
 */
import type { Service } from "../../k8s/objects.ts";
import {
  ANNOTATION_PREFIX,
  AZURE_ANNOTATIONS,
  annotation,
  flagOn,
  isInternal,
  isInternalExact,
  nonexistentProbeKeys,
  portFlagKey,
  portProbeKey,
} from "./azure-annotations.ts";
import type { AzureOptions } from "./azure-model.ts";

const PER_PORT =
  /^service\.beta\.kubernetes\.io\/port_(\d+)_(health-probe_[a-z-]+|no_lb_rule|no_probe_rule)$/;
const TUNING = ["protocol", "request-path", "interval", "num-of-probe"] as const;

/** Whether the Service is planned in HA-ports mode (`getExpectedLBRules`). */
export const usesHaPorts = (service: Service, options: AzureOptions): boolean =>
  isInternal(service) && options.sku === "Standard" && flagOn(service, AZURE_ANNOTATIONS.haPorts);

export function serviceWarnings(service: Service, options: AzureOptions): string[] {
  const out: string[] = [];
  const annotations = service.metadata.annotations ?? {};
  const keys = Object.keys(annotations);
  const ports = service.spec.ports;
  const local = service.spec.externalTrafficPolicy === "Local";
  const plsProxy =
    flagOn(service, AZURE_ANNOTATIONS.plsCreate) && flagOn(service, AZURE_ANNOTATIONS.plsProxyProtocol);
  const shared = options.probeMode === "shared" && !local;
  const ha = usesHaPorts(service, options);

  if (service.metadata.uid === undefined)
    out.push(
      "metadata.uid is not set: names use a placeholder UID derived from namespace/name; the real names come from the UID the API server assigns",
    );
  if (service.spec.loadBalancerClass !== undefined)
    out.push(
      `spec.loadBalancerClass is ${JSON.stringify(service.spec.loadBalancerClass)}: the cloud controller leaves such Services to another controller; shown as if it were not set`,
    );
  if (annotations[AZURE_ANNOTATIONS.mixedProtocols] !== undefined)
    out.push(
      `${AZURE_ANNOTATIONS.mixedProtocols} was removed upstream and has no effect: each spec.ports entry gets its own rule`,
    );
  for (const key of nonexistentProbeKeys(service))
    out.push(`${key} does not exist: the num-of-probe annotations set probeThreshold`);
  const internalRaw = annotation(service, AZURE_ANNOTATIONS.internal);
  if (isInternal(service) && !isInternalExact(service))
    out.push(
      `${AZURE_ANNOTATIONS.internal} is ${JSON.stringify(internalRaw)}: HA ports, SCTP and floating IP treat it as internal, but the load balancer choice and the subnet rule names need exactly "true"`,
    );
  if (flagOn(service, AZURE_ANNOTATIONS.haPorts) && !ha)
    out.push(
      `${AZURE_ANNOTATIONS.haPorts} is ignored: HA ports need an internal load balancer on the Standard SKU; one rule per port is built instead`,
    );
  if (ha) {
    const ignored = keys.filter(
      (k) => /_no_lb_rule$|_no_probe_rule$/.test(k) || k === AZURE_ANNOTATIONS.disableFloatingIp,
    );
    for (const k of ignored) out.push(`${k} is ignored in HA-ports mode`);
  }
  const noNodePort = ports.filter((p) => !p.nodePort).map((p) => `${p.port}/${p.protocol}`);
  if (noNodePort.length > 0)
    out.push(
      service.spec.allocateLoadBalancerNodePorts === false
        ? `allocateLoadBalancerNodePorts is false and port ${noNodePort.join(", ")} has no nodePort: cloud-provider-azure does not check this, and port 0 reaches any probe or backend port that uses the nodePort (working shapes: eTP Local, or the shared probe, with floating IP on)`
        : `port ${noNodePort.join(", ")} has no nodePort in the manifest: the API server would allocate one; shown as 0 here`,
    );
  if (local && !plsProxy && service.spec.healthCheckNodePort === undefined)
    out.push(
      "spec.healthCheckNodePort is not set (the API server allocates one): the Local probe shows port 0",
    );

  // per-port keys that name no service port (a nodePort or targetPort by mistake)
  const portNumbers = new Set(ports.map((p) => p.port));
  const hcnp = service.spec.healthCheckNodePort;
  for (const k of keys) {
    const m = PER_PORT.exec(k);
    if (m === null) continue;
    const n = Number(m[1]);
    if (portNumbers.has(n)) continue;
    if (n === hcnp && /_(interval|num-of-probe)$/.test(k) && local && !plsProxy) continue;
    out.push(
      `${k} names port ${n}, which is not a service port: per-port annotations are keyed by spec.ports[].port`,
    );
  }

  if (shared) {
    const probeKeys = keys.filter(
      (k) =>
        /^service\.beta\.kubernetes\.io\/port_\d+_health-probe_/.test(k) ||
        k.startsWith(`${ANNOTATION_PREFIX}azure-load-balancer-health-probe-`),
    );
    if (probeKeys.length > 0)
      out.push(
        `shared probe mode: every rule uses the cluster's shared probe, so these are ignored (and not validated): ${probeKeys.join(", ")}`,
      );
    return out;
  }
  for (const port of ports) {
    const tuned = TUNING.map((t) => portProbeKey(port.port, t)).filter((k) => annotations[k] !== undefined);
    const hasPortOverride = annotations[portProbeKey(port.port, "port")] !== undefined;
    const anyTcp = ports.some((p) => p.port === port.port && p.protocol === "TCP");
    if (!anyTcp && (tuned.length > 0 || hasPortOverride) && port === ports.find((p) => p.port === port.port))
      out.push(
        `port ${port.port}/${port.protocol}: Azure builds no per-port probe for ${port.protocol}, so ${[...(hasPortOverride ? [portProbeKey(port.port, "port")] : []), ...tuned].join(", ")} ${tuned.length + (hasPortOverride ? 1 : 0) === 1 ? "is" : "are"} ignored`,
      );
    if (
      local &&
      !plsProxy &&
      !ha &&
      anyTcp &&
      !hasPortOverride &&
      tuned.length > 0 &&
      port.protocol === "TCP"
    )
      if (
        !flagOn(service, portFlagKey(port.port, "no_probe_rule")) &&
        !flagOn(service, portFlagKey(port.port, "no_lb_rule"))
      )
        out.push(
          `port ${port.port}: externalTrafficPolicy Local uses the /healthz probe on healthCheckNodePort, so ${tuned.join(", ")} ${tuned.length === 1 ? "is" : "are"} ignored` +
            ` (set ${portProbeKey(port.port, "port")} to give this port its own probe; the Local probe's timing keys are port_${hcnp ?? "<healthCheckNodePort>"}_health-probe_interval/num-of-probe)`,
        );
  }
  if (local && !plsProxy) {
    const globals = [AZURE_ANNOTATIONS.probeProtocol, AZURE_ANNOTATIONS.probeRequestPath].filter(
      (k) => annotations[k] !== undefined,
    );
    if (globals.length > 0)
      out.push(
        `externalTrafficPolicy Local: the /healthz probe is always Http on healthCheckNodePort, so ${globals.join(" and ")} apply only to ports with their own ${portProbeKey(0, "port").replace("_0_", "_<p>_")}`,
      );
  }
  return out;
}
