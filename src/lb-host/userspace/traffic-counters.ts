/**
 * Running totals of what the userspace LB forwarded, per Service and node: connections
 * (TCP) and flows (UDP) sent to the node, and bytes in each direction. The proxies add to
 * the tallies directly (one addition per chunk or datagram, no allocation); readers take
 * `totals()` when they need them (a Prometheus scrape, metrics.ts `trafficSource`).
 *
 * Totals only grow while the process runs; a Service that leaves the plan keeps its
 * totals until `retain` drops it (they restart at 0 if it comes back, which Prometheus
 * counters treat as a reset).
 * Deliberately not here: rates or windows (Prometheus `rate()` and the dashboard do that).
 */
import type { ByteTally } from "./tcp-proxy.ts";

export interface NodeTraffic {
  connections: number;
  /** bytes from clients towards the node */
  readonly toBackend: ByteTally;
  /** bytes from the node back to clients */
  readonly toClient: ByteTally;
}

export interface TrafficTotals {
  readonly service: string;
  readonly node: string;
  readonly connections: number;
  readonly bytesToBackend: number;
  readonly bytesToClient: number;
}

export class TrafficCounters {
  readonly #byService = new Map<string, Map<string, NodeTraffic>>();

  /** The tallies of one node of a Service, created on first use; callers may keep them. */
  node(service: string, node: string): NodeTraffic {
    let nodes = this.#byService.get(service);
    if (!nodes) {
      nodes = new Map();
      this.#byService.set(service, nodes);
    }
    let t = nodes.get(node);
    if (!t) {
      t = { connections: 0, toBackend: { bytes: 0 }, toClient: { bytes: 0 } };
      nodes.set(node, t);
    }
    return t;
  }

  /** Forgets Services not in `keep`. */
  retain(keep: ReadonlySet<string>): void {
    for (const s of [...this.#byService.keys()]) if (!keep.has(s)) this.#byService.delete(s);
  }

  totals(): TrafficTotals[] {
    const out: TrafficTotals[] = [];
    for (const [service, nodes] of this.#byService)
      for (const [node, t] of nodes)
        out.push({
          service,
          node,
          connections: t.connections,
          bytesToBackend: t.toBackend.bytes,
          bytesToClient: t.toClient.bytes,
        });
    return out;
  }
}
