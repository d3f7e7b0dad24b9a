/**
 * The Service annotations cloud-provider-azure reads for LB probes and rules, and the
 * small readers that interpret them the way it does (`pkg/consts/consts.go` and
 * `pkg/consts/helpers.go`): a flag is on when its value is `true` in any letter case; a
 * number is trimmed and read as a base-10 32-bit integer. Deliberately only readers: what a
 * value means for a probe or a rule is decided in azure-probes.ts and azure-rules.ts.
 */
import type { Service } from "../../k8s/objects.ts";

export const ANNOTATION_PREFIX = "service.beta.kubernetes.io/";

export const AZURE_ANNOTATIONS = {
  internal: `${ANNOTATION_PREFIX}azure-load-balancer-internal`,
  internalSubnet: `${ANNOTATION_PREFIX}azure-load-balancer-internal-subnet`,
  haPorts: `${ANNOTATION_PREFIX}azure-load-balancer-enable-high-availability-ports`,
  probeProtocol: `${ANNOTATION_PREFIX}azure-load-balancer-health-probe-protocol`,
  probeRequestPath: `${ANNOTATION_PREFIX}azure-load-balancer-health-probe-request-path`,
  probeInterval: `${ANNOTATION_PREFIX}azure-load-balancer-health-probe-interval`,
  probeNumOfProbe: `${ANNOTATION_PREFIX}azure-load-balancer-health-probe-num-of-probe`,
  disableFloatingIp: `${ANNOTATION_PREFIX}azure-disable-load-balancer-floating-ip`,
  disableTcpReset: `${ANNOTATION_PREFIX}azure-load-balancer-disable-tcp-reset`,
  idleTimeout: `${ANNOTATION_PREFIX}azure-load-balancer-tcp-idle-timeout`,
  plsCreate: `${ANNOTATION_PREFIX}azure-pls-create`,
  plsProxyProtocol: `${ANNOTATION_PREFIX}azure-pls-proxy-protocol`,
  /** removed upstream; read only to warn that it does nothing */
  mixedProtocols: `${ANNOTATION_PREFIX}azure-load-balancer-mixed-protocols`,
} as const;

export type PortProbeParam = "protocol" | "port" | "interval" | "num-of-probe" | "request-path";

/** `service.beta.kubernetes.io/port_<p>_health-probe_<param>`, keyed by the service port number (spec §4). */
export const portProbeKey = (port: number, param: PortProbeParam): string =>
  `${ANNOTATION_PREFIX}port_${port}_health-probe_${param}`;

/** `service.beta.kubernetes.io/port_<p>_no_lb_rule` / `_no_probe_rule` (spec §3.4). */
export const portFlagKey = (port: number, flag: "no_lb_rule" | "no_probe_rule"): string =>
  `${ANNOTATION_PREFIX}port_${port}_${flag}`;

/** The annotation's value, or undefined when the key is absent (an empty value is present). */
export function annotation(service: Service, key: string): string | undefined {
  return service.metadata.annotations?.[key] ?? undefined;
}

/** On when the value is `true` in any letter case; anything else (or absent) is off, never an error. */
export function flagOn(service: Service, key: string): boolean {
  return annotation(service, key)?.toLowerCase() === "true";
}

/**
 * The internal-LB test. Most checks accept `true` in any case; the LB choice and the
 * internal-subnet naming want exactly `true` (spec §2, §10).
 */
export const isInternal = (service: Service): boolean => flagOn(service, AZURE_ANNOTATIONS.internal);
export const isInternalExact = (service: Service): boolean =>
  annotation(service, AZURE_ANNOTATIONS.internal) === "true";

/** A trimmed base-10 int32, as Go's ParseInt(TrimSpace(v), 10, 32) reads it; undefined when it is not one. */
export function parseWholeNumber(raw: string): number | undefined {
  const text = raw.trim();
  if (!/^[+-]?\d+$/.test(text)) return undefined;
  const n = Number(text);
  return n >= -2147483648 && n <= 2147483647 ? n : undefined;
}

/** The annotation keys a user might expect but that do not exist (`getHealthProbeConfigProbeIntervalAndNumOfProbe`: there is no threshold annotation). */
export function nonexistentProbeKeys(service: Service): string[] {
  const keys = Object.keys(service.metadata.annotations ?? {});
  return keys.filter(
    (k) =>
      k.startsWith(ANNOTATION_PREFIX) &&
      (/^service\.beta\.kubernetes\.io\/port_\d+_health-probe_(probe-)?threshold$/.test(k) ||
        /^service\.beta\.kubernetes\.io\/azure-load-balancer-health-probe-(probe-)?threshold$/.test(k)),
  );
}
