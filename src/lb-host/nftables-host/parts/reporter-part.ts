/**
 * The reporter: every --counters-ms, the kernel's per-node and per-Service packets and bytes
 * (nftables/node-traffic.ts), the flow table's fill (paced: nftables/flow-table-usage.ts)
 * and conntrack's, into the metrics. A failed read is said and tried again next time.
 * Undo: the timer.
 */
import type { Observability } from "../../../cli/observability.ts";
import type { LbHostPart, Undo } from "../../lb-host.ts";
import { FlowUsagePacer } from "../../nftables/flow-table-usage.ts";
import type { LbController } from "../../nftables/lb-controller.ts";
import { nodeTrafficOf, serviceTrafficOf } from "../../nftables/node-traffic.ts";
import type { FlowTableConfig } from "../../nftables/render/flow-map.ts";
import type { NftablesLbHostDrivers } from "../lb-host-drivers.ts";

export interface ReporterPartOptions {
  readonly table: string;
  readonly flowTable: FlowTableConfig;
  readonly everyMs: number;
  readonly controller: LbController;
  readonly drivers: Pick<NftablesLbHostDrivers, "nft" | "flowTableUsage" | "conntrackUsage">;
}

export class ReporterPart implements LbHostPart {
  readonly name = "reporter";
  readonly #o: ReporterPartOptions;
  readonly #obs: Observability;
  readonly #say: (line: string) => void;
  readonly #flowPacer = new FlowUsagePacer(() => performance.now());

  constructor(options: ReporterPartOptions, obs: Observability, say: (line: string) => void) {
    this.#o = options;
    this.#obs = obs;
    this.#say = say;
  }

  start(): Undo {
    const timer = setInterval(() => void this.read(), this.#o.everyMs);
    timer.unref();
    return () => clearInterval(timer);
  }

  /** one round of reads */
  async read(): Promise<void> {
    const { controller, drivers, table, flowTable } = this.#o;
    const metrics = this.#obs.metrics;
    const state = controller.current;
    if (!state) return;
    try {
      const counters = await drivers.nft.counters(table);
      for (const t of nodeTrafficOf(state, controller.forwarding, counters))
        metrics.nodeTraffic(t.node, t.packets, t.bytes);
      for (const t of serviceTrafficOf(controller.forwarding, counters))
        metrics.serviceTraffic(t.service, t.packets, t.bytes);
      void this.#flowPacer
        .maybe(() => drivers.flowTableUsage(table, flowTable))
        .then(
          (usage) => {
            for (const u of usage ?? []) metrics.flowTable("nftables", u.family, u.entries, u.capacity);
          },
          (e) => this.#say(`passlb lb: reading the flow table failed: ${(e as Error).message}`),
        );
    } catch (e) {
      this.#say(`passlb lb: reading the node counters failed: ${(e as Error).message}`);
    }
    const usage = await drivers.conntrackUsage().catch(() => undefined);
    if (usage) metrics.conntrack(usage.entries, usage.max);
  }
}
