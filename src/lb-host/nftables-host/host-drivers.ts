/**
 * Adapter: the nftables LB host's real drivers (lb-host-drivers.ts) — the `nft` command,
 * `ip` for the policy routes and the tunnel check's routes, `nft monitor`, the conntrack
 * sysctls and tool, the flow-table and conntrack readers, keepalived, BIRD, the wire checks
 * and the real clock.
 */

import { keepalivedAnnouncer } from "../../cli/lb-announce.ts";
import { bgpAnnouncer } from "../../cli/lb-announce-bgp.ts";
import { wireChecksFor } from "../../cli/lb-wire.ts";
import { createConntrackSysctl, readConntrackUsage } from "../../drivers/conntrack-sysctl.ts";
import { conntrackTool } from "../../drivers/conntrack-tool.ts";
import { createPolicyRoutes } from "../../drivers/ip-routes.ts";
import { createNftDriver } from "../../drivers/nft.ts";
import { realClock } from "../../health/clock.ts";
import { readFlowTableUsage } from "../nftables/flow-table-usage.ts";
import { createNftGenerationWatch } from "../nftables/nft-generation.ts";
import { flowTableName } from "../nftables/render/flow-map.ts";
import { createEncapCheckRoutes } from "../routing/encap-check-routes.ts";
import type { NftablesLbHostDrivers } from "./lb-host-drivers.ts";

export function lbHostDrivers(): NftablesLbHostDrivers {
  return {
    clock: realClock(),
    nft: createNftDriver(),
    policyRoutes: (forward) => createPolicyRoutes({ forward }),
    encapCheckRoutes: (forward, ports) => createEncapCheckRoutes({ forward, ports }),
    nftGenerations: (onExit) => createNftGenerationWatch({ onExit }),
    conntrackSysctl: createConntrackSysctl(),
    conntrack: conntrackTool(),
    flowTableUsage: (table, flowTable) => readFlowTableUsage(flowTableName(table), flowTable),
    conntrackUsage: () => readConntrackUsage(),
    keepalived: keepalivedAnnouncer,
    bird: (config, host, onEvent, cluster) => bgpAnnouncer(config, host, onEvent, cluster),
    wireChecks: wireChecksFor,
  };
}
