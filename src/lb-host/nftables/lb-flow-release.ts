/**
 * Which pinned UDP flows an LB host releases after a pass: for each listener of a
 * Service, the nodes that were in its Maglev tables before the pass and are in none of them
 * after it, while they stay `live` (a member of some other Service) — their flows would
 * otherwise keep their conntrack mark for as long as the client keeps sending, and go to a
 * node that no longer serves the Service (under eTP Local its agent drops them: measured in
 * the lab, test/e2e/stale-flows.test.ts). Each becomes one conntrack deletion by VIP, port
 * and the node's mark; the next datagram is hashed over the new table. Pure: forwardings
 * before and after, and the applied NftState (for the marks), in; filters out.
 *
 * The rule it follows: Google Cloud's backend services keep existing connections on an
 * unhealthy backend only for connection-oriented protocols (Compute Engine API,
 * `BackendServiceConnectionTrackingPolicy.connectionPersistenceOnUnhealthyBackends`, default
 * DEFAULT_FOR_PROTOCOL: they persist "only for connection-oriented protocols (TCP and SCTP)
 * … They do not persist for UDP"; load-balancing/docs/network/networklb-backend-service
 * "Connection persistence"). TCP and SCTP flows are left alone (docs/dataplane-nftables.md, "Connection
 * tracking"). A node that left every table is not `live`
 * any more: the ruleset already hashes its flows again, nothing to delete. A listener that
 * fails open keeps every member in its table, so nothing moves.
 * Bound: one deletion per (UDP listener, VIP, node that left its tables) per pass.
 */

import type { ConntrackFilter } from "../../drivers/conntrack-tool.ts";
import type { ListenerForwarding, ServiceForwarding } from "../../forwarding/forwarding-state.ts";
import type { IpFamily } from "../../net/ip.ts";
import { formatMark, type NftState } from "./render/nft-state.ts";

export interface FlowRelease extends ConntrackFilter {
  readonly mark: number;
  readonly node: string;
  /** `namespace/name` and listener, for the log */
  readonly service: string;
}

export function releasedFlows(
  before: readonly ServiceForwarding[],
  after: readonly ServiceForwarding[],
  applied: NftState,
): FlowRelease[] {
  const previous = new Map(before.map((f) => [f.service, f]));
  const live = applied.sets.get("live")?.elements;
  const marks = { IPv4: markByAddress(applied, "nexthops4"), IPv6: markByAddress(applied, "nexthops6") };
  const out: FlowRelease[] = [];
  for (const f of after) {
    const old = previous.get(f.service);
    if (!old || old === f) continue;
    for (const l of f.listeners) {
      if (l.protocol !== "UDP") continue;
      const was = old.listeners.find((x) => x.listener === l.listener);
      if (!was || was === l) continue;
      const now = tableNodes(l);
      const gone = [...tableNodes(was)].filter((n) => !now.has(n)).sort();
      if (gone.length === 0) continue;
      for (const vip of f.plan.vips) {
        for (const node of gone) {
          const address = was.backends.find((b) => b.node === node)?.addresses[vip.family];
          const mark = address === undefined ? undefined : marks[vip.family].get(address);
          if (mark === undefined || !live?.has(formatMark(mark))) continue;
          out.push({
            family: vip.family as IpFamily,
            protocol: "udp",
            origDst: vip.address,
            origPortDst: l.port,
            mark,
            node,
            service: `${f.service} ${l.listener}`,
          });
        }
      }
    }
  }
  return out;
}

/** Every node any of the listener's tables (global or zonal) sends to. */
function tableNodes(l: ListenerForwarding): Set<string> {
  const nodes = new Set(l.table.backends);
  for (const t of l.zoneTables.values()) for (const n of t.backends) nodes.add(n);
  return nodes;
}

function markByAddress(state: NftState, set: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const [mark, address] of state.sets.get(set)?.elements ?? []) out.set(address, Number(mark));
  return out;
}
