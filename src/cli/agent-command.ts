/**
 * `passlb agent --node NAME --manifests DIR`: the node side of passlb for standalone mode
 * and the lab, where no kube-proxy answers health checks. Serves kube-proxy-compatible
 * `/healthz` and `/livez` and one healthCheckNodePort server per externalTrafficPolicy
 * Local Service (docs/health.md, specs/endpointslice.md §4).
 *
 * With `--dataplane nftables` it also DNATs LoadBalancer VIP traffic to endpoints (table
 * `inet passlb-agent`, src/dataplane/agent-rules.ts), for standalone mode where no
 * kube-proxy does, rejects new connections to listeners without endpoints, and after each
 * sync deletes UDP/SCTP conntrack entries of endpoints that stopped serving (`conntrack`). Its "rules" are that table and the health model: each successful read
 * of the folder that is applied marks them fresh; a change
 * seen but not applied (the folder is unreadable or has problems, so the last good
 * snapshot is kept) marks them pending, and after 2 × --sync-period they are stale and
 * every answer is 503, as kube-proxy's are when its syncs fail.
 *
 * With `--decap KIND` (routed networks, docs/agent-dataplane.md "Decapsulation") it also
 * creates and keeps the node's decapsulation device and its rp_filter settings
 * (decap-device.ts), at start and after every read, and — with `--dataplane nftables` —
 * clamps the MSS of VIP SYN-ACKs to what fits the tunnel.
 *
 * Runs until the shutdown signal fires. Reading a cluster instead of a folder is not
 * implemented yet (there is no kube source yet).
 */
import type { Command } from "commander";
import { ManifestFolderSource } from "../cluster/manifest-folder-source.ts";
import { AgentDataplane } from "../dataplane/agent-dataplane.ts";
import { agentNft } from "../dataplane/agent-nft.ts";
import { conntrackTool } from "../dataplane/conntrack-tool.ts";
import { ensureDecap } from "../dataplane/decap-device.ts";
import { clampedMss, type Encap, encapFromFlags } from "../dataplane/encap.ts";
import { nodePortRoutes } from "../dataplane/userspace/node-port-routes.ts";
import { NodeProxy } from "../dataplane/userspace/node-proxy.ts";
import { realClock } from "../health/clock.ts";
import { type BindAddress, HealthServers } from "../health/health-servers.ts";
import { agentHealthModel } from "../health/state-agent-model.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { emptySnapshot } from "../k8s/snapshot.ts";
import type { IpFamily } from "../net/ip.ts";
import { canonicalIp } from "../net/ip.ts";
import { loopbackSnapshot } from "../quickstart/loopback-rewrite.ts";
import type { CliIo } from "./load-input.ts";
import { addObservabilityOptions, type ObservabilityFlags, startObservability } from "./observability.ts";

const DEBOUNCE_MS = 200;

/**
 * `host:port`, `[v6]:port` or `:port` (every address), as kube-proxy takes them. `0.0.0.0`
 * means every address of both families, as it does for kube-proxy: Go's `net.Listen("tcp",
 * "0.0.0.0:10256")` listens on "all available unicast and anycast IP addresses of the local
 * system" (pkg/net Listen docs; only "tcp4" is IPv4-only), so an LB probing a dual-stack
 * node's IPv6 address reaches kube-proxy's default healthz. Node's `listen()` without a host
 * does the same (`::` with IPv4-mapped addresses, or 0.0.0.0 where IPv6 is absent).
 */
export function parseBindAddress(text: string): BindAddress | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(text);
  if (!m) return undefined;
  const port = Number(m[3]);
  if (port > 65535) return undefined;
  const host = m[1] ?? m[2] ?? "";
  if (host === "" || host === "0.0.0.0") return { host: undefined, port };
  if (canonicalIp(host) === undefined) return undefined;
  return { host, port };
}

interface AgentOptions extends ObservabilityFlags {
  node: string;
  dataplane: string;
  proxyProtocol?: boolean;
  loopback?: boolean;
  manifests?: string;
  healthzBindAddress: string;
  bindAddress?: string;
  syncPeriod: string;
  decap?: string;
  encapPort?: string;
  encapMtu?: string;
  procSys: string;
}

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
    .action(async (opts: AgentOptions) => {
      const healthz = parseBindAddress(opts.healthzBindAddress);
      const syncSeconds = Number(opts.syncPeriod);
      const serviceHost = opts.bindAddress;
      if (!opts.manifests && opts.decap === undefined) {
        io.stderr(
          "error: --manifests DIR is required (the agent stands in for kube-proxy in standalone mode; in a cluster, kube-proxy does its job — there only --decap KIND runs, alone)\n",
        );
        return setExitCode(2);
      }
      if (!opts.manifests && opts.dataplane !== "none") {
        io.stderr(
          `error: --dataplane ${opts.dataplane} needs --manifests (decapsulation alone takes none)\n`,
        );
        return setExitCode(2);
      }
      if (!healthz) {
        io.stderr(`error: --healthz-bind-address ${opts.healthzBindAddress}: expected host:port\n`);
        return setExitCode(2);
      }
      if (serviceHost !== undefined && canonicalIp(serviceHost) === undefined) {
        io.stderr(`error: --bind-address ${serviceHost}: expected an IP address\n`);
        return setExitCode(2);
      }
      if (!(syncSeconds > 0)) {
        io.stderr(`error: --sync-period ${opts.syncPeriod}: expected a positive number of seconds\n`);
        return setExitCode(2);
      }
      if (opts.dataplane !== "none" && opts.dataplane !== "userspace" && opts.dataplane !== "nftables") {
        io.stderr(`error: --dataplane ${opts.dataplane}: expected none, userspace or nftables\n`);
        return setExitCode(2);
      }
      const decap =
        opts.decap === undefined
          ? undefined
          : encapFromFlags(opts.decap, opts.encapPort, opts.encapMtu, "--decap");
      if (typeof decap === "string") {
        io.stderr(`error: ${decap}\n`);
        return setExitCode(2);
      }
      if (decap) {
        try {
          const done = await ensureDecap(decap, { procSys: opts.procSys });
          io.stderr(
            `passlb agent: decapsulation ${decap.kind}${decap.port === undefined ? "" : `:${decap.port}`} ready${done.created.length > 0 ? ` (created ${done.created.join(", ")})` : ""}\n`,
          );
          for (const note of done.notes) io.stderr(`passlb agent: ${note}\n`);
        } catch (e) {
          io.stderr(`error: --decap ${decap.kind}: ${(e as Error).message}\n`);
          return setExitCode(1);
        }
      }
      const obs = await startObservability(opts, {
        io,
        process: "passlb agent",
        component: "agent",
        dataplane: opts.dataplane,
      });
      if (typeof obs === "string") {
        io.stderr(`error: ${obs}\n`);
        return setExitCode(2);
      }
      await obs.serve();
      if (!opts.manifests && decap) {
        // decapsulation alone (the DaemonSet of deploy/components/decap-vxlan-gpe, next to
        // kube-proxy): no health servers (kube-proxy's own answer), no DNAT; the device and
        // sysctls are checked every --sync-period and put back when something changed them
        await keepDecap(decap, opts.procSys, syncSeconds * 1000, shutdownSignal(), (line, reason) =>
          obs.logger.log(
            reason === "failed" ? "error" : "info",
            { event: "decap", reason, node: opts.node },
            line,
          ),
        );
        await obs.close();
        return;
      }
      const manifests = opts.manifests as string;
      const log = (line: string, event = "agent", reason?: string) =>
        obs.logger.log("info", { event, reason, node: opts.node }, line);
      // nftables: the DNAT table stays when the agent stops, as kube-proxy's rules do:
      // established connections keep flowing; the health checks take the node out of new traffic.
      const dataplane =
        opts.dataplane === "nftables"
          ? new AgentDataplane({
              node: opts.node,
              nft: agentNft(),
              conntrack: conntrackTool(),
              log,
              ...(decap && { ruleset: { mss: { 4: clampedMss(decap, 4), 6: clampedMss(decap, 6) } } }),
            })
          : undefined;
      const signal = shutdownSignal();
      let proxy: NodeProxy | undefined;
      const servers = new HealthServers({
        clock: realClock(),
        healthz,
        serviceHost,
        healthTimeoutMs: 2 * syncSeconds * 1000,
        onFinding: (f) => obs.observer.finding(f),
      });
      let families: readonly IpFamily[] = ["IPv4"];
      let lastGood: Snapshot | undefined;
      let lastReport = "";
      let lastFindings = "";
      let lastEligibility = "";
      const source = new ManifestFolderSource({
        path: manifests,
        rereadMs: syncSeconds * 1000,
        debounceMs: DEBOUNCE_MS,
      });
      await source.start({
        onChange: () => {
          for (const f of families) servers.markQueued(f);
        },
        onRead: async (read) => {
          const report = read.ok ? "" : read.problems.join("\n  ");
          if (report !== lastReport) {
            lastReport = report;
            if (read.ok) log("the manifests are valid again", "input_read", "valid");
            else
              log(
                `the manifests have problems; ${lastGood ? "keeping the last good state" : "no good state yet"}:\n  ${report}`,
                "input_read",
                "invalid",
              );
          }
          if (!read.ok) {
            // First start with a broken folder: serve what an unknown node answers.
            if (!lastGood) await servers.update(agentHealthModel(emptySnapshot(), opts.node));
            return;
          }
          lastGood = read.snapshot;
          // the decapsulation side is kept: a deleted device or reset sysctl comes back
          if (decap)
            await ensureDecap(decap, { procSys: opts.procSys }).catch((e: Error) =>
              log(`error tunnel_failed: ${e.message}`, "decap", "failed"),
            );
          // A DNAT sync that failed is not a successful sync: the health answers go stale
          // after 2 × --sync-period, as kube-proxy's do when its rules cannot be written.
          const dnat = await dataplane?.update(read.snapshot);
          const model = agentHealthModel(read.snapshot, opts.node);
          const findings = model.findings
            .map((f) => `${f.severity} ${f.code} ${f.subject}: ${f.message}`)
            .join("\n");
          const eligibility = model.nodeEligible
            ? `Node ${opts.node} is eligible`
            : `Node ${opts.node} is not eligible (/healthz answers 503): ${model.ineligibleReason}`;
          if (eligibility !== lastEligibility) {
            lastEligibility = eligibility;
            log(eligibility, "node_eligibility", model.nodeEligible ? "eligible" : "ineligible");
          }
          if (findings !== lastFindings) {
            lastFindings = findings;
            obs.observer.setFindings(model.findings);
          }
          families = model.families;
          await servers.update(model);
          if (opts.dataplane === "userspace") {
            const snap = opts.loopback ? loopbackSnapshot(read.snapshot).snapshot : read.snapshot;
            const address =
              serviceHost ??
              snap.nodes
                .find((n) => n.metadata.name === opts.node)
                ?.status?.addresses?.find((a) => a.type === "InternalIP")?.address;
            if (address && !proxy) {
              proxy = new NodeProxy({
                node: opts.node,
                address,
                seed: 0x5eed,
                acceptProxyProtocol: true,
                sendProxyProtocol: opts.proxyProtocol ?? false,
              });
              log(`userspace data plane: nodePorts on ${address}`, "dataplane_started");
            }
            if (!address)
              log(
                `userspace data plane: Node ${opts.node} has no InternalIP; pass --bind-address`,
                "dataplane_not_started",
                "no_address",
              );
            for (const e of (await proxy?.update(nodePortRoutes(snap, opts.node))) ?? [])
              obs.logger.log("error", { event: "dataplane_update", reason: "failed", node: opts.node }, e);
          }
          if (dnat !== "failed") for (const f of families) servers.markUpdated(f);
        },
      });
      const where = servers.addresses();
      log(
        `serving /healthz and /livez on ${opts.healthzBindAddress}${where.healthz ? "" : " (not yet: see above)"}; ` +
          `${where.services.size} Service health server(s)`,
        "serving",
      );
      await new Promise<void>((resolve) => {
        if (signal.aborted) resolve();
        else signal.addEventListener("abort", () => resolve(), { once: true });
      });
      await source.close();
      await proxy?.close();
      await servers.close();
      await obs.close();
      log("stopped", "stopped");
    });
  // kube-proxy's metrics address (--metrics-bind-address) is 127.0.0.1:10249: same place
  addObservabilityOptions(command, "127.0.0.1:10249");
}

/** `--decap` without `--manifests`: re-applies the decapsulation side every `periodMs` until
 * the signal; logs a failure once per distinct message and a repair when it created a device. */
async function keepDecap(
  decap: Encap,
  procSys: string,
  periodMs: number,
  signal: AbortSignal,
  log: (line: string, reason: string) => void,
): Promise<void> {
  let lastError = "";
  const tick = async () => {
    try {
      const done = await ensureDecap(decap, { procSys });
      if (done.created.length > 0)
        log(`decapsulation repaired: created ${done.created.join(", ")}`, "repaired");
      for (const n of done.notes) log(n, "sysctl");
      lastError = "";
    } catch (e) {
      const message = `tunnel_failed: ${(e as Error).message}`;
      if (message !== lastError) log(message, "failed");
      lastError = message;
    }
  };
  log(`decapsulation only (no --manifests): checked every ${periodMs / 1000} s`, "started");
  const timer = setInterval(() => void tick(), periodMs);
  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    else signal.addEventListener("abort", () => resolve(), { once: true });
  });
  clearInterval(timer);
}
