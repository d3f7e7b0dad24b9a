/**
 * What the node agent needs from the host, as narrow interfaces: `nft` and `conntrack` for
 * the DNAT table and its stale flows, `ip`/sysctls for the decapsulation side, sockets for
 * the health servers and the userspace proxy, the input source and the clock. The real
 * ones are host-drivers.ts; tests pass fake-drivers.ts, which records what it was asked.
 */

import type { SnapshotSource } from "../cluster/snapshot-source.ts";
import type { ConntrackDriver } from "../drivers/conntrack-tool.ts";
import type { NftDriver } from "../drivers/nft.ts";
import type { Clock } from "../health/clock.ts";
import type { HealthServersOptions } from "../health/health-servers.ts";
import type { AgentHealthModel } from "../health/state-agent-model.ts";
import type { Encap } from "../lb-host/routing/encap.ts";
import type { NodeRoutes } from "../lb-host/userspace/node-port-routes.ts";
import type { IpFamily } from "../net/ip.ts";
import type { DecapResult } from "./decap-device.ts";
import type { NodeProxyOptions } from "./node-proxy.ts";

/** HealthServers' surface the agent uses (src/health/health-servers.ts) */
export interface HealthServing {
  update(model: AgentHealthModel): Promise<void>;
  markQueued(family: IpFamily): void;
  markUpdated(family: IpFamily): void;
  addresses(): { healthz: unknown; services: ReadonlyMap<number, unknown> };
  close(): Promise<void>;
}

/** NodeProxy's surface (src/node-agent/node-proxy.ts): errors out of update */
export interface NodeProxying {
  update(routes: NodeRoutes): Promise<string[]>;
  close(): Promise<void>;
}

export interface FolderSourceOptions {
  readonly path: string;
  readonly rereadMs: number;
  readonly debounceMs: number;
}

export interface AgentDrivers {
  readonly clock: Clock;
  readonly nft: NftDriver;
  readonly conntrack: ConntrackDriver;
  ensureDecap(encap: Encap, procSys: string): Promise<DecapResult>;
  healthServers(options: HealthServersOptions): HealthServing;
  nodeProxy(options: NodeProxyOptions): NodeProxying;
  source(options: FolderSourceOptions): SnapshotSource;
}
