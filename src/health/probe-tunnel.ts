/**
 * Adapter: the tunnel check's probe (lb-host/routing/encap-check.ts has the routing that makes it
 * take the tunnel). A TCP connect like probeOnce's, bound to a local port of the check's
 * range, so that the LB host's rule `ipproto tcp sport FIRST-LAST` sends it through the
 * node's tunnel route. Ports come from a pool: no two probes in flight share one, and a
 * probe returns its port when its socket is gone — a connected probe is closed with a reset
 * (no TIME_WAIT), one still connecting is closed at once (the kernel drops a SYN_SENT
 * socket on close), so a port is reusable as soon as it is back.
 *
 * A port that something else holds (EADDRINUSE: a listener bound there; EADDRNOTAVAIL) is
 * skipped and the next one is tried, up to three times within the probe's timeout; the
 * verdict then names the port problem, not the tunnel.
 */
import type { PortRange } from "../lb-host/routing/encap-check.ts";
import { probeOnce } from "./probe-once.ts";
import type { ProbeOutcome } from "./state-machine.ts";
import type { ProbeTarget } from "./state-probe-targets.ts";

const PORT_RETRIES = 3;

export class TunnelPorts {
  readonly #range: PortRange;
  readonly #busy = new Set<number>();
  #next: number;

  constructor(range: PortRange) {
    this.#range = range;
    this.#next = range.first;
  }

  /** a free port (round robin), or undefined when every port is in flight */
  take(): number | undefined {
    const size = this.#range.last - this.#range.first + 1;
    for (let i = 0; i < size; i++) {
      const port = this.#next;
      this.#next = port === this.#range.last ? this.#range.first : port + 1;
      if (this.#busy.has(port)) continue;
      this.#busy.add(port);
      return port;
    }
    return undefined;
  }

  give(port: number): void {
    this.#busy.delete(port);
  }

  get inUse(): number {
    return this.#busy.size;
  }
}

/** A probe function for `via: "tunnel"` targets over `ports`. */
export function tunnelProbe(ports: TunnelPorts): (target: ProbeTarget) => Promise<ProbeOutcome> {
  return async (target) => {
    const started = performance.now();
    let last: ProbeOutcome = { ok: false, reason: "no free local port in the tunnel check's range" };
    for (let attempt = 0; attempt < PORT_RETRIES; attempt++) {
      const left = Math.floor(target.timeoutMs - (performance.now() - started));
      if (left <= 0) break;
      const port = ports.take();
      if (port === undefined) break;
      try {
        const outcome = await probeOnce({
          protocol: "TCP",
          address: target.address,
          port: target.port,
          path: null,
          timeoutMs: left,
          readsWeight: false,
          localPort: port,
        });
        if (outcome.ok) return { ok: true, reason: "TCP connect through the tunnel" };
        if (outcome.reason !== "EADDRINUSE" && outcome.reason !== "EADDRNOTAVAIL")
          return { ok: false, reason: `through the tunnel: ${outcome.reason}` };
        last = { ok: false, reason: `local port ${port}: ${outcome.reason}` };
      } finally {
        ports.give(port);
      }
    }
    return last;
  };
}
