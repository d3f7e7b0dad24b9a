/**
 * A small passlb stack on loopback for the dashboard browser test when `passlb up` is not
 * available: the web scenario's nodes get 127/8 addresses, each runs the agent's real
 * health servers (agentHealthModel → HealthServers), the real prober probes them with a
 * short interval, and the Observer turns plans, prober events and forwarding state into
 * metrics, logs and the dashboard served by the real DashboardServer. No data plane: the
 * page's connection shares stay empty.
 */
import { readFileSync } from "node:fs";
import { serviceForwarding } from "../../src/dataplane/forwarding-state.ts";
import { realClock } from "../../src/health/clock.ts";
import { HealthServers } from "../../src/health/health-servers.ts";
import { ProbeConnections } from "../../src/health/probe-connections.ts";
import { Prober } from "../../src/health/prober.ts";
import { agentHealthModel } from "../../src/health/state-agent-model.ts";
import { backendHealth, type ProbeTarget, probeTargets } from "../../src/health/state-probe-targets.ts";
import { decodeDocuments } from "../../src/k8s/decode.ts";
import { parseDocuments } from "../../src/k8s/documents.ts";
import type { LoadBalancerPlan } from "../../src/plan/load-balancer-plan.ts";
import { planSnapshot } from "../../src/plan/planner.ts";
import { DashboardServer } from "../../src/web/dashboard-server.ts";
import { healthLookup } from "../../src/web/health-lookup.ts";
import { createLogger } from "../../src/web/logger.ts";
import { Metrics } from "../../src/web/metrics.ts";
import { Observer } from "../../src/web/observer.ts";

export interface MiniStackOptions {
  /** 127.X.Y. prefix of the node addresses */
  readonly prefix: string;
  readonly intervalMs: number;
  readonly timeoutMs: number;
  readonly log: (line: string) => void;
}

export class MiniStack {
  readonly plans: readonly LoadBalancerPlan[];
  readonly targets: readonly ProbeTarget[];
  readonly observer: Observer;
  readonly server: DashboardServer;
  readonly #agents = new Map<string, HealthServers>();
  readonly #o: MiniStackOptions;
  readonly #connections = new ProbeConnections();
  readonly #prober: Prober;
  readonly #snapshot;

  constructor(options: MiniStackOptions) {
    this.#o = options;
    const text = readFileSync(new URL("../fixtures/web/cluster.yaml", import.meta.url), "utf8").replace(
      /198\.51\.100\./g,
      options.prefix,
    );
    const decoded = decodeDocuments(parseDocuments("cluster.yaml", text).documents);
    if (decoded.problems.length > 0) throw new Error(JSON.stringify(decoded.problems));
    this.#snapshot = decoded.snapshot;
    this.plans = planSnapshot(decoded.snapshot).plans;
    this.targets = probeTargets(this.plans).map((t) => ({
      ...t,
      intervalMs: options.intervalMs,
      timeoutMs: options.timeoutMs,
    }));
    const clock = realClock();
    this.observer = new Observer({
      process: "passlb test stack",
      dataplane: "none",
      now: () => clock.now(),
      metrics: new Metrics(),
      logger: createLogger({ level: "info", component: "test", write: (l) => options.log(l.trimEnd()) }),
    });
    this.#prober = new Prober({
      clock,
      probe: async (target) => {
        const started = clock.now();
        const outcome = await this.#connections.probe(target);
        this.observer.probeFinished(
          target.users[0]?.node ?? target.address,
          outcome.ok,
          (clock.now() - started) / 1000,
        );
        return outcome;
      },
      forget: (key) => this.#connections.forget(key),
      seed: 9,
      maxConcurrent: 16,
      onEvent: (e) => {
        this.observer.proberEvent(e);
        this.#program();
      },
    });
    this.server = new DashboardServer({
      host: "127.0.0.1",
      port: 0,
      state: () => this.observer.state(),
      metrics: this.observer.metrics,
    });
  }

  get nodes(): string[] {
    return this.#snapshot.nodes.map((n) => n.metadata.name ?? "");
  }

  async start(): Promise<string> {
    for (const node of this.nodes) await this.startAgent(node);
    this.#program();
    this.#prober.setTargets(this.targets);
    return (await this.server.start()).url;
  }

  async startAgent(node: string): Promise<void> {
    const model = agentHealthModel(this.#snapshot, node);
    const host = this.#snapshot.nodes
      .find((n) => n.metadata.name === node)
      ?.status?.addresses?.find((a) => a.type === "InternalIP")?.address;
    if (!host?.startsWith("127.")) throw new Error(`node ${node} has no loopback address`);
    const servers = new HealthServers({
      clock: realClock(),
      healthz: { host, port: 10256 },
      serviceHost: host,
      healthTimeoutMs: 60_000,
      onFinding: (f) => this.#o.log(`agent ${node}: ${f.code} ${f.message}`),
    });
    await servers.update(model);
    servers.markUpdated("IPv4");
    this.#agents.set(node, servers);
  }

  async stopAgent(node: string): Promise<void> {
    const a = this.#agents.get(node);
    this.#agents.delete(node);
    await a?.close();
    this.observer.note({
      event: "agent_stopped",
      reason: "test",
      severity: "warning",
      node,
      message: `agent on ${node} stopped`,
    });
  }

  async close(): Promise<void> {
    await this.server.close();
    await this.#prober.close();
    this.#connections.close();
    await Promise.all([...this.#agents.values()].map((a) => a.close()));
    this.#agents.clear();
  }

  #program(): void {
    const health = healthLookup(backendHealth(this.plans, this.#prober?.states() ?? new Map()));
    this.observer.forwarding(
      this.plans.map((p) => serviceForwarding(p, health, { seed: 9 })),
      health,
    );
  }
}
