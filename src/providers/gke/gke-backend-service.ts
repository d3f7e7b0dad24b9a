/**
 * The regional backend service of the subsetting ILB, RBS NetLB and CCM ILB paths
 * (docs/providers-gke.md): protocol, session affinity, connection draining, weighted locality
 * policy and zonal affinity, with the Events and findings each choice raises.
 * Sources: ingress-gce backends.go EnsureL4BackendService, determineBackendServiceLocalityPolicy,
 * requireZonalAffinity; cloud-provider-gcp makeBackendServiceName.
 * Strong session affinity (NetLB, allowlisted projects) is checked as ingress-gce's
 * checkStrongSessionAffinityRequirements does; whether GCE accepts it is not known offline.
 */
import { createHash } from "node:crypto";
import type { GkeContext } from "./gke-context.ts";
import type { BackendService, GkeEvent, GkeFinding } from "./gke-types.ts";

export const WEIGHTED_ANNOTATION = "networking.gke.io/weighted-load-balancing";
const BACKEND_SHARE = [
  "alpha.cloud.google.com/load-balancer-backend-share",
  "cloud.google.com/load-balancer-backend-share",
];

export interface BackendServiceResult {
  readonly backendService: BackendService | null;
  readonly events: GkeEvent[];
  readonly findings: GkeFinding[];
  readonly steps: string[];
}

/** In steps: target pools (warnings only) → name and protocol → locality policy (weighting)
 * → zonal affinity → strong session affinity → assemble. */
export function planBackendService(
  ctx: GkeContext,
  healthCheck: string,
  groups: readonly string[],
): BackendServiceResult {
  const { service, choice } = ctx;
  const out: Found = { events: [], findings: [], steps: [] };
  const weightedValue = service.metadata.annotations?.[WEIGHTED_ANNOTATION];
  const zonalAsked =
    service.spec.trafficDistribution === "PreferClose" ||
    service.spec.trafficDistribution === "PreferSameZone";

  if (choice.path === "target-pool" || choice.path === "none") {
    if (weightedValue !== undefined && choice.path === "target-pool")
      warn(
        ctx,
        out,
        "gke_weighted_ignored",
        `${WEIGHTED_ANNOTATION} is silently ignored: target pools have no weighted load balancing (§5).`,
      );
    if (zonalAsked && choice.path === "target-pool")
      warn(
        ctx,
        out,
        "gke_zonal_affinity_unavailable",
        "trafficDistribution asks for zone affinity, but only the subsetting ILB path has it (§5).",
      );
    return { backendService: null, ...out };
  }

  const protocol = ctx.mixed ? "UNSPECIFIED" : (ctx.protocols[0] ?? "TCP");
  const affinity = service.spec.sessionAffinity ?? "None";
  const sessionAffinity = affinity === "ClientIP" ? "CLIENT_IP" : "NONE";
  const draining = protocol === "UDP" ? 0 : 30;
  const name = backendServiceName(ctx, affinity, out);
  const localityLbPolicy = localityPolicy(ctx, weightedValue, out);
  const networkPassThroughLbTrafficPolicy = zonalTrafficPolicy(ctx, zonalAsked, out);
  const connectionTrackingPolicy = strongAffinity(ctx, out.findings, out.steps);

  const backendService: BackendService = {
    name,
    scope: "REGIONAL",
    loadBalancingScheme: ctx.external ? "EXTERNAL" : "INTERNAL",
    protocol,
    sessionAffinity,
    ...(localityLbPolicy ? { localityLbPolicy } : {}),
    connectionDraining: { drainingTimeoutSec: draining },
    ...(networkPassThroughLbTrafficPolicy ? { networkPassThroughLbTrafficPolicy } : {}),
    ...(connectionTrackingPolicy ? { connectionTrackingPolicy } : {}),
    healthChecks: [healthCheck],
    backends: groups.map((group) => ({ group, balancingMode: "CONNECTION" as const })),
  };
  return { backendService, ...out };
}

/** What the steps of planBackendService append to. */
interface Found {
  readonly events: GkeEvent[];
  readonly findings: GkeFinding[];
  readonly steps: string[];
}

function warn(ctx: GkeContext, out: Found, code: string, message: string): void {
  out.findings.push({ code, severity: "warning", subject: ctx.subject, message });
}

/** The path's name, or the CCM's shared ILB backend service (load-balancer-backend-share, eTP Cluster). */
function backendServiceName(ctx: GkeContext, affinity: string, out: Found): string {
  const { service, choice } = ctx;
  const sharing = BACKEND_SHARE.some((a) => service.metadata.annotations?.[a] === "true");
  if (choice.path === "ccm-ilb" && sharing && service.spec.externalTrafficPolicy !== "Local") {
    const hash = createHash("sha1").update(affinity).digest("hex").slice(0, 16);
    out.steps.push(
      "load-balancer-backend-share with eTP Cluster: the CCM shares one backend service per protocol and affinity.",
    );
    return `k8s-${ctx.clusterId}-internal-${(ctx.protocols[0] ?? "TCP").toLowerCase()}-nmv1-${hash}`;
  }
  return ctx.ig ? ctx.l4.backend : ctx.legacy;
}

/** localityLbPolicy from the weighted-load-balancing annotation and the path's flags. */
function localityPolicy(
  ctx: GkeContext,
  weightedValue: string | undefined,
  out: Found,
): BackendService["localityLbPolicy"] {
  const { choice, options, subject } = ctx;
  const local = ctx.service.spec.externalTrafficPolicy === "Local";
  const exact = weightedValue === "pods-per-node";
  if (choice.path === "ccm-ilb") {
    if (weightedValue !== undefined)
      warn(
        ctx,
        out,
        "gke_weighted_ignored",
        `${WEIGHTED_ANNOTATION} is silently ignored on the CCM's instance-group ILB (§5).`,
      );
    return undefined;
  }
  if (ctx.external) {
    if (!options.flags["enable-weighted-l4-netlb"]) {
      if (weightedValue !== undefined)
        warn(
          ctx,
          out,
          "gke_weighted_ignored",
          `${WEIGHTED_ANNOTATION} has no effect: weighted NetLB needs GKE 1.31.0-gke.1506000+ (enable-weighted-l4-netlb).`,
        );
      return undefined;
    }
    const policy = exact && local ? "WEIGHTED_MAGLEV" : "MAGLEV";
    if (exact && !local) unsupportedWeighted(out.events, out.findings, subject);
    else if (weightedValue !== undefined && !exact)
      warn(
        ctx,
        out,
        "gke_weighted_ignored",
        `${WEIGHTED_ANNOTATION}: "${weightedValue}" is not "pods-per-node": plain MAGLEV.`,
      );
    if (policy === "WEIGHTED_MAGLEV")
      out.steps.push(
        "pods-per-node with eTP Local: WEIGHTED_MAGLEV; each node's weight is its X-Load-Balancing-Endpoint-Weight.",
      );
    return policy;
  }
  if (!options.flags["enable-weighted-l4-ilb"]) {
    if (weightedValue !== undefined)
      warn(
        ctx,
        out,
        "gke_weighted_ignored",
        `${WEIGHTED_ANNOTATION} has no effect: weighted ILB (enable-weighted-l4-ilb) is off.`,
      );
    return undefined;
  }
  if (exact && local) {
    out.findings.push({
      code: "gke_weighted_ilb_allowlisting",
      severity: "info",
      subject,
      message:
        "Weighted ILB needs project allowlisting; without it the sync fails with Warning AllowlistingRequired.",
    });
    return "WEIGHTED_GCP_RENDEZVOUS";
  }
  if (exact) unsupportedWeighted(out.events, out.findings, subject);
  return undefined;
}

/** Zonal affinity (NEG paths only; the subsetting ILB with its flag), warned when asked and unavailable. */
function zonalTrafficPolicy(
  ctx: GkeContext,
  zonalAsked: boolean,
  out: Found,
): BackendService["networkPassThroughLbTrafficPolicy"] {
  const { choice, options, service } = ctx;
  let policy: BackendService["networkPassThroughLbTrafficPolicy"];
  if (ctx.ig) {
    const zonal =
      choice.path === "subsetting-ilb" && options.flags["enable-l4ilb-zonal-affinity"] && zonalAsked;
    policy = {
      zonalAffinity: {
        spillover: zonal ? "ZONAL_AFFINITY_SPILL_CROSS_ZONE" : "ZONAL_AFFINITY_DISABLED",
        spilloverRatio: 0,
      },
    };
    if (zonal)
      out.steps.push(
        `trafficDistribution ${service.spec.trafficDistribution}: zonal affinity, spill over cross-zone at ratio 0.`,
      );
  }
  if (zonalAsked && policy?.zonalAffinity.spillover !== "ZONAL_AFFINITY_SPILL_CROSS_ZONE")
    warn(
      ctx,
      out,
      "gke_zonal_affinity_unavailable",
      choice.path === "subsetting-ilb"
        ? "trafficDistribution asks for zone affinity, but enable-l4ilb-zonal-affinity is off (GKE 1.33.3-gke.1392000+)."
        : "trafficDistribution asks for zone affinity, but only the subsetting ILB path (NEG) has it (§5).",
    );
  return policy;
}

function unsupportedWeighted(events: GkeEvent[], findings: GkeFinding[], subject: string): void {
  events.push({
    type: "Warning",
    reason: "UnsupportedConfiguration",
    message: "Weighted load balancing by pods-per-node has no effect with External Traffic Policy: Cluster.",
  });
  findings.push({
    code: "gke_weighted_ignored",
    severity: "warning",
    subject,
    message: "pods-per-node weighting needs externalTrafficPolicy: Local; with Cluster it does nothing.",
  });
}

export const STRONG_AFFINITY_ANNOTATION = "networking.gke.io/l4-strong-session-affinity";

/** RBS NetLB strong session affinity (ingress-gce `checkStrongSessionAffinityRequirements`): ClientIP with a timeout in [60, 57600]. */
function strongAffinity(
  ctx: GkeContext,
  findings: GkeFinding[],
  steps: string[],
): BackendService["connectionTrackingPolicy"] {
  const { service, options, subject } = ctx;
  if (service.metadata.annotations?.[STRONG_AFFINITY_ANNOTATION] !== "enabled") return undefined;
  if (!ctx.external || !ctx.ig || !options.flags["enable-l4lb-strong-sa"]) {
    findings.push({
      code: "gke_strong_affinity_ignored",
      severity: "warning",
      subject,
      message: `${STRONG_AFFINITY_ANNOTATION} needs a backend-service NetLB and enable-l4lb-strong-sa (allowlisted projects); ignored here.`,
    });
    return undefined;
  }
  const timeout = service.spec.sessionAffinityConfig?.clientIP?.timeoutSeconds;
  if (
    service.spec.sessionAffinity !== "ClientIP" ||
    timeout === undefined ||
    timeout < 60 ||
    timeout > 57600
  ) {
    findings.push({
      code: "gke_strong_affinity_invalid",
      severity: "error",
      subject,
      message:
        "Strong session affinity needs sessionAffinity: ClientIP and sessionAffinityConfig.clientIP.timeoutSeconds between 60 and 57600.",
    });
    return undefined;
  }
  steps.push(
    `Strong session affinity: PER_SESSION tracking, idle timeout ${timeout}s; GCE accepts it for allowlisted projects only.`,
  );
  return { trackingMode: "PER_SESSION", enableStrongAffinity: true, idleTimeoutSec: timeout };
}
