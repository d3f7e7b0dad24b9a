/**
 * The tunnel check's probe targets (`passlb lb --forward encap --encap-check`, issue 21;
 * the kernel side is dataplane/encap-check.ts). Pure: the node probe targets and which
 * addresses the LB host encapsulates to in, one extra target per such address out.
 *
 * - One target per routed node address (per family), not per check: the tunnel belongs to
 *   the node, whatever Services use it. It is a TCP connect (`via: "tunnel"`) to the lowest
 *   port the node is already probed on — kube-proxy's `:10256` where an eTP Cluster Service
 *   exists, else a Local Service's `healthCheckNodePort`: a port known to listen on that
 *   node, since the plain check probes it. TCP, not the check's HTTP: a Local node without
 *   endpoints answers 503 there (specs/gke-l4.md §4.1) and its tunnel still works; the
 *   connect alone proves LB host → tunnel → decap → node.
 * - It gates every (Service, check, node) that a plain target of that address gates (its
 *   `users` are their union), so a failed tunnel takes the node out of every Service, as an
 *   unhealthy node (ProberHealth's lookup folds the worst state over a user's targets).
 * - Its timing is the strictest of those targets' (shortest interval and timeout, lowest
 *   unhealthy and highest healthy threshold, as probeTargets merges shared targets): a
 *   broken tunnel takes a node out within every gated check's own bound, interval ×
 *   unhealthy threshold + timeout.
 *
 * Not here: the socket (probe-once.ts with a local port from the check's range), the route
 * (dataplane/encap-check.ts), which addresses are routed (dataplane/encap.ts nodePath).
 */
import { joinHostPort } from "../net/ip.ts";
import type { ProbeTarget, TargetUser } from "./state-probe-targets.ts";

/** the reason a node is out because its tunnel check failed (events, dashboard, metrics) */
export const TUNNEL_CHECK_FAILED = "tunnel_check_failed";

export function tunnelTargetKey(address: string, port: number): string {
  return `TCP ${joinHostPort(address, port)} via tunnel`;
}

/** One tunnel target per address `routed` accepts, sorted by key. */
export function tunnelTargets(
  targets: readonly ProbeTarget[],
  routed: (address: string) => boolean,
): ProbeTarget[] {
  const byAddress = new Map<string, ProbeTarget[]>();
  for (const t of targets) {
    if (t.via === "tunnel" || !routed(t.address)) continue;
    const list = byAddress.get(t.address);
    if (list) list.push(t);
    else byAddress.set(t.address, [t]);
  }
  const out: ProbeTarget[] = [];
  for (const [address, list] of byAddress) {
    const port = Math.min(...list.map((t) => t.port));
    const users = new Map<string, TargetUser>();
    for (const t of list)
      for (const u of t.users) users.set(`${u.service}\u0000${u.check}\u0000${u.node}`, u);
    const intervalMs = Math.min(...list.map((t) => t.intervalMs));
    out.push({
      key: tunnelTargetKey(address, port),
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
