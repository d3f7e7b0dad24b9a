/**
 * The decisions of the userspace LB for one listener, as plain functions over the
 * forwarding state (forwarding-state.ts): may this client connect (loadBalancerSourceRanges),
 * and which node takes a new connection or flow.
 *
 * - Source ranges: Kubernetes Service spec `loadBalancerSourceRanges` — empty allows every
 *   client; otherwise the client address must be inside one range of its family.
 * - Choice: ClientIP session affinity first (the node this client used within the timeout,
 *   if it still takes new connections); else the Maglev table of the client's zone under
 *   zonal affinity, or the global table, looked up with the flow hash — the 5-tuple, or the
 *   client address alone under ClientIP affinity (docs/dataplane-userspace.md).
 * - A node the caller just failed to reach is avoided: the next backend in name order.
 * Pure apart from the affinity table, which takes `now`. Runs once per new connection: a
 * table lookup (O(1)) after a flow hash over a reused buffer.
 */

import type { ActiveBackend, ListenerForwarding } from "../../forwarding/forwarding-state.ts";
import { lookupBackend } from "../../forwarding/maglev.ts";
import { flowHash } from "../../forwarding/maglev-flow-hash.ts";
import { type Cidr, cidrContains, parseCidr, parseIp } from "../../net/ip.ts";
import type { FlowTable } from "./flow-table.ts";
import type { NodeTraffic } from "./traffic-counters.ts";

export interface LbRoute {
  readonly service: string;
  readonly vip: string;
  readonly forwarding: ListenerForwarding;
  readonly backendsByNode: ReadonlyMap<string, ActiveBackend>;
  readonly sourceRanges: readonly Cidr[];
  readonly clientIpAffinity: boolean;
  readonly seed: number;
  /** the traffic tallies of each backend node (traffic-counters.ts) */
  readonly traffic: ReadonlyMap<string, NodeTraffic>;
}

export function sourceAllowed(ranges: readonly Cidr[], client: string): boolean {
  if (ranges.length === 0) return true;
  const ip = parseIp(client);
  if (!ip) return false;
  return ranges.some((r) => r.family === ip.family && cidrContains(r, ip));
}

export function parseSourceRanges(ranges: readonly string[]): Cidr[] {
  return ranges.map((r) => parseCidr(r, true)).filter((c): c is Cidr => c !== undefined);
}

export interface Client {
  readonly address: string;
  readonly port: number;
  readonly zone: string | undefined;
}

export function chooseNode(
  route: LbRoute,
  client: Client,
  affinity: FlowTable<string> | undefined,
  now: number,
  avoid?: string,
): ActiveBackend | undefined {
  const fw = route.forwarding;
  // built only under ClientIP affinity: the common path makes no string per connection
  const affinityKey =
    route.clientIpAffinity && affinity ? `${route.service}|${fw.listener}|${client.address}` : "";
  if (route.clientIpAffinity && affinity) {
    const kept = affinity.get(affinityKey, now);
    const b = kept === undefined ? undefined : route.backendsByNode.get(kept);
    if (b && b.node !== avoid) return b;
  }
  const table = (client.zone !== undefined ? fw.zoneTables.get(client.zone) : undefined) ?? fw.table;
  const hash = route.clientIpAffinity
    ? flowHash({ srcAddr: client.address }, route.seed)
    : flowHash(
        {
          protocol: fw.protocol,
          srcAddr: client.address,
          srcPort: client.port,
          dstAddr: route.vip,
          dstPort: fw.port,
        },
        route.seed,
      );
  const name = lookupBackend(table, hash);
  let chosen = name === undefined ? undefined : route.backendsByNode.get(name);
  if (chosen && chosen.node === avoid) {
    const list = fw.backends;
    const at = list.findIndex((b) => b.node === avoid);
    chosen = list.length > 1 ? list[(at + 1) % list.length] : undefined;
  }
  if (chosen && route.clientIpAffinity && affinity) affinity.set(affinityKey, chosen.node, now);
  return chosen;
}
