/**
 * Config + drivers → a `NodeAgent` with the parts that config asks for (node-agent.ts):
 * health servers and the input when there is a manifest folder, DNAT for `--dataplane
 * nftables` (with the MSS clamp of `--decap`), the userspace proxy for `--dataplane
 * userspace`, the decap part for `--decap`. `input` replaces the folder source (passlb up
 * pushes its own Snapshots).
 */
import type { SnapshotSource } from "../cluster/snapshot-source.ts";
import { clampedMss } from "../lb-host/routing/encap.ts";
import type { AgentConfig } from "./agent-config.ts";
import { AgentDataplane } from "./agent-dataplane.ts";
import type { AgentDrivers } from "./agent-drivers.ts";
import { AgentHealth } from "./agent-health.ts";
import { AgentNodeProxy } from "./agent-node-proxy.ts";
import { AgentReporter, type AgentSink } from "./agent-reporter.ts";
import { DecapKeeper } from "./decap-keeper.ts";
import { NodeAgent } from "./node-agent.ts";

/** the folder source's quiet time after a change before it reads (manifest-folder-source.ts) */
const DEBOUNCE_MS = 200;

export function buildNodeAgent(
  config: AgentConfig,
  drivers: AgentDrivers,
  sink: AgentSink,
  options: { readonly input?: SnapshotSource } = {},
): NodeAgent {
  const report = new AgentReporter(sink);
  const { decap } = config;
  const input =
    options.input ??
    (config.manifests === undefined
      ? undefined
      : drivers.source({ path: config.manifests, rereadMs: config.syncMs, debounceMs: DEBOUNCE_MS }));
  const health = input
    ? new AgentHealth(
        drivers.healthServers({
          clock: drivers.clock,
          healthz: config.healthz,
          serviceHost: config.serviceHost,
          healthTimeoutMs: 2 * config.syncMs,
          onFinding: (f) => report.finding(f),
        }),
        config.node,
        report,
      )
    : undefined;
  const dnat =
    input && config.dataplane === "nftables"
      ? new AgentDataplane({
          node: config.node,
          nft: drivers.nft,
          conntrack: drivers.conntrack,
          log: (line) => report.info(line),
          ...(decap && { ruleset: { mss: { 4: clampedMss(decap, 4), 6: clampedMss(decap, 6) } } }),
        })
      : undefined;
  const proxy =
    input && config.dataplane === "userspace"
      ? new AgentNodeProxy(config, drivers.nodeProxy, report)
      : undefined;
  const decapKeeper = decap
    ? new DecapKeeper({
        encap: decap,
        procSys: config.procSys,
        ensure: drivers.ensureDecap,
        clock: drivers.clock,
        report,
      })
    : undefined;
  return new NodeAgent({
    report,
    input,
    health,
    dnat,
    decap: decapKeeper,
    proxy,
    decapPeriodMs: config.syncMs,
  });
}
