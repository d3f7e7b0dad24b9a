/**
 * Adapter: one node's agent inside `passlb up` — a `NodeAgent` (src/node-agent/node-agent.ts)
 * with the userspace node proxy and the kube-proxy-compatible health servers on the
 * node's loopback address, fed the quickstart's own Snapshots (already loopback-rewritten)
 * through a `PushedSource` (cluster/pushed-source.ts) instead of reading a folder. What goes wrong (a port that cannot bind, a proxy update
 * that fails) comes back from `apply` as error lines; the agent's info lines are not
 * shown (the live view shows the state instead).
 */
import { PushedSource } from "../cluster/pushed-source.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { AgentConfig } from "../node-agent/agent-config.ts";
import { buildNodeAgent } from "../node-agent/build-node-agent.ts";
import { hostDrivers } from "../node-agent/host-drivers.ts";
import type { NodeAgent } from "../node-agent/node-agent.ts";
import { NodeProxy, type NodeProxyEvent } from "../node-agent/node-proxy.ts";
import type { Finding } from "../plan/load-balancer-plan.ts";

/** kube-proxy's health port (--healthz-bind-address :10256), on each node's loopback address */
const PROXY_HEALTHZ_PORT = 10256;

export interface QuickstartAgentOptions {
  readonly node: string;
  /** the node's loopback address: the proxy's and the health servers' */
  readonly address: string;
  readonly seed: number;
  /** the health answers go stale (503) this long after the last sync, as kube-proxy's after 2 × its sync period */
  readonly healthTimeoutMs: number;
  readonly udpIdleMs: number;
  readonly now: () => number;
  readonly onProxyEvent: (e: NodeProxyEvent) => void;
  readonly onFinding: (f: Finding) => void;
}

export class QuickstartAgent {
  readonly address: string;
  readonly #agent: NodeAgent;
  readonly #input = new PushedSource();
  /** problems told since the last apply */
  readonly #errors: string[] = [];

  constructor(o: QuickstartAgentOptions) {
    this.address = o.address;
    const config: AgentConfig = {
      node: o.node,
      manifests: undefined,
      healthz: { host: o.address, port: PROXY_HEALTHZ_PORT },
      serviceHost: o.address,
      syncMs: o.healthTimeoutMs / 2,
      dataplane: "userspace",
      decap: undefined,
      procSys: "/proc/sys",
      loopback: false,
      sendProxyProtocol: true,
      seed: o.seed,
    };
    const drivers = {
      ...hostDrivers(),
      nodeProxy: (p: ConstructorParameters<typeof NodeProxy>[0]) =>
        new NodeProxy({ ...p, udpIdleMs: o.udpIdleMs, now: o.now, onEvent: o.onProxyEvent }),
    };
    this.#agent = buildNodeAgent(
      config,
      drivers,
      {
        log: (level, _event, _reason, line) => {
          if (level === "error") this.#errors.push(line);
        },
        finding: (f) => {
          this.#errors.push(`${f.subject}: ${f.message}`);
          o.onFinding(f);
        },
        setFindings: () => {},
      },
      { input: this.#input },
    );
  }

  start(): Promise<void> {
    return this.#agent.start();
  }

  /** Brings the proxy and the health answers to `snapshot`; the problems it met. */
  async apply(snapshot: Snapshot): Promise<string[]> {
    await this.#input.push(snapshot);
    return this.#errors.splice(0);
  }

  /** the folder is unchanged: the rules still match it, a successful sync */
  synced(): void {
    this.#agent.synced();
  }

  /** the folder changed but cannot be applied: the answers go stale unless it is fixed */
  queued(): void {
    this.#agent.parts.health?.queued();
  }

  stop(): Promise<void> {
    return this.#agent.stop();
  }
}
