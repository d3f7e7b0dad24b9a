/**
 * `planGke`: for every LoadBalancer Service in a Snapshot, what GKE would build — the
 * controller and path (gke-controller-choice), the members (gke-members), health check,
 * backend service, forwarding rules and firewalls — plus the Events, conditions, findings
 * and the decision path in sentences (docs/providers-gke.md). Pure: the same input gives the
 * same plan. EndpointSlices are taken as given (no slices are derived from Pods here).
 */
import { slicesByService } from "../../endpoints/merge.ts";
import type { EndpointSlice, Service } from "../../k8s/objects.ts";
import { objectKey, type Snapshot } from "../../k8s/snapshot.ts";
import { planBackendService } from "./gke-backend-service.ts";
import { type GkeContext, gkeContext } from "./gke-context.ts";
import { type ControllerChoice, chooseController } from "./gke-controller-choice.ts";
import { syncEvents } from "./gke-events.ts";
import { planFirewalls } from "./gke-firewalls.ts";
import { planForwardingRules } from "./gke-forwarding-rules.ts";
import { planHealthCheck } from "./gke-health-check.ts";
import { planMembers } from "./gke-members.ts";
import type { GkeEvent, GkeFinding, GkeOptions, GkeServicePlan } from "./gke-types.ts";

const BACKEND_TYPE = {
  none: null,
  "target-pool": "TARGET_POOL",
  "ccm-ilb": "INSTANCE_GROUP",
  "rbs-instance-groups": "INSTANCE_GROUP",
  "rbs-neg": "GCE_VM_IP_NEG",
  "subsetting-ilb": "GCE_VM_IP_NEG",
} as const;

export function planGke(snapshot: Snapshot, options: GkeOptions): GkeServicePlan[] {
  const kubeSystem = snapshot.namespaces.find((n) => n.metadata.name === "kube-system");
  const kubeSystemUid = kubeSystem?.metadata.uid ?? "";
  const slices = slicesByService(snapshot.endpointSlices);
  return snapshot.services
    .filter((s) => s.spec.type === "LoadBalancer")
    .map((service) => planService(service, snapshot, slices.get(key(service)) ?? [], options, kubeSystemUid))
    .sort((a, b) => (a.service < b.service ? -1 : a.service > b.service ? 1 : 0));
}

const key = (s: Service) => objectKey(s.metadata);

function planService(
  service: Service,
  snapshot: Snapshot,
  slices: readonly EndpointSlice[],
  options: GkeOptions,
  kubeSystemUid: string,
): GkeServicePlan {
  const subject = key(service);
  const choice = chooseController(service, options);
  const { context: ctx, findings: ctxFindings } = gkeContext(service, choice, options, kubeSystemUid);
  const findings: GkeFinding[] = [...choice.findings, ...ctxFindings];
  const explanation: string[] = [...choice.steps];
  const events = [...choice.events];
  const conditions: { type: string; status: string; reason: string }[] = [];
  findings.push(...uidFindings(service, choice, kubeSystemUid));
  const provisioned =
    choice.path !== "none" &&
    !mixedProtocolRejected(ctx, choice, { events, conditions, findings, explanation });
  if (!provisioned) return emptyPlan(subject, choice, events, conditions, findings, explanation, service);

  const clusterUid = kubeSystemUid;
  const members = planMembers(choice, service, snapshot.nodes, slices, options, {
    neg: ctx.l4.backend,
    instanceGroup: `k8s-ig--${clusterUid}`,
  });
  explanation.push(...members.steps);
  const healthCheck = planHealthCheck(choice.path, service, {
    clusterId: ctx.clusterId,
    legacy: ctx.legacy,
    sharedL4: ctx.l4.sharedHealthCheck,
    backend: ctx.l4.backend,
  });
  if (healthCheck)
    explanation.push(
      `Health check ${healthCheck.name}: ${healthCheck.scope.toLowerCase()} ${healthCheck.resource}, HTTP ${healthCheck.requestPath} on ${healthCheck.port} (${healthCheck.shared ? "kube-proxy, eTP Cluster" : "healthCheckNodePort, eTP Local"}), every ${healthCheck.checkIntervalSec}s, unhealthy after ${healthCheck.unhealthyThreshold} (§4).`,
    );
  if (service.spec.externalTrafficPolicy === "Local" && !service.spec.healthCheckNodePort)
    findings.push({
      code: "gke_health_check_node_port_unknown",
      severity: "info",
      subject,
      message:
        "eTP Local but spec.healthCheckNodePort is not set in the manifest: the API server allocates it; shown as 0.",
    });

  const groups =
    choice.path === "target-pool"
      ? []
      : members.negs.length > 0
        ? members.negs.filter((n) => n.linked).map((n) => `zones/${n.zone}/networkEndpointGroups/${n.name}`)
        : members.instanceGroups.map((g) => `zones/${g.zone}/instanceGroups/${g.name}`);
  const bs = planBackendService(ctx, healthCheck?.name ?? "", groups);
  events.push(...bs.events);
  findings.push(...bs.findings);
  explanation.push(...bs.steps);
  const fr = planForwardingRules(ctx, bs.backendService?.name ?? null);
  findings.push(...fr.findings);
  explanation.push(...fr.steps);
  const firewalls = planFirewalls(ctx, fr.families, healthCheck, findings, explanation);
  const targetPool =
    choice.path === "target-pool"
      ? {
          name: ctx.legacy,
          sessionAffinity:
            service.spec.sessionAffinity === "ClientIP" ? ("CLIENT_IP" as const) : ("NONE" as const),
          healthChecks: healthCheck ? [healthCheck.name] : [],
          instances: members.targetPoolInstances,
        }
      : null;
  const outcome = syncEvents(
    ctx,
    members.memberCount,
    snapshot,
    slices,
    fr.families,
    findings,
    healthCheck?.port,
  );
  events.push(...outcome.events);
  findings.push(...outcome.findings);

  return {
    service: subject,
    provisioned: true,
    path: choice.path,
    scheme: choice.scheme,
    frontend: choice.path === "target-pool" ? "TARGET_POOL" : "BACKEND_SERVICE",
    backendType: BACKEND_TYPE[choice.path],
    finalizer: choice.finalizer,
    forwardingRules: fr.rules,
    backendService: bs.backendService,
    targetPool,
    networkEndpointGroups: members.negs,
    instanceGroups: members.instanceGroups,
    healthCheck,
    firewalls,
    nodes: members.nodes,
    events,
    conditions,
    findings,
    explanation,
  };
}

/** Names that embed a UID the input lacks are computed from an empty one; say so. */
function uidFindings(service: Service, choice: ControllerChoice, kubeSystemUid: string): GkeFinding[] {
  const subject = key(service);
  const findings: GkeFinding[] = [];
  if (!kubeSystemUid && choice.path !== "none")
    findings.push({
      code: "gke_cluster_uid_missing",
      severity: "warning",
      subject,
      message:
        "No kube-system Namespace with a uid in the input: names that embed the cluster UID are computed from an empty UID.",
    });
  if (
    !service.metadata.uid &&
    (choice.path === "target-pool" || choice.path === "ccm-ilb" || choice.path.startsWith("rbs"))
  )
    findings.push({
      code: "gke_service_uid_missing",
      severity: "warning",
      subject,
      message: "The Service has no metadata.uid: the a<uid> names cannot be derived and show as just 'a'.",
    });
  return findings;
}

/** The CCM rejects TCP+UDP on new target-pool and instance-group ILB Services (§9); true when it does. */
function mixedProtocolRejected(
  ctx: GkeContext,
  choice: ControllerChoice,
  out: {
    events: GkeEvent[];
    conditions: { type: string; status: string; reason: string }[];
    findings: GkeFinding[];
    explanation: string[];
  },
): boolean {
  if (ctx.ig || ctx.protocols.length <= 1) return false;
  if (choice.existing) {
    out.explanation.push("TCP+UDP on an existing CCM load balancer: the update goes ahead.");
    return false;
  }
  out.events.push({
    type: "Warning",
    reason: "LoadBalancerMixedProtocolNotSupported",
    message: "LoadBalancer with multiple protocols are not supported.",
  });
  out.conditions.push({
    type: "LoadBalancerPortsError",
    status: "True",
    reason: "LoadBalancerMixedProtocolNotSupported",
  });
  out.findings.push({
    code: "gke_mixed_protocol_rejected",
    severity: "error",
    subject: key(ctx.service),
    message: `The ${choice.path === "target-pool" ? "target-pool NetLB" : "instance-group ILB"} cannot mix TCP and UDP; nothing is created.`,
  });
  return true;
}

function emptyPlan(
  service: string,
  choice: ReturnType<typeof chooseController>,
  events: GkeServicePlan["events"],
  conditions: GkeServicePlan["conditions"],
  findings: GkeFinding[],
  explanation: string[],
  svc: Service,
): GkeServicePlan {
  if (choice.path === "none")
    findings.push({
      code: "gke_not_provisioned",
      severity: "warning",
      subject: service,
      message: `No GKE controller builds a load balancer for this Service${svc.spec.loadBalancerClass ? ` (class ${svc.spec.loadBalancerClass})` : ""}.`,
    });
  return {
    service,
    provisioned: false,
    path: choice.path,
    scheme: choice.scheme,
    frontend: null,
    backendType: null,
    finalizer: null,
    forwardingRules: [],
    backendService: null,
    targetPool: null,
    networkEndpointGroups: [],
    instanceGroups: [],
    healthCheck: null,
    firewalls: {},
    nodes: [],
    events,
    conditions,
    findings,
    explanation,
  };
}
