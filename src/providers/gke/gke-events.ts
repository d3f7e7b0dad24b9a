/**
 * The outcome Events of one sync and the troubleshooting findings a user should act on
 * (docs/providers-gke.md; the GKE page's health-check troubleshooting list): success or failure
 * with the reasons each controller uses — the service controller's Ensuring/Ensured/
 * SyncLoadBalancerFailed/UnAvailableLoadBalancer for the CCM paths, ingress-gce's
 * SyncLoadBalancerSuccessful / Sync(External)LoadBalancerFailed for its own — and warnings for
 * eTP Local without ready pods, empty backends, and >250 ILB nodes without subsetting.
 * Decision events (class conflicts, finalizers, weighting) are raised where they are decided.
 */
import { endpointCountsByNode } from "../../endpoints/merge.ts";
import type { EndpointSlice } from "../../k8s/objects.ts";
import type { Snapshot } from "../../k8s/snapshot.ts";
import type { Family, GkeContext } from "./gke-context.ts";
import { HC_SOURCE_RANGE_V6_ILB, HC_SOURCE_RANGE_V6_NETLB, HC_SOURCE_RANGES_V4 } from "./gke-firewalls.ts";
import type { GkeEvent, GkeFinding } from "./gke-types.ts";

export function syncEvents(
  ctx: GkeContext,
  memberCount: number,
  snapshot: Snapshot,
  slices: readonly EndpointSlice[],
  families: readonly Family[],
  findings: readonly GkeFinding[],
  healthCheckPort: number | undefined,
): { events: GkeEvent[]; findings: GkeFinding[] } {
  const { choice, service, subject } = ctx;
  const events: GkeEvent[] = [];
  const out: GkeFinding[] = [];
  const warn = (code: string, message: string) => out.push({ code, severity: "warning", subject, message });
  const local = service.spec.externalTrafficPolicy === "Local";

  const { perNode } = endpointCountsByNode(slices);
  const readyNodes = [...perNode.values()].filter((c) => c.ready > 0).length;
  if (local && readyNodes === 0)
    warn(
      "gke_local_no_ready_endpoints",
      "eTP Local and no node hosts a ready, non-terminating endpoint: every backend fails the health check (0/N healthy).",
    );
  if (choice.path === "ccm-ilb" && memberCount > 250)
    warn(
      "gke_ilb_over_250_nodes_without_subsetting",
      `${memberCount} nodes back this ILB without GKE subsetting: an internal passthrough LB spreads packets over at most 250 backend VMs.`,
    );
  if (memberCount === 0 && !(local && readyNodes === 0))
    warn(
      "gke_no_backend_nodes",
      `No node qualifies as a backend on this path (${snapshot.nodes.length} node(s) in the input).`,
    );
  if (healthCheckPort !== undefined) {
    const v6 = families.includes("IPv6")
      ? ` and ${ctx.external ? HC_SOURCE_RANGE_V6_NETLB : HC_SOURCE_RANGE_V6_ILB}`
      : "";
    out.push({
      code: "gke_health_check_sources",
      severity: "info",
      subject,
      message: `Custom firewall rules or policies must let health probes from ${HC_SOURCE_RANGES_V4.join(", ")}${v6} reach tcp:${healthCheckPort} on the nodes, or every backend shows unhealthy.`,
    });
  }

  const errors = [...findings, ...out].filter((f) => f.severity === "error");
  if (choice.path === "target-pool" || choice.path === "ccm-ilb") {
    events.push({ type: "Normal", reason: "EnsuringLoadBalancer", message: "Ensuring load balancer" });
    if (memberCount === 0)
      events.push({
        type: "Warning",
        reason: "UnAvailableLoadBalancer",
        message: "There are no available nodes for LoadBalancer",
      });
    const failure =
      errors[0]?.message ??
      (choice.path === "target-pool" && memberCount === 0
        ? "cannot EnsureLoadBalancer() with no hosts"
        : undefined);
    events.push(
      failure
        ? {
            type: "Warning",
            reason: "SyncLoadBalancerFailed",
            message: `Error syncing load balancer: failed to ensure load balancer: ${failure}`,
          }
        : { type: "Normal", reason: "EnsuredLoadBalancer", message: "Ensured load balancer" },
    );
    if (failure && errors.length === 0)
      out.push({ code: "gke_target_pool_no_hosts", severity: "error", subject, message: failure });
    return { events, findings: out };
  }
  const first = errors[0];
  if (first)
    events.push({
      type: "Warning",
      reason: ctx.external ? "SyncExternalLoadBalancerFailed" : "SyncLoadBalancerFailed",
      message: `Error syncing load balancer: ${first.message}`,
    });
  else {
    const fams = families.length > 1 ? "IPv4 IPv6 " : families[0] === "IPv6" ? "IPv6 " : "";
    events.push({
      type: "Normal",
      reason: "SyncLoadBalancerSuccessful",
      message: ctx.external
        ? `Successfully ensured ${fams}L4 External LoadBalancer resources`
        : `Successfully ensured ${fams}load balancer resources`,
    });
  }
  return { events, findings: out };
}
