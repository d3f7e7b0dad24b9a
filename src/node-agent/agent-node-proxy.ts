/**
 * `--dataplane userspace`: the node proxy (src/node-agent/node-proxy.ts) that
 * forwards every nodePort of the node to its pods, for hosts without kube-proxy (and
 * `passlb up`). It starts at the first good read that tells the node's address (the
 * `--bind-address`, else the Node's InternalIP) and then follows each read's routes
 * (node-port-routes.ts), after the loopback rewrite when the config asks for it.
 */

import type { Snapshot } from "../k8s/snapshot.ts";
import { nodePortRoutes } from "../lb-host/userspace/node-port-routes.ts";
import { loopbackSnapshot } from "../quickstart/loopback-rewrite.ts";
import type { AgentConfig } from "./agent-config.ts";
import type { AgentDrivers, NodeProxying } from "./agent-drivers.ts";
import type { AgentReporter } from "./agent-reporter.ts";

type ProxyConfig = Pick<AgentConfig, "node" | "serviceHost" | "loopback" | "sendProxyProtocol" | "seed">;

export class AgentNodeProxy {
  readonly #config: ProxyConfig;
  readonly #create: AgentDrivers["nodeProxy"];
  readonly #report: AgentReporter;
  #proxy: NodeProxying | undefined;

  constructor(config: ProxyConfig, create: AgentDrivers["nodeProxy"], report: AgentReporter) {
    this.#config = config;
    this.#create = create;
    this.#report = report;
  }

  async update(read: Snapshot): Promise<void> {
    const { node } = this.#config;
    const snap = this.#config.loopback ? loopbackSnapshot(read).snapshot : read;
    const address =
      this.#config.serviceHost ??
      snap.nodes
        .find((n) => n.metadata.name === node)
        ?.status?.addresses?.find((a) => a.type === "InternalIP")?.address;
    if (address && !this.#proxy) {
      this.#proxy = this.#create({
        node,
        address,
        seed: this.#config.seed,
        acceptProxyProtocol: true,
        sendProxyProtocol: this.#config.sendProxyProtocol,
      });
      this.#report.info(`userspace data plane: nodePorts on ${address}`, "dataplane_started");
    }
    if (!address)
      this.#report.info(
        `userspace data plane: Node ${node} has no InternalIP; pass --bind-address`,
        "dataplane_not_started",
        "no_address",
      );
    for (const e of (await this.#proxy?.update(nodePortRoutes(snap, node))) ?? [])
      this.#report.error(e, "dataplane_update", "failed");
  }

  async close(): Promise<void> {
    await this.#proxy?.close();
  }
}
