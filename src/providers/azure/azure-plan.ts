/**
 * `planAzure`: for every `type: LoadBalancer` Service, the health probes and
 * load-balancing rules cloud-provider-azure (AKS) would put on its load balancer, in
 * generation order, or the error with which it would refuse the Service. Follows
 * `reconcileLoadBalancer` → `getExpectedLBRules` (spec §1, §3): IPv4 then IPv6, the probe
 * source (node-endpoint, shared, per-port or none), then HA-ports or one rule per port.
 *
 * Deliberately not modelled: reconciling against an existing load balancer (spec §6),
 * frontend IP addresses, security groups, the ServiceGateway/PodIP path (§1.6).
 */
import { createHash } from "node:crypto";
import type { Service } from "../../k8s/objects.ts";
import { objectKey, type Snapshot } from "../../k8s/snapshot.ts";
import type { IpFamily } from "../../net/ip.ts";
import { AZURE_ANNOTATIONS, flagOn, isInternal, isInternalExact, portFlagKey } from "./azure-annotations.ts";
import type {
  AzureNotes,
  AzureOptions,
  AzureProbe,
  AzureRule,
  AzureServicePlan,
  Outcome,
} from "./azure-model.ts";
import {
  backendPoolId,
  frontendConfigId,
  loadBalancerName,
  type NameScope,
  probeId,
  ruleName,
  rulePrefix,
} from "./azure-names.ts";
import { describeTiming, nodeEndpointProbe, portProbe, probeTiming, sharedProbe } from "./azure-probes.ts";
import { haRuleProperties, portRuleProperties, type RuleContext } from "./azure-rules.ts";
import { serviceWarnings, usesHaPorts } from "./azure-warnings.ts";

export function planAzure(snapshot: Snapshot, options: AzureOptions): AzureServicePlan[] {
  return snapshot.services
    .filter((s) => s.spec.type === "LoadBalancer")
    .map((s) => ({ key: objectKey(s.metadata), s }))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0))
    .map(({ s }) => planAzureService(s, options));
}

/** A stable stand-in UID (UUID-shaped, from namespace/name) for manifests that carry none. */
export function placeholderUid(service: Service): string {
  const h = createHash("sha1")
    .update(`passlb-azure:${objectKey(service.metadata)}`)
    .digest("hex");
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

/** The families cloud-provider-azure reconciles, IPv4 first (spec §1.1). */
function families(service: Service): IpFamily[] {
  const given = service.spec.ipFamilies ?? [];
  if (given.length === 0) return ["IPv4"];
  return (["IPv4", "IPv6"] as const).filter((f) => given.includes(f));
}

const sameProbe = (a: AzureProbe, b: AzureProbe): boolean => JSON.stringify(a) === JSON.stringify(b);

export function planAzureService(service: Service, options: AzureOptions): AzureServicePlan {
  const key = objectKey(service.metadata);
  const lbName = loadBalancerName(service, options);
  const warn = serviceWarnings(service, options);
  const explain: string[] = [];
  const local = service.spec.externalTrafficPolicy === "Local";
  explain.push(
    `${key}: externalTrafficPolicy ${local ? "Local" : "Cluster"}, ${options.sku} SKU, probe mode ${options.probeMode}`,
  );
  explain.push(
    `load balancer ${lbName}` +
      (isInternalExact(service)
        ? " (internal)"
        : isInternal(service)
          ? ' (external: the internal annotation is not exactly "true", though other checks treat the Service as internal)'
          : "") +
      (options.loadBalancerName === undefined ? "" : " (name given by the options)"),
  );
  const uid = service.metadata.uid ?? placeholderUid(service);
  const prefix = rulePrefix(uid);
  explain.push(
    `rule prefix ${prefix}: "a" + ${service.metadata.uid === undefined ? "placeholder " : ""}UID ${uid} without dashes, cut to 32 characters`,
  );
  const fams = families(service);
  const dualStack = fams.length === 2;
  const probes: AzureProbe[] = [];
  const rules: AzureRule[] = [];
  const base = { service: key, sku: options.sku, loadBalancer: lbName };
  for (const family of fams) {
    const notes: AzureNotes = { explain: [], warn };
    const scope: NameScope = { service, prefix, family, dualStack };
    const result = expectedForFamily(service, options, scope, lbName, notes);
    const tag = dualStack ? `[${family}${family === "IPv6" ? ", names end in -IPv6" : ""}] ` : "";
    explain.push(...notes.explain.map((l) => tag + l));
    if (!result.ok) {
      explain.push(
        `cloud-provider-azure stops here and updates nothing for this Service: ${result.failure.message}`,
      );
      return { ...base, error: result.failure, warnings: unique(warn), explanation: explain };
    }
    for (const p of result.value.probes) if (!probes.some((q) => sameProbe(p, q))) probes.push(p);
    rules.push(...result.value.rules);
  }
  return { ...base, probes, loadBalancingRules: rules, warnings: unique(warn), explanation: explain };
}

const unique = (lines: string[]): string[] => [...new Set(lines)];

interface FamilyResult {
  readonly probes: AzureProbe[];
  readonly rules: AzureRule[];
}

/** `getExpectedLBRules` for one IP family (spec §3). */
function expectedForFamily(
  service: Service,
  options: AzureOptions,
  scope: NameScope,
  lbName: string,
  notes: AzureNotes,
): Outcome<FamilyResult> {
  const local = service.spec.externalTrafficPolicy === "Local";
  const plsProxy =
    flagOn(service, AZURE_ANNOTATIONS.plsCreate) && flagOn(service, AZURE_ANNOTATIONS.plsProxyProtocol);
  const ref = (name: string) => ({ id: probeId(options, lbName, name) });

  // 1. the node-endpoint probe, computed (and validated) whether or not a rule uses it
  let slotProbe: AzureProbe | null = null;
  let shared = false;
  if (local && !plsProxy) {
    const hcnp = service.spec.healthCheckNodePort ?? 0;
    const built = nodeEndpointProbe(service, ruleName(scope, "TCP", hcnp));
    if (!built.ok) {
      notes.explain.push(
        `externalTrafficPolicy Local: the /healthz probe on healthCheckNodePort ${hcnp} is built first, whether or not a rule will use it, and its timing is invalid`,
      );
      return built;
    }
    slotProbe = built.value;
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
  // 2. the shared probe replaces it for non-Local Services in shared mode
  if (options.probeMode === "shared" && !local) {
    slotProbe = sharedProbe(options);
    shared = true;
    notes.explain.push(
      `shared probe mode: every rule, UDP included, uses ${slotProbe.name} (Http ${options.sharedProbePath} on port ${options.sharedProbePort}, every 5s, threshold 2); no probe annotation is read`,
    );
  }

  const ctx: RuleContext = {
    service,
    options,
    family: scope.family,
    frontendConfigId: frontendConfigId(options, lbName, scope),
    backendPoolId: backendPoolId(options, lbName, scope.family),
  };
  const ports = service.spec.ports;

  // 3. HA ports: one rule for everything
  if (usesHaPorts(service, options)) {
    const first = ports[0];
    if (first === undefined) return { ok: true, value: { probes: [], rules: [] } };
    const name = ruleName(scope, first.protocol, first.port);
    const props = haRuleProperties(ctx);
    if (!props.ok) return props;
    notes.explain.push(
      `HA ports (internal, Standard, ${AZURE_ANNOTATIONS.haPorts}): one rule ${name} for all protocols and ports, named after spec.ports[0]`,
    );
    let probe = slotProbe;
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
      properties: { ...props.value, ...(probe ? { probe: ref(probe.name) } : {}) },
    };
    return { ok: true, value: { probes: probe ? [probe] : [], rules: [rule] } };
  }

  // 4. one rule per port
  const probes: AzureProbe[] = [];
  const rules: AzureRule[] = [];
  let slotAdded = false;
  const standardInternal = options.sku === "Standard" && isInternal(service);
  for (const port of ports) {
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
    const props = portRuleProperties(ctx, port);
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
    rules.push({ name, properties: { ...p, ...(probeName === undefined ? {} : { probe: ref(probeName) }) } });
  }
  return { ok: true, value: { probes, rules } };
}
