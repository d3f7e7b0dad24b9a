/**
 * `azureListenerProbes`: the Azure per-port probe annotations of one Service read into a
 * neutral form, so the passlb planner can give a Service written for AKS the health check
 * AKS would give each of its listeners. Same rules as the Azure view (`getExpectedLBRules`, `buildHealthProbeRulesForPort`):
 * precedence, probe port resolution, defaults and limits, the eTP Local /healthz probe.
 *
 * Fixed assumptions: per-port mode (no HA ports), the Standard SKU (Https stays Https) and
 * the `servicenodeport` probe mode. Unlike cloud-provider-azure, which stops at the first
 * bad annotation, every error is collected, and a listener whose probe is in error maps to
 * null. Only probe errors are reported: SCTP and idle-timeout checks are about rules.
 */
import type { Service } from "../../k8s/objects.ts";
import { AZURE_ANNOTATIONS, flagOn, portFlagKey } from "./azure-annotations.ts";
import { AZURE_DEFAULTS, type AzureNotes, type AzureProbe } from "./azure-model.ts";
import { nodeEndpointProbe, portProbe } from "./azure-probes.ts";

export interface NeutralProbe {
  readonly protocol: "TCP" | "HTTP" | "HTTPS";
  readonly port: number;
  /** request path for HTTP(S); null for TCP */
  readonly path: string | null;
  readonly intervalSeconds: number;
  /** Azure's probeThreshold (from num-of-probe) */
  readonly threshold: number;
}

export interface ListenerProbeError {
  readonly annotation: string;
  readonly value: string;
  readonly message: string;
}

export interface ListenerProbes {
  /** `TCP/80` → the probe gating that listener; null when none does (UDP/SCTP, no_probe_rule, no_lb_rule, error) */
  readonly listeners: Map<string, NeutralProbe | null>;
  readonly errors: ListenerProbeError[];
}

const neutral = (p: AzureProbe): NeutralProbe => ({
  protocol: p.properties.protocol === "Tcp" ? "TCP" : p.properties.protocol === "Http" ? "HTTP" : "HTTPS",
  port: p.properties.port,
  path: p.properties.requestPath ?? null,
  intervalSeconds: p.properties.intervalInSeconds,
  threshold: p.properties.probeThreshold,
});

export function azureListenerProbes(service: Service): ListenerProbes {
  const listeners = new Map<string, NeutralProbe | null>();
  const errors: ListenerProbeError[] = [];
  const addError = (f: { annotation?: string; value?: string; message: string }) => {
    if (!errors.some((e) => e.message === f.message))
      errors.push({ annotation: f.annotation ?? "", value: f.value ?? "", message: f.message });
  };
  const notes: AzureNotes = { explain: [], warn: [] };
  const plsProxy =
    flagOn(service, AZURE_ANNOTATIONS.plsCreate) && flagOn(service, AZURE_ANNOTATIONS.plsProxyProtocol);
  let local: AzureProbe | null = null;
  let localBroken = false;
  if (service.spec.externalTrafficPolicy === "Local" && !plsProxy) {
    const built = nodeEndpointProbe(service, "healthz");
    if (built.ok) local = built.value;
    else {
      localBroken = true;
      addError(built.failure);
    }
  }
  for (const port of service.spec.ports) {
    const key = `${port.protocol}/${port.port}`;
    if (
      flagOn(service, portFlagKey(port.port, "no_lb_rule")) ||
      flagOn(service, portFlagKey(port.port, "no_probe_rule"))
    ) {
      listeners.set(key, null);
      continue;
    }
    const built = portProbe(
      service,
      port,
      key,
      { sku: AZURE_DEFAULTS.sku, nodeEndpoint: local !== null || localBroken, shared: false },
      notes,
    );
    if (!built.ok) {
      addError(built.failure);
      listeners.set(key, null);
    } else if (built.value !== null) listeners.set(key, neutral(built.value));
    else listeners.set(key, local === null ? null : neutral(local));
  }
  return { listeners, errors };
}
