/**
 * Per-node (and per-Service) traffic from the kernel's named counters (`node_<mark>`,
 * `svc_<ns>.<name>`; nft-state.ts, service-part.ts). Per node: which
 * node each counter stands for, through the `nexthops` maps (mark → address) and the
 * forwarding state (node → addresses). Pure.
 *
 * A counter whose mark no longer names a node of the forwarding state (a node just left)
 * is skipped; two nodes behind one address share one counter and are reported under the
 * first name in order. IPv4 and IPv6 marks of one node add up.
 * Does not: read the counters (NftDriver.counters) or export them (web/metrics.ts).
 */

import type { ServiceForwarding } from "../../forwarding/forwarding-state.ts";
import { canonicalIp } from "../../net/ip.ts";
import { FAMS, type NftState, nodeCounterName } from "./render/nft-state.ts";
import { serviceCounterName } from "./render/service-part.ts";

export interface NodeTraffic {
  readonly node: string;
  readonly packets: number;
  readonly bytes: number;
}

export function nodeTrafficOf(
  state: NftState,
  forwardings: readonly ServiceForwarding[],
  counters: ReadonlyMap<string, { packets: number; bytes: number }>,
): NodeTraffic[] {
  const nodeOf = new Map<string, string>(); // address → node
  const names = [...new Set(forwardings.flatMap((f) => f.plan.members.map((m) => m.node)))].sort();
  const addressesOf = new Map<string, string[]>();
  for (const f of forwardings)
    for (const m of f.plan.members)
      if (!addressesOf.has(m.node))
        addressesOf.set(
          m.node,
          [m.addresses.IPv4, m.addresses.IPv6]
            .map((a) => (a === undefined ? undefined : canonicalIp(a)))
            .filter((a) => a !== undefined),
        );
  for (const node of names)
    for (const a of addressesOf.get(node) ?? []) if (!nodeOf.has(a)) nodeOf.set(a, node);
  const out = new Map<string, { packets: number; bytes: number }>();
  for (const fam of FAMS)
    for (const [markText, address] of state.sets.get(`nexthops${fam}`)?.elements ?? []) {
      const node = nodeOf.get(address);
      const c = counters.get(nodeCounterName(Number(markText)));
      if (node === undefined || !c) continue;
      const sum = out.get(node) ?? { packets: 0, bytes: 0 };
      out.set(node, { packets: sum.packets + c.packets, bytes: sum.bytes + c.bytes });
    }
  return [...out].sort((a, b) => (a[0] < b[0] ? -1 : 1)).map(([node, v]) => ({ node, ...v }));
}

/** Per-Service traffic from the Services' named counters (`svc_<ns>.<name>`). */
export function serviceTrafficOf(
  forwardings: readonly ServiceForwarding[],
  counters: ReadonlyMap<string, { packets: number; bytes: number }>,
): { service: string; packets: number; bytes: number }[] {
  const out: { service: string; packets: number; bytes: number }[] = [];
  for (const f of forwardings) {
    const c = counters.get(serviceCounterName(f.service));
    if (c) out.push({ service: f.service, packets: c.packets, bytes: c.bytes });
  }
  return out;
}
