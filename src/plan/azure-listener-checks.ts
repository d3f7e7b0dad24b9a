/**
 * Services written for AKS keep working: their Azure per-port probe annotations
 * (`service.beta.kubernetes.io/port_<p>_health-probe_*` and the global
 * `azure-load-balancer-health-probe-*`, cloud-provider-azure
 * `pkg/provider/azure_loadbalancer_healthprobe.go`) become per-listener health checks, read by the Azure
 * provider's own `azureListenerProbes`, so both views agree.
 *
 * passlb's rules on top: only under externalTrafficPolicy Cluster (under Local the
 * healthCheckNodePort check gates every listener, as docs/plan.md "The rules" says — AKS
 * since 2023 lets a port that sets health-probe_port keep its own probe; we don't);
 * a listener Azure would leave without a probe (UDP, SCTP, no_probe_rule, a broken
 * annotation) falls back to the node's kube-proxy check rather than being trusted blindly;
 * `port_<p>_no_lb_rule` drops the listener. Azure probes have no timeout of their own; we
 * use min(interval, 5 s).
 */
import type { Service } from "../k8s/objects.ts";
import { azureListenerProbes } from "../providers/azure/azure-probe-annotations.ts";
import type { HealthCheck, Listener, PlanIssue } from "./load-balancer-plan.ts";

const PREFIX = "service.beta.kubernetes.io/";
const PER_PORT = /^service\.beta\.kubernetes\.io\/port_(\d+)_(health-probe_|no_lb_rule$|no_probe_rule$)/;
const GLOBAL = /^service\.beta\.kubernetes\.io\/azure-load-balancer-health-probe-/;

export function hasAzureProbeAnnotations(svc: Service): boolean {
  return Object.keys(svc.metadata.annotations ?? {}).some((k) => PER_PORT.test(k) || GLOBAL.test(k));
}

/** Listeners whose `port_<p>_no_lb_rule` is true (any case), which Azure leaves off the LB. */
export function noLbRulePorts(svc: Service): Set<number> {
  const out = new Set<number>();
  for (const [k, v] of Object.entries(svc.metadata.annotations ?? {})) {
    const m = PER_PORT.exec(k);
    if (m && m[2] === "no_lb_rule" && v.toLowerCase() === "true") out.add(Number(m[1]));
  }
  return out;
}

export interface AzureChecks {
  /** checks for the listeners that have an Azure probe */
  readonly checks: HealthCheck[];
  /** listener keys that fall back to the default node check */
  readonly fallback: string[];
  readonly issues: Omit<PlanIssue, "subject">[];
}

export function azureListenerChecks(svc: Service, listeners: readonly Listener[]): AzureChecks {
  const { listeners: probes, errors } = azureListenerProbes({
    ...svc,
    spec: { ...svc.spec, externalTrafficPolicy: "Cluster" },
  });
  const issues: Omit<PlanIssue, "subject">[] = errors.map((e) => ({
    code: "azure_probe_annotation_invalid",
    severity: "error" as const,
    message: `${e.message.includes(e.annotation) ? e.message : `${e.annotation}: ${e.message}`} — AKS would reject the Service; passlb checks the listener with the node's kube-proxy health instead`,
  }));
  const byProbe = new Map<string, HealthCheck>();
  const fallback: string[] = [];
  for (const l of listeners) {
    const key = `${l.protocol}/${l.port}`;
    const p = probes.get(key);
    if (!p) {
      fallback.push(key);
      continue;
    }
    const id = `azure-${p.protocol}-${p.port}${p.path ?? ""}-${p.intervalSeconds}x${p.threshold}`;
    const existing = byProbe.get(id);
    if (existing) {
      byProbe.set(id, { ...existing, listeners: [...existing.listeners, key] });
      continue;
    }
    byProbe.set(id, {
      id: `azure-${p.protocol}-${p.port}`,
      protocol: p.protocol,
      port: p.port,
      path: p.path,
      intervalSeconds: p.intervalSeconds,
      timeoutSeconds: Math.min(5, p.intervalSeconds),
      healthyThreshold: 1,
      unhealthyThreshold: p.threshold,
      listeners: [key],
      readsWeight: false,
      origin: `Azure probe annotations (${PREFIX}port_${l.port}_health-probe_* / azure-load-balancer-health-probe-*), as AKS builds it`,
    });
  }
  return { checks: [...byProbe.values()], fallback, issues };
}
