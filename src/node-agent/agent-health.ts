/**
 * The agent's kube-proxy-compatible health answers (docs/health.md; kubernetes
 * pkg/proxy/healthcheck/service_health.go): `/healthz`, `/livez` and one
 * healthCheckNodePort server per externalTrafficPolicy Local Service, fed the health
 * model of each good read (state-agent-model.ts). Freshness follows the agent's syncs: a
 * change seen marks the node's families queued, a sync whose rules are in place marks them
 * updated; after the health timeout without one every answer is 503.
 */
import { agentHealthModel } from "../health/state-agent-model.ts";
import { emptySnapshot, type Snapshot } from "../k8s/snapshot.ts";
import type { IpFamily } from "../net/ip.ts";
import type { HealthServing } from "./agent-drivers.ts";
import type { AgentReporter } from "./agent-reporter.ts";

export class AgentHealth {
  readonly #servers: HealthServing;
  readonly #node: string;
  readonly #report: AgentReporter;
  #families: readonly IpFamily[] = ["IPv4"];

  constructor(servers: HealthServing, node: string, report: AgentReporter) {
    this.#servers = servers;
    this.#node = node;
    this.#report = report;
  }

  /** The answers of `snapshot` (undefined: what an unknown node answers, before any good read). */
  async update(snapshot: Snapshot | undefined): Promise<void> {
    const model = agentHealthModel(snapshot ?? emptySnapshot(), this.#node);
    if (snapshot) {
      this.#report.eligibility(this.#node, model.nodeEligible, model.ineligibleReason);
      this.#report.findings(model.findings);
      this.#families = model.families;
    }
    await this.#servers.update(model);
  }

  /** a change was seen and a sync is coming */
  queued(): void {
    for (const f of this.#families) this.#servers.markQueued(f);
  }

  /** a sync is done and its rules are in place */
  synced(): void {
    for (const f of this.#families) this.#servers.markUpdated(f);
  }

  /** how many servers listen: `/healthz` (bound or not) and the per-Service ones */
  listening(): { healthz: boolean; services: number } {
    const where = this.#servers.addresses();
    return { healthz: where.healthz !== undefined, services: where.services.size };
  }

  close(): Promise<void> {
    return this.#servers.close();
  }
}
