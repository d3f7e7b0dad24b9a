/**
 * Adapter: one `passlb agent` — the node side of passlb where no kube-proxy answers for
 * the node (standalone mode, the lab, `passlb up`), assembled from named parts:
 *
 * - **input**: the source of Snapshots (the manifest folder; `passlb up` pushes its own);
 * - **health** (agent-health.ts): `/healthz`, `/livez` and the healthCheckNodePort servers;
 * - **dnat** (`AgentDataplane`, src/node-agent/agent-dataplane.ts): `--dataplane nftables`,
 *   the `inet passlb-agent` table and, after each sync, the cleanup of stale UDP/SCTP
 *   conntrack entries (conntrack-cleanup.ts);
 * - **decap** (decap-keeper.ts): `--decap KIND`, the decapsulation device and sysctls;
 * - **proxy** (agent-node-proxy.ts): `--dataplane userspace`, the userspace node proxy;
 * - **report** (agent-reporter.ts): the lines, said once when they change.
 *
 * Each good read runs decap → dnat → health → proxy and, when the DNAT sync did not fail,
 * marks the health answers fresh (a failed sync is no sync: they go stale, as
 * kube-proxy's do). A read with problems keeps the last good state. Without an input the
 * agent is decapsulation alone, on its own timer.
 *
 * `start` records what it started; `stop` undoes it in reverse order (input, proxy,
 * health, decap timer); a failed `start` undoes what it had done and rethrows. The DNAT
 * table stays when the agent stops, as kube-proxy's rules do: established connections keep
 * flowing while the health checks take the node out of new traffic.
 *
 * Deliberately not here: flags (agent-config.ts), which parts a config gets
 * (build-node-agent.ts), logging format and signals (cli/agent-command.ts).
 */
import type { SnapshotSource, SourceRead } from "../cluster/snapshot-source.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { AgentDataplane } from "./agent-dataplane.ts";
import type { AgentHealth } from "./agent-health.ts";
import type { AgentNodeProxy } from "./agent-node-proxy.ts";
import type { AgentReporter } from "./agent-reporter.ts";
import type { DecapKeeper } from "./decap-keeper.ts";

export interface NodeAgentParts {
  readonly report: AgentReporter;
  readonly input: SnapshotSource | undefined;
  readonly health: AgentHealth | undefined;
  readonly dnat: AgentDataplane | undefined;
  readonly decap: DecapKeeper | undefined;
  readonly proxy: AgentNodeProxy | undefined;
  /** decapsulation alone: how often the decap part checks the node */
  readonly decapPeriodMs: number;
}

export class NodeAgent {
  readonly parts: NodeAgentParts;
  #lastGood: Snapshot | undefined;
  /** what start did, to be undone last-first */
  #undo: Array<{ readonly part: string; readonly undo: () => void | Promise<void> }> = [];
  #state: "new" | "started" | "stopped" = "new";

  constructor(parts: NodeAgentParts) {
    this.parts = parts;
  }

  /** the last good Snapshot the parts were given */
  get snapshot(): Snapshot | undefined {
    return this.#lastGood;
  }

  /** Starts every part, in order; resolves once the input's first read was applied. */
  async start(): Promise<void> {
    if (this.#state !== "new") throw new Error(`the node agent was ${this.#state} already`);
    this.#state = "started";
    const { decap, health, proxy, input } = this.parts;
    try {
      if (decap) await decap.start();
      if (decap && !input) {
        decap.every(this.parts.decapPeriodMs);
        this.#undo.push({ part: "decap", undo: () => decap.stop() });
      }
      if (health) this.#undo.push({ part: "health", undo: () => health.close() });
      if (proxy) this.#undo.push({ part: "proxy", undo: () => proxy.close() });
      if (input) {
        this.#undo.push({ part: "input", undo: () => input.close() });
        await input.start({ onChange: () => health?.queued(), onRead: (read) => this.#onRead(read) });
      }
    } catch (e) {
      await this.#unwind();
      this.#state = "stopped";
      throw e;
    }
  }

  /** Undoes what start did, last-first; a part that fails to stop does not keep the others running. */
  async stop(): Promise<void> {
    this.#state = "stopped";
    await this.#unwind();
  }

  /** the parts start left running, in the order stop would undo them */
  running(): string[] {
    return this.#undo.map((u) => u.part).reverse();
  }

  /** The rules still match the input (a periodic sync without a change): the answers are fresh. */
  synced(): void {
    this.parts.health?.synced();
  }

  async #unwind(): Promise<void> {
    const errors: unknown[] = [];
    for (const { undo } of this.#undo.splice(0).reverse())
      await Promise.resolve()
        .then(undo)
        .catch((e: unknown) => errors.push(e));
    if (errors.length > 0) throw new AggregateError(errors, "the node agent did not stop cleanly");
  }

  async #onRead(read: SourceRead): Promise<void> {
    const { report, health, dnat, decap, proxy } = this.parts;
    report.readProblems(read.ok ? undefined : read.problems, this.#lastGood !== undefined);
    if (!read.ok) {
      // first start with broken input: serve what an unknown node answers
      if (!this.#lastGood) await health?.update(undefined);
      return;
    }
    this.#lastGood = read.snapshot;
    await decap?.keep();
    const sync = await dnat?.update(read.snapshot);
    await health?.update(read.snapshot);
    await proxy?.update(read.snapshot);
    if (sync !== "failed") health?.synced();
  }
}
