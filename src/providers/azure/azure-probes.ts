/**
 * Azure LB health probes for one Service, as cloud-provider-azure builds them
 * (`getExpectedLBRules`, `buildHealthProbeRulesForPort`; healthprobe.go):
 * - the per-port probe (`buildHealthProbeRulesForPort`): probe port, protocol, request path
 *   and timing from the `port_<p>_health-probe_*` annotations, appProtocol and the global
 *   annotations, in that precedence;
 * - the node-endpoint probe for externalTrafficPolicy Local (Http `/healthz` on
 *   healthCheckNodePort, timing keyed by the healthCheckNodePort number, §3.1);
 * - the cluster-wide shared probe (§3.2).
 * Deliberately does not decide which probe a rule uses: azure-plan.ts does.
 */
import type { Service, ServicePort } from "../../k8s/objects.ts";
import { AZURE_ANNOTATIONS, annotation, parseWholeNumber, portProbeKey } from "./azure-annotations.ts";
import type {
  AzureFailure,
  AzureNotes,
  AzureOptions,
  AzureProbe,
  AzureProbeProtocol,
  AzureSku,
  Outcome,
} from "./azure-model.ts";
import { SHARED_PROBE_NAME } from "./azure-names.ts";

const ok = <T>(value: T): Outcome<T> => ({ ok: true, value });
const fail = <T>(failure: AzureFailure): Outcome<T> => ({ ok: false, failure });

/** Where a resolved value came from, for explanations: an annotation key with its value, or `default`. */
interface Sourced<T> {
  readonly value: T;
  readonly from: string;
}

const quote = (s: string): string => JSON.stringify(s);

/**
 * One timing value: the per-port annotation if present (the global one is then never
 * read), else the global annotation, else the default; trimmed int32 at or above `min`.
 */
function timingValue(
  service: Service,
  keys: readonly [perPort: string, global: string],
  fallback: number,
  min: number,
  code: "invalid_probe_interval" | "invalid_probe_num_of_probe",
  unit: string,
): Outcome<Sourced<number>> {
  for (const key of keys) {
    const raw = annotation(service, key);
    if (raw === undefined) continue;
    const n = parseWholeNumber(raw);
    if (n === undefined)
      return fail({
        code,
        annotation: key,
        value: raw,
        message: `${key}: ${quote(raw)} is not a whole number`,
      });
    if (n < min)
      return fail({
        code,
        annotation: key,
        value: raw,
        message: `${key}: ${quote(raw)} is below the minimum of ${min} ${unit}`,
      });
    return ok({ value: n, from: `${key}=${quote(raw)}` });
  }
  return ok({ value: fallback, from: "default" });
}

export interface ProbeTiming {
  readonly interval: Sourced<number>;
  readonly threshold: Sourced<number>;
}

/**
 * `getHealthProbeConfigProbeIntervalAndNumOfProbe` (spec §4.4): num-of-probe first
 * (default 2, min 2), then interval (default 5, min 5), and interval × num must stay under 120.
 * `keyPort` is the number in the per-port keys: the service port, or healthCheckNodePort.
 */
export function probeTiming(service: Service, keyPort: number): Outcome<ProbeTiming> {
  const threshold = timingValue(
    service,
    [portProbeKey(keyPort, "num-of-probe"), AZURE_ANNOTATIONS.probeNumOfProbe],
    2,
    2,
    "invalid_probe_num_of_probe",
    "probes",
  );
  if (!threshold.ok) return threshold;
  const interval = timingValue(
    service,
    [portProbeKey(keyPort, "interval"), AZURE_ANNOTATIONS.probeInterval],
    5,
    5,
    "invalid_probe_interval",
    "seconds",
  );
  if (!interval.ok) return interval;
  const product = interval.value.value * threshold.value.value;
  if (product >= 120) {
    // at least one of the two came from an annotation: the defaults give 10
    const blamed = interval.value.from !== "default" ? interval.value : threshold.value;
    const key = blamed.from.slice(0, blamed.from.indexOf("="));
    return fail({
      code: "probe_window_too_long",
      annotation: key,
      value: String(blamed.value),
      message:
        `health probe for port ${keyPort}: interval ${interval.value.value} × num-of-probe ${threshold.value.value} = ${product} seconds, ` +
        `which must be under 120 (interval from ${interval.value.from}, num-of-probe from ${threshold.value.from})`,
    });
  }
  return ok({ interval: interval.value, threshold: threshold.value });
}

/** The probe protocol from the first present source (`buildHealthProbeRulesForPort`); unknown values mean Tcp, https on Basic means Tcp. */
function probeProtocol(
  service: Service,
  port: ServicePort,
  sku: AzureSku,
  notes: AzureNotes,
): Sourced<AzureProbeProtocol> {
  const perPortKey = portProbeKey(port.port, "protocol");
  const sources: [string, string | undefined][] = [
    [perPortKey, annotation(service, perPortKey)],
    [`appProtocol of port ${port.port}`, port.appProtocol],
    [AZURE_ANNOTATIONS.probeProtocol, annotation(service, AZURE_ANNOTATIONS.probeProtocol)],
  ];
  const found = sources.find((s): s is [string, string] => s[1] !== undefined);
  if (found === undefined) return { value: "Tcp", from: "default" };
  const [where, raw] = found;
  const from = `${where}=${quote(raw)}`;
  switch (raw.trim().toLowerCase()) {
    case "tcp":
      return { value: "Tcp", from };
    case "http":
      return { value: "Http", from };
    case "https":
      if (sku === "Standard") return { value: "Https", from };
      notes.warn.push(
        `port ${port.port}: probe protocol https (${from}) becomes Tcp on the Basic SKU, without a request path`,
      );
      return { value: "Tcp", from: `${from}, Https downgraded on Basic` };
    default:
      notes.warn.push(
        `port ${port.port}: probe protocol ${quote(raw)} (from ${where}) is not tcp, http or https, so Azure probes with Tcp`,
      );
      return { value: "Tcp", from: `${from}, not tcp/http/https` };
  }
}

/** `port_<p>_health-probe_port` (spec §4.1): validated, then resolved; undefined when absent. */
function probePortOverride(service: Service, port: ServicePort): Outcome<number | undefined> {
  const key = portProbeKey(port.port, "port");
  const raw = annotation(service, key);
  if (raw === undefined) return ok(undefined);
  const ports = service.spec.ports;
  const sameName = (p: ServicePort) => (p.name ?? "").toLowerCase() === raw.toLowerCase();
  const numeric = /^[+-]?\d+$/.test(raw) ? Number(raw) : undefined; // Atoi: no trimming
  if (!ports.some(sameName)) {
    if (numeric === undefined || !Number.isSafeInteger(numeric))
      return fail({
        code: "invalid_probe_port",
        annotation: key,
        value: raw,
        message: `${key}: ${quote(raw)} is neither the name of a port of this Service nor a port number`,
      });
    if (numeric < 0 || numeric > 65535)
      return fail({
        code: "invalid_probe_port",
        annotation: key,
        value: raw,
        message: `${key}: ${quote(raw)} is outside the port range 0-65535`,
      });
  }
  if (numeric !== undefined) {
    // a service port number means that port's nodePort; any other number is used as is
    const match = ports.find((p) => p.port === numeric);
    return ok(match === undefined ? numeric : (match.nodePort ?? 0));
  }
  return ok(ports.find(sameName)?.nodePort ?? 0);
}

export interface PortProbeContext {
  readonly sku: AzureSku;
  /** an eTP Local node-endpoint probe exists */
  readonly nodeEndpoint: boolean;
  /** the shared probe is in use */
  readonly shared: boolean;
}

/**
 * `buildHealthProbeRulesForPort` (spec §4): the probe named `name` for one service port,
 * or null when this port gets no probe of its own (shared mode, UDP/SCTP, or eTP Local
 * without a probe-port override). Errors are values.
 */
export function portProbe(
  service: Service,
  port: ServicePort,
  name: string,
  ctx: PortProbeContext,
  notes: AzureNotes,
): Outcome<AzureProbe | null> {
  if (ctx.shared) return ok(null);
  if (port.protocol !== "TCP") {
    notes.explain.push(
      `port ${port.port}/${port.protocol}: Azure builds no per-port probe for ${port.protocol}`,
    );
    return ok(null);
  }
  const override = probePortOverride(service, port);
  if (!override.ok) return override;
  if (override.value === undefined && ctx.nodeEndpoint) return ok(null);
  const probePort = override.value ?? port.nodePort ?? 0;
  const protocol = probeProtocol(service, port, ctx.sku, notes);
  const timing = probeTiming(service, port.port);
  if (!timing.ok) return timing;
  let path: Sourced<string> | undefined;
  if (protocol.value !== "Tcp") {
    const perPortKey = portProbeKey(port.port, "request-path");
    const perPort = annotation(service, perPortKey);
    const global = annotation(service, AZURE_ANNOTATIONS.probeRequestPath);
    path =
      perPort !== undefined
        ? { value: perPort, from: perPortKey }
        : global !== undefined
          ? { value: global, from: AZURE_ANNOTATIONS.probeRequestPath }
          : { value: "/", from: "default" };
  }
  const portFrom =
    override.value === undefined
      ? `the nodePort of port ${port.port}`
      : `${portProbeKey(port.port, "port")}=${quote(annotation(service, portProbeKey(port.port, "port")) ?? "")}`;
  notes.explain.push(
    `probe ${name}: ${protocol.value} (${protocol.from}) on port ${probePort} (${portFrom})` +
      (path === undefined ? "" : `, path ${path.value} (${path.from})`) +
      `, every ${timing.value.interval.value}s (${timing.value.interval.from}), threshold ${timing.value.threshold.value} (${timing.value.threshold.from})`,
  );
  if (probePort === 0)
    notes.warn.push(`port ${port.port}: the probe port is 0 because the port has no nodePort`);
  return ok({
    name,
    properties: {
      protocol: protocol.value,
      port: probePort,
      ...(path === undefined ? {} : { requestPath: path.value }),
      intervalInSeconds: timing.value.interval.value,
      probeThreshold: timing.value.threshold.value,
    },
  });
}

/**
 * The eTP Local node-endpoint probe (`getExpectedLBRules`): Http `/healthz` on healthCheckNodePort on
 * every SKU; protocol and path annotations and appProtocol are ignored; the per-port timing
 * keys use the healthCheckNodePort number.
 */
export function nodeEndpointProbe(service: Service, name: string): Outcome<AzureProbe> {
  const hcnp = service.spec.healthCheckNodePort ?? 0;
  const timing = probeTiming(service, hcnp);
  if (!timing.ok) return timing;
  return ok({
    name,
    properties: {
      protocol: "Http",
      port: hcnp,
      requestPath: "/healthz",
      intervalInSeconds: timing.value.interval.value,
      probeThreshold: timing.value.threshold.value,
    },
  });
}

/** Timing of the node-endpoint probe, for explanations (the caller already knows it is valid). */
export function describeTiming(t: ProbeTiming): string {
  return `every ${t.interval.value}s (${t.interval.from}), threshold ${t.threshold.value} (${t.threshold.from})`;
}

/** `buildClusterServiceSharedProbe` (spec §3.2): Http on the configured port and path, 5 s × 2, no annotation applies. */
export function sharedProbe(options: AzureOptions): AzureProbe {
  return {
    name: SHARED_PROBE_NAME,
    properties: {
      protocol: "Http",
      port: options.sharedProbePort,
      requestPath: options.sharedProbePath,
      intervalInSeconds: 5,
      probeThreshold: 2,
    },
  };
}
