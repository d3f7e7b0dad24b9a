/**
 * Adapter: the node agent's real drivers — `nft` (the one nft driver, drivers/nft.ts), `conntrack`
 * (conntrack-tool.ts), `ip` and sysctls (decap-device.ts), node:http health servers,
 * the userspace node proxy, the manifest folder and the real clock.
 */
import { ManifestFolderSource } from "../cluster/manifest-folder-source.ts";
import { conntrackTool } from "../drivers/conntrack-tool.ts";
import { createNftDriver } from "../drivers/nft.ts";
import { realClock } from "../health/clock.ts";
import { HealthServers } from "../health/health-servers.ts";
import type { AgentDrivers } from "./agent-drivers.ts";
import { ensureDecap } from "./decap-device.ts";
import { NodeProxy } from "./node-proxy.ts";

export function hostDrivers(): AgentDrivers {
  return {
    clock: realClock(),
    nft: createNftDriver(),
    conntrack: conntrackTool(),
    ensureDecap: (encap, procSys) => ensureDecap(encap, { procSys }),
    healthServers: (o) => new HealthServers(o),
    nodeProxy: (o) => new NodeProxy(o),
    source: (o) => new ManifestFolderSource(o),
  };
}
