/**
 * One IP family's health probes and load-balancing rules, as cloud-provider-azure's
 * `getExpectedLBRules` builds them (`pkg/provider/azure_loadbalancer.go`,
 * `azure_loadbalancer_healthprobe.go`): the fallback probe (node-endpoint /healthz under
 * Local, or the shared probe), then one HA-ports rule or one rule per port. Pure; planAzure
 * (azure-plan.ts) runs it per family and puts the families together.
 */
import type { Service } from "../../k8s/objects.ts";
import { AZURE_ANNOTATIONS, flagOn, isInternal, portFlagKey } from "./azure-annotations.ts";
import type { AzureNotes, AzureOptions, AzureProbe, AzureRule, Outcome } from "./azure-model.ts";
import { backendPoolId, frontendConfigId, type NameScope, probeId, ruleName } from "./azure-names.ts";
import { describeTiming, nodeEndpointProbe, portProbe, probeTiming, sharedProbe } from "./azure-probes.ts";
import { haRuleProperties, portRuleProperties, type RuleContext } from "./azure-rules.ts";
import { usesHaPorts } from "./azure-warnings.ts";

export interface FamilyResult {
  readonly probes: AzureProbe[];
  readonly rules: AzureRule[];
}

/** The probe rules fall back to: the node-endpoint /healthz probe (Local) or the shared probe. */
interface SlotProbe {
  readonly probe: AzureProbe | null;
  /** the shared-probe mode's probe, not the node-endpoint one */
  readonly shared: boolean;
}

/** What the steps of expectedForFamily read. */
interface FamilyWalk {
  readonly service: Service;
  readonly options: AzureOptions;
  readonly scope: NameScope;
  readonly ctx: RuleContext;
  readonly slot: SlotProbe;
  readonly notes: AzureNotes;
  readonly ref: (probe: string) => { id: string };
}

/**
 * `getExpectedLBRules` for one IP family, in steps: the fallback probe
 * (node-endpoint, then shared) → HA ports (one rule for everything) or one rule per port.
 */
export function expectedForFamily(
  service: Service,
  options: AzureOptions,
  scope: NameScope,
  lbName: string,
  notes: AzureNotes,
): Outcome<FamilyResult> {
  const slot = slotProbeFor(service, options, scope, notes);
  if (!slot.ok) return slot;
  const w: FamilyWalk = {
    service,
    options,
    scope,
    ctx: {
      service,
      options,
      family: scope.family,
      frontendConfigId: frontendConfigId(options, lbName, scope),
      backendPoolId: backendPoolId(options, lbName, scope.family),
    },
    slot: slot.value,
    notes,
    ref: (name: string) => ({ id: probeId(options, lbName, name) }),
  };
  return usesHaPorts(service, options) ? haPortsRule(w) : portRules(w);
}

/**
 * 1. the node-endpoint probe, computed (and validated) whether or not a rule uses it;
 * 2. the shared probe replaces it for non-Local Services in shared mode.
 */
function slotProbeFor(
  service: Service,
  options: AzureOptions,
  scope: NameScope,
  notes: AzureNotes,
): Outcome<SlotProbe> {
  const local = service.spec.externalTrafficPolicy === "Local";
  const plsProxy =
    flagOn(service, AZURE_ANNOTATIONS.plsCreate) && flagOn(service, AZURE_ANNOTATIONS.plsProxyProtocol);
  let probe: AzureProbe | null = null;
  if (local && !plsProxy) {
    const hcnp = service.spec.healthCheckNodePort ?? 0;
    const built = nodeEndpointProbe(service, ruleName(scope, "TCP", hcnp));
    if (!built.ok) {
      notes.explain.push(
        `externalTrafficPolicy Local: the /healthz probe on healthCheckNodePort ${hcnp} is built first, whether or not a rule will use it, and its timing is invalid`,
      );
      return built;
    }
    probe = built.value;
    const timing = probeTiming(service, hcnp);
    notes.explain.push(
      `externalTrafficPolicy Local: node-endpoint probe ${built.value.name}, Http /healthz on healthCheckNodePort ${hcnp}` +
        (timing.ok ? `, ${describeTiming(timing.value)}` : "") +
        "; protocol and path annotations and appProtocol do not apply to it",
    );
  } else if (local) {
    notes.explain.push(
      "externalTrafficPolicy Local with a Private Link Service using PROXY protocol: no /healthz probe (kube-proxy's health check cannot read PROXY headers); ports get probes as under Cluster",
    );
  }
  if (options.probeMode === "shared" && !local) {
    const shared = sharedProbe(options);
    notes.explain.push(
      `shared probe mode: every rule, UDP included, uses ${shared.name} (Http ${options.sharedProbePath} on port ${options.sharedProbePort}, every 5s, threshold 2); no probe annotation is read`,
    );
    return { ok: true, value: { probe: shared, shared: true } };
  }
  return { ok: true, value: { probe, shared: false } };
}

/** 3. HA ports: one rule for everything, named after spec.ports[0]. */
function haPortsRule(w: FamilyWalk): Outcome<FamilyResult> {
  const { service, options, notes } = w;
  const ports = service.spec.ports;
  const first = ports[0];
  if (first === undefined) return { ok: true, value: { probes: [], rules: [] } };
  const name = ruleName(w.scope, first.protocol, first.port);
  const props = haRuleProperties(w.ctx);
  if (!props.ok) return props;
  notes.explain.push(
    `HA ports (internal, Standard, ${AZURE_ANNOTATIONS.haPorts}): one rule ${name} for all protocols and ports, named after spec.ports[0]`,
  );
  let probe = w.slot.probe;
  if (probe === null) {
    for (const port of ports) {
      const built = portProbe(
        service,
        port,
        name,
        { sku: options.sku, nodeEndpoint: false, shared: false },
        notes,
      );
      if (!built.ok) {
        notes.warn.push(
          `HA ports: port ${port.port} cannot give the rule a probe (cloud-provider-azure logs and skips it): ${built.failure.message}`,
        );
        continue;
      }
      if (built.value !== null) {
        probe = built.value;
        notes.explain.push(
          `HA ports: the probe comes from the first port that yields one, port ${port.port}`,
        );
        break;
      }
    }
    if (probe === null) {
      notes.explain.push("HA ports: no port yields a probe, so the rule has none");
      notes.warn.push(
        "HA-ports rule without a health probe: Azure keeps every backend node in rotation whatever its health",
      );
    }
  }
  const rule: AzureRule = {
    name,
    properties: { ...props.value, ...(probe ? { probe: w.ref(probe.name) } : {}) },
  };
  return { ok: true, value: { probes: probe ? [probe] : [], rules: [rule] } };
}

/** 4. one rule per port, each with its own probe, the fallback probe or none. */
function portRules(w: FamilyWalk): Outcome<FamilyResult> {
  const { service, options, scope, notes } = w;
  const { probe: slotProbe, shared } = w.slot;
  const probes: AzureProbe[] = [];
  const rules: AzureRule[] = [];
  let slotAdded = false;
  const standardInternal = options.sku === "Standard" && isInternal(service);
  for (const port of service.spec.ports) {
    const label = `port ${port.port}/${port.protocol}`;
    if (flagOn(service, portFlagKey(port.port, "no_lb_rule"))) {
      notes.explain.push(`${label}: ${portFlagKey(port.port, "no_lb_rule")} is true: no rule and no probe`);
      continue;
    }
    if (port.protocol === "SCTP" && !standardInternal)
      return {
        ok: false,
        failure: {
          code: "sctp_unsupported",
          message: `${label}: SCTP works only on an internal load balancer (${AZURE_ANNOTATIONS.internal}: "true") of the Standard SKU; this one is ${isInternal(service) ? "internal" : "external"} on ${options.sku}`,
        },
      };
    const props = portRuleProperties(w.ctx, port);
    if (!props.ok) return props;
    const name = ruleName(scope, port.protocol, port.port);
    const p = props.value;
    notes.explain.push(
      `${label}: rule ${name}, ${p.protocol} ${p.frontendPort} → backend port ${p.backendPort}` +
        (p.enableFloatingIP
          ? " (floating IP: the service port)"
          : isInternal(service) && scope.family === "IPv6"
            ? " (nodePort: an internal load balancer cannot float IPv6 addresses)"
            : ` (nodePort: ${AZURE_ANNOTATIONS.disableFloatingIp})`),
    );
    if (!p.enableFloatingIP && p.backendPort === 0)
      notes.warn.push(`${label}: floating IP is off and the port has no nodePort: the backend port is 0`);
    if (flagOn(service, portFlagKey(port.port, "no_probe_rule"))) {
      notes.explain.push(
        `${label}: ${portFlagKey(port.port, "no_probe_rule")} is true: the rule has no probe`,
      );
      rules.push({ name, properties: p });
      continue;
    }
    const built = portProbe(
      service,
      port,
      name,
      { sku: options.sku, nodeEndpoint: slotProbe !== null, shared },
      notes,
    );
    if (!built.ok) return built;
    let probeName: string | undefined;
    if (built.value !== null) {
      probes.push(built.value);
      probeName = built.value.name;
      if (slotProbe !== null && !shared)
        notes.explain.push(
          `${label}: its own probe, because ${`service.beta.kubernetes.io/port_${port.port}_health-probe_port`} overrides the /healthz probe`,
        );
    } else if (slotProbe !== null) {
      probeName = slotProbe.name;
      if (!slotAdded) probes.push(slotProbe);
      slotAdded = true;
      notes.explain.push(
        `${label}: uses ${shared ? "the shared probe" : "the /healthz probe"} ${slotProbe.name}`,
      );
    } else {
      notes.explain.push(`${label}: no probe`);
      notes.warn.push(
        `${label}: the rule has no health probe, so Azure sends to every node whatever its health (externalTrafficPolicy Local or the shared probe mode would give it one)`,
      );
    }
    rules.push({
      name,
      properties: { ...p, ...(probeName === undefined ? {} : { probe: w.ref(probeName) }) },
    });
  }
  return { ok: true, value: { probes, rules } };
}
