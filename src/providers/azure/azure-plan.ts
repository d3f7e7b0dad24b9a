/**
 * `planAzure`: for every `type: LoadBalancer` Service, the health probes and
 * load-balancing rules cloud-provider-azure (AKS) would put on its load balancer, in
 * generation order, or the error with which it would refuse the Service. Follows
 * `reconcileLoadBalancer` → `getExpectedLBRules` (spec §1, §3): IPv4 then IPv6, the probe
 * source (node-endpoint, shared, per-port or none), then HA-ports or one rule per port.
 *
 * Deliberately not modelled: reconciling against an existing load balancer (`reconcileLBProbes`, `reconcileLBRules`),
 * frontend IP addresses, security groups, the ServiceGateway/PodIP path (§1.6).
 */
import { createHash } from "node:crypto";
import type { Service } from "../../k8s/objects.ts";
import { objectKey, type Snapshot } from "../../k8s/snapshot.ts";
import type { IpFamily } from "../../net/ip.ts";
import { isInternal, isInternalExact } from "./azure-annotations.ts";
import { expectedForFamily } from "./azure-family-rules.ts";
import type { AzureNotes, AzureOptions, AzureProbe, AzureRule, AzureServicePlan } from "./azure-model.ts";
import { loadBalancerName, type NameScope, rulePrefix } from "./azure-names.ts";
import { serviceWarnings } from "./azure-warnings.ts";

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

/** The families cloud-provider-azure reconciles, IPv4 first (`reconcileLoadBalancer`). */
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
