/**
 * What the nftables LB host needs from the machine, as narrow interfaces (issue 26; the
 * node agent's agent-drivers.ts is the model): the `nft` driver, the policy routes and the
 * tunnel check's routes (`ip`), the kernel's nftables generation (`nft monitor`), the
 * conntrack sysctls and the `conntrack` tool, the flow-table and conntrack usage readers,
 * the two announcement engines (keepalived, BIRD) and their wire checks, and the clock.
 * The real ones are host-drivers.ts; tests pass fake-drivers.ts. Build code never asks
 * whether a driver is a fake: every driver is always given.
 *
 * Deliberately not here: the prober's sockets and the manifest files (read as they are,
 * also in tests), the dashboard (Observability).
 */
import type { Announcer, AnnouncerEvent, PeerAddresses } from "../../announce/announcer.ts";
import type { BgpEngine } from "../../announce/bgp/bgp-engine.ts";
import type { AnnounceConfig } from "../../cli/lb-announce.ts";
import type { BgpConfig, ClusterBgpConfig } from "../../cli/lb-announce-bgp.ts";
import type { WireChecks, wireChecksFor } from "../../cli/lb-wire.ts";
import type { ConntrackSysctl } from "../../drivers/conntrack-sysctl.ts";
import type { ConntrackDriver } from "../../drivers/conntrack-tool.ts";
import type { NftDriver } from "../../drivers/nft.ts";
import type { Clock } from "../../health/clock.ts";
import type { FlowTableUsage } from "../nftables/flow-table-usage.ts";
import type { GenerationWatch } from "../nftables/nft-generation.ts";
import type { FlowTableConfig } from "../nftables/render/flow-map.ts";
import type { Forward } from "../routing/encap.ts";
import type { PortRange } from "../routing/encap-check.ts";
import type { EncapCheckRoutes } from "../routing/encap-check-routes.ts";
import type { RouteApplier } from "../routing/policy-routes.ts";

export type WireCheckOptions = Parameters<typeof wireChecksFor>[0];

export interface NftablesLbHostDrivers {
  readonly clock: Clock;
  readonly nft: NftDriver;
  /** `ip rule`/`ip route` for marked packets (drivers/ip-routes.ts) */
  policyRoutes(forward: Forward): RouteApplier;
  /** the tunnel check's rule and routes (routing/encap-check-routes.ts) */
  encapCheckRoutes(forward: Forward, ports: PortRange): EncapCheckRoutes;
  /** `nft monitor`, started by this call (nftables/nft-generation.ts) */
  nftGenerations(onExit: (stderr: string) => void): GenerationWatch;
  readonly conntrackSysctl: ConntrackSysctl;
  /** `conntrack -D` for pinned UDP flows of nodes that left a table */
  readonly conntrack: ConntrackDriver;
  /** entries in the flow map per family (nftables/flow-table-usage.ts) */
  flowTableUsage(table: string, flowTable: FlowTableConfig): Promise<readonly FlowTableUsage[] | undefined>;
  /** nf_conntrack_count and nf_conntrack_max; undefined where unreadable */
  conntrackUsage(): Promise<{ entries: number; max: number } | undefined>;
  /** `--announce l2`: the keepalived engine (not started), or why it cannot run here */
  keepalived(
    config: AnnounceConfig,
    peers: PeerAddresses,
    onEvent: (e: AnnouncerEvent) => void,
  ): Announcer | string;
  /** `--announce bgp`: the BIRD engine (not started); a BgpEngine gets the cluster's configuration and status */
  bird(
    config: BgpConfig,
    host: string,
    onEvent: (e: AnnouncerEvent) => void,
    cluster: ClusterBgpConfig | undefined,
  ): Announcer | BgpEngine;
  /** the announcement checked from the wire (cli/lb-wire.ts); undefined when off */
  wireChecks(options: WireCheckOptions): WireChecks | undefined;
}
