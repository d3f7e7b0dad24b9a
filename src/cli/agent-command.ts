/**
 * `passlb agent --node NAME --manifests DIR`: the node side of passlb for standalone mode
 * and the lab, where no kube-proxy answers health checks. Serves kube-proxy-compatible
 * `/healthz` and `/livez` and one healthCheckNodePort server per externalTrafficPolicy
 * Local Service (docs/health.md; kubernetes pkg/proxy/healthcheck/service_health.go).
 *
 * With `--dataplane nftables` it also DNATs LoadBalancer VIP traffic to endpoints (table
 * `inet passlb-agent`, src/node-agent/agent-rules.ts), for standalone mode where no
 * kube-proxy does, rejects new connections to listeners without endpoints, and after each
 * sync deletes UDP/SCTP conntrack entries of endpoints that stopped serving (`conntrack`).
 * Its "rules" are that table and the health model: each successful read of the folder
 * that is applied marks them fresh; a change seen but not applied (the folder is
 * unreadable or has problems, so the last good snapshot is kept) marks them pending, and
 * after 2 × --sync-period they are stale and every answer is 503, as kube-proxy's are when
 * its syncs fail.
 *
 * With `--decap KIND` (routed networks, docs/agent-dataplane.md "Decapsulation") it also
 * creates and keeps the node's decapsulation device and its rp_filter settings
 * (decap-device.ts), at start and after every read, and — with `--dataplane nftables` —
 * clamps the MSS of VIP SYN-ACKs to what fits the tunnel.
 *
 * This file only declares the flags and runs the agent: src/node-agent/agent-config.ts
 * turns the flags into an AgentConfig (the first problem, naming its flag, exits 2),
 * build-node-agent.ts builds the NodeAgent from it and the host's drivers, and the agent
 * runs until the shutdown signal fires (a start that fails exits 1). The agent reads a
 * manifests folder only; in a cluster kube-proxy answers for the node (docs/health.md).
 */
import type { Command } from "commander";
import { type AgentFlags, agentConfig } from "../node-agent/agent-config.ts";
import { buildNodeAgent } from "../node-agent/build-node-agent.ts";
import { hostDrivers } from "../node-agent/host-drivers.ts";
import type { CliIo } from "./load-input.ts";
import { addObservabilityOptions, type ObservabilityFlags, startObservability } from "./observability.ts";

export function registerAgentCommand(
  program: Command,
  io: CliIo,
  setExitCode: (code: number) => void,
  shutdownSignal: () => AbortSignal,
): void {
  const command = program
    .command("agent")
    .description("serve kube-proxy-compatible node health checks (/healthz, /livez, healthCheckNodePorts)")
    .requiredOption("--node <name>", "the Node this agent speaks for")
    .option("--manifests <dir>", "manifest folder to read and watch")
    .option("--healthz-bind-address <host:port>", "address of /healthz and /livez", "0.0.0.0:10256")
    .option("--bind-address <ip>", "address of the per-Service health servers (default: every address)")
    .option("--sync-period <seconds>", "periodic re-read; rules are stale after twice this", "30")
    .option(
      "--dataplane <mode>",
      "none (health only), userspace (also proxy every nodePort) or nftables (DNAT VIP traffic to endpoints, standalone mode)",
      "none",
    )
    .option(
      "--decap <kind>",
      "receive encapsulated VIP traffic from LB hosts in other subnets: vxlan-gpe, ipip, gre or gue (device, rp_filter, MSS clamp)",
    )
    .option(
      "--encap-port <n>",
      "--decap: UDP port of vxlan-gpe (4790) or gue (6080); the LB host's --encap-port",
    )
    .option(
      "--encap-mtu <n>",
      "--decap: underlay MTU the MSS clamp is computed from (1500); the LB host's --encap-mtu",
    )
    .option(
      "--proc-sys <dir>",
      "--decap: where the host's /proc/sys/net/ipv4/conf is writable, as DIR/net/ipv4/conf (a container's own /proc/sys is read-only)",
      "/proc/sys",
    )
    .option("--loopback", "userspace: apply passlb up's loopback rewrite to the folder (docs/quickstart.md)")
    .option(
      "--proxy-protocol",
      "userspace: send PROXY v2 to pods (a PROXY v2 header from the LB is always read)",
    )
    .action(async (flags: AgentFlags & ObservabilityFlags) => {
      const checked = agentConfig(flags);
      if ("error" in checked) {
        io.stderr(`error: ${checked.error}\n`);
        return setExitCode(2);
      }
      const config = checked.config;
      const obs = await startObservability(flags, {
        io,
        process: "passlb agent",
        component: "agent",
        dataplane: config.dataplane,
      });
      if (typeof obs === "string") {
        io.stderr(`error: ${obs}\n`);
        return setExitCode(2);
      }
      const agent = buildNodeAgent(config, hostDrivers(), {
        log: (level, event, reason, line) =>
          obs.logger.log(level, { event, reason, node: config.node }, line),
        finding: (f) => obs.observer.finding(f),
        setFindings: (fs) => obs.observer.setFindings(fs),
      });
      await obs.serve();
      try {
        await agent.start();
      } catch (e) {
        io.stderr(`error: ${(e as Error).message}\n`);
        await obs.close();
        return setExitCode(1);
      }
      const health = agent.parts.health?.listening();
      if (health)
        agent.parts.report.info(
          `serving /healthz and /livez on ${flags.healthzBindAddress}${health.healthz ? "" : " (not yet: see above)"}; ` +
            `${health.services} Service health server(s)`,
          "serving",
        );
      await untilAborted(shutdownSignal());
      await agent.stop();
      if (health) agent.parts.report.info("stopped", "stopped");
      await obs.close();
    });
  // kube-proxy's metrics address (--metrics-bind-address) is 127.0.0.1:10249: same place
  addObservabilityOptions(command, "127.0.0.1:10249");
}

function untilAborted(signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
}
