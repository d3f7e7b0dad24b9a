/**
 * What the LB host asks of a data plane: take the wanted forwarding state, say whether the
 * kernel still holds it (and restore it), report its counters, and stop leaving the kernel
 * forwarding — or adopt, at start, what a previous process left. Implemented by the XDP
 * fast path (xdp/xdp-dataplane.ts), the nftables path (nftables/nftables-dataplane.ts,
 * driven by nftables/lb-controller.ts) and the userspace proxy (userspace/userspace-lb.ts:
 * nothing to adopt, its sockets end with the process).
 *
 * Inputs are the pure core's outputs (forwarding/forwarding-state.ts); nothing here decides
 * policy.
 */
import type { ServiceForwarding } from "../forwarding/forwarding-state.ts";
import type { Finding } from "../plan/load-balancer-plan.ts";

export interface LbDesiredState {
  readonly forwarding: readonly ServiceForwarding[];
  /** PasslbConfig zones (zonal affinity: a client's zone by its address) */
  readonly zones: readonly { readonly name: string; readonly clientCIDRs: readonly string[] }[];
}

export interface TrafficCount {
  readonly packets: number;
  readonly bytes: number;
}

export interface DataplaneCounters {
  readonly services: ReadonlyMap<string, TrafficCount>;
  readonly nodes: ReadonlyMap<string, TrafficCount>;
  /** the data plane's own verdict counters (XDP: pass/drop/forward reasons) */
  readonly reasons: ReadonlyMap<string, TrafficCount>;
  /** flow-table occupancy and capacity by family ("IPv4" | "IPv6") */
  readonly flows?: {
    readonly entries: ReadonlyMap<"IPv4" | "IPv6", number>;
    readonly capacity: number;
    /** entries the table evicted to make room, since this process first read it (XDP:
     * derived, xdp/flow-evictions.ts) */
    readonly evictions?: number;
  };
}

export interface StartReport {
  /** a previous process's program and maps were found and kept */
  readonly adopted: boolean;
  /** the loaded program differed from the one found (upgrade): replaced atomically */
  readonly replaced: boolean;
  /** what could not be set up, and what the data plane does instead (logged) */
  readonly notes?: readonly string[];
}

export interface ApplyReport {
  readonly ops: number;
  readonly ms: number;
  /** what the data plane could not do as asked (userspace: a port it could not bind, SCTP) */
  readonly findings?: readonly Finding[];
  /** how the kernel was brought there (nftables: atomic replace or element updates) */
  readonly mode?: "full" | "incremental" | "noop";
  /** the size of what was sent (nftables: the script's bytes) */
  readonly bytes?: number;
  /** where the time went, in milliseconds (XDP: render, plan, write) */
  readonly phases?: Readonly<Record<string, number>>;
}

/** apply's failure when the wanted state cannot be rendered at all (a bug or a limit, such
 * as running out of node marks): nothing was sent and the kernel is as it was, so the owner
 * retries late, not soon. `cause` is the renderer's error. Any other failure of apply is
 * the kernel's (retry soon; the next apply is a full one). */
export class UnrenderableState extends Error {
  constructor(cause: unknown) {
    super((cause as Error)?.message ?? String(cause), { cause });
    this.name = "UnrenderableState";
  }
}

export interface LbDataplane {
  readonly name: "xdp" | "nftables" | "userspace";
  /** load or adopt, attach; idempotent */
  start(): Promise<StartReport>;
  apply(state: LbDesiredState): Promise<ApplyReport>;
  /** compares the kernel with the last applied state and restores it; returns what drifted */
  check(): Promise<readonly string[]>;
  counters(): Promise<DataplaneCounters>;
  /** stops its own timers; the kernel keeps forwarding with the last state */
  stop(): Promise<void>;
}
