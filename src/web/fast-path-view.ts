/**
 * The dashboard's fast-path card (`passlb lb --dataplane xdp`): the program's counters as
 * the LB host last read them (lb-host/fast-path.ts, every `--counters-ms`), grouped the way
 * an operator reads them — what XDP forwarded itself, what it handed to the nftables table
 * behind it, what it dropped at the driver, and how the flow table is doing (entries against
 * capacity, evictions, new/hit/replaced entries, SYNs over the budget that were forwarded unpinned). The
 * reason names are the program's (docs/dataplane-xdp.md "Counters").
 *
 * Pure: the counters and the time they were read arrive as data.
 */
import type { DataplaneCounters, TrafficCount } from "../lb-host/lb-dataplane.ts";

export interface DashboardFastPath {
  readonly dataplane: string;
  /** when the counters were read (ISO time) */
  readonly readAt: string;
  /** packets XDP sent on itself (XDP_TX and redirects) */
  readonly forwarded: TrafficCount;
  /** packets passed to the stack: ARP, non-VIP traffic, and VIP packets nftables forwards */
  readonly handedToStack: TrafficCount;
  /** packets dropped at the driver (source ranges, Services without nodes) */
  readonly dropped: TrafficCount;
  /** every reason with packets, most first */
  readonly reasons: readonly { readonly reason: string; readonly packets: number }[];
  readonly flows: {
    readonly entries: { readonly IPv4: number; readonly IPv6: number };
    readonly capacity: number;
    /** 0..1 of the capacity, both families */
    readonly occupancy: number;
    /** entries evicted to make room since the LB host started reading (null: not known) */
    readonly evictions: number | null;
  } | null;
  /** per node, what XDP forwarded to it; most first */
  readonly nodes: readonly ({ readonly node: string } & TrafficCount)[];
}

const ZERO: TrafficCount = { packets: 0, bytes: 0 };
const add = (a: TrafficCount, b: TrafficCount): TrafficCount => ({
  packets: a.packets + b.packets,
  bytes: a.bytes + b.bytes,
});

export function fastPathView(
  dataplane: string,
  counters: DataplaneCounters,
  readAt: number,
): DashboardFastPath {
  let forwarded = ZERO;
  let handedToStack = ZERO;
  let dropped = ZERO;
  for (const [reason, t] of counters.reasons) {
    if (reason.startsWith("fwd_")) forwarded = add(forwarded, t);
    else if (reason.startsWith("pass_")) handedToStack = add(handedToStack, t);
    else if (reason.startsWith("drop_")) dropped = add(dropped, t);
  }
  const reasons = [...counters.reasons]
    .filter(([, t]) => t.packets > 0)
    .map(([reason, t]) => ({ reason, packets: t.packets }))
    .sort((a, b) => b.packets - a.packets || (a.reason < b.reason ? -1 : 1));
  const nodes = [...counters.nodes]
    .map(([node, t]) => ({ node, ...t }))
    .sort((a, b) => b.packets - a.packets || (a.node < b.node ? -1 : 1));
  const f = counters.flows;
  const entries = f && { IPv4: f.entries.get("IPv4") ?? 0, IPv6: f.entries.get("IPv6") ?? 0 };
  return {
    dataplane,
    readAt: new Date(readAt).toISOString(),
    forwarded,
    handedToStack,
    dropped,
    reasons,
    flows:
      f && entries
        ? {
            entries,
            capacity: f.capacity,
            occupancy:
              f.capacity > 0 ? Math.round(((entries.IPv4 + entries.IPv6) / f.capacity) * 10_000) / 10_000 : 0,
            evictions: f.evictions ?? null,
          }
        : null,
    nodes,
  };
}
