/**
 * The tunnel check's probe targets (`passlb lb --forward encap --encap-check`, issue 21;
 * the kernel side is lb-host/routing/encap-check.ts). Pure: the node probe targets and which
 * addresses the LB host encapsulates to in, one extra target per such address out.
 *
 * - One target per routed node address and port that a plain target probes there: a TCP
 *   connect (`via: "tunnel"`) to the same port — kube-proxy's `:10256`, a Local Service's
 *   `healthCheckNodePort` — so it proves exactly what the plain target proves, but through
 *   the tunnel. TCP, not the check's HTTP: a Local node without endpoints answers 503 there
 *   (ingress-gce pkg/l4/healthchecks) while its tunnel works; the connect alone proves LB host →
 *   tunnel → decap → node's listener. Per port, not one per node: a listener that fails
 *   outside the tunnel too (an IPv4-only `:10256`, say) then fails only the users its plain
 *   target already fails, never those of another port that works.
 * - It gates the (Service, check, node) users of those plain targets (HTTP and TCP checks
 *   of one port share it), so a broken tunnel takes the node out of every Service that
 *   probes it there, as an unhealthy node (ProberHealth's lookup folds the worst state over
 *   a user's targets).
 * - Its timing is the strictest of those targets' (shortest interval and timeout, lowest
 *   unhealthy and highest healthy threshold, as probeTargets merges shared targets): a
 *   broken tunnel takes a node out within every gated check's own bound, interval ×
 *   unhealthy threshold + timeout.
 * - Cost: one more TCP probe per routed (address, port) per interval — with one Local
 *   Service per port, as many as the plain targets of the routed nodes.
 *
 * Not here: the socket (probe-once.ts with a local port from the check's range), the route
 * (lb-host/routing/encap-check.ts), which addresses are routed (lb-host/routing/encap.ts nodePath).
 */
import { joinHostPort } from "../net/ip.ts";
import type { ProbeTarget, TargetUser } from "./state-probe-targets.ts";

/** the reason a node is out because its tunnel check failed (events, dashboard, metrics) */
export const TUNNEL_CHECK_FAILED = "tunnel_check_failed";

export function tunnelTargetKey(address: string, port: number): string {
  return `TCP ${joinHostPort(address, port)} via tunnel`;
}

/** One tunnel target per (address, port) of the plain targets whose address `routed`
 * accepts, sorted by key. */
export function tunnelTargets(
  targets: readonly ProbeTarget[],
  routed: (address: string) => boolean,
): ProbeTarget[] {
  const byKey = new Map<string, ProbeTarget[]>();
  for (const t of targets) {
    if (t.via === "tunnel" || !routed(t.address)) continue;
    const key = tunnelTargetKey(t.address, t.port);
    const list = byKey.get(key);
    if (list) list.push(t);
    else byKey.set(key, [t]);
  }
  const out: ProbeTarget[] = [];
  for (const [key, list] of byKey) {
    const { address, port } = list[0]!;
    const users = new Map<string, TargetUser>();
    for (const t of list)
      for (const u of t.users) users.set(`${u.service}\u0000${u.check}\u0000${u.node}`, u);
    const intervalMs = Math.min(...list.map((t) => t.intervalMs));
    out.push({
      key,
      protocol: "TCP",
      family: list[0]!.family,
      address,
      port,
      path: null,
      intervalMs,
      timeoutMs: Math.min(intervalMs, ...list.map((t) => t.timeoutMs)),
      healthyThreshold: Math.max(...list.map((t) => t.healthyThreshold)),
      unhealthyThreshold: Math.min(...list.map((t) => t.unhealthyThreshold)),
      readsWeight: false,
      users: [...users.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, u]) => u),
      via: "tunnel",
    });
  }
  return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}
