/**
 * The data plane part: the nftables LbController (nftables/lb-controller.ts: render, `nft`,
 * policy routes, drift check) with the host's health, generations and conntrack driver.
 * Start says how packets reach the nodes (encap mode), creates the repair counters at 0
 * (so an alert's increase() counts the first repair) and starts the controller, which
 * adopts the table in place. Undo: its timers and the pass under way; the kernel keeps
 * forwarding with the last table (docs/dataplane-nftables.md).
 */
import { formatCidr } from "../../../net/ip.ts";
import type { FastPath } from "../../fast-path.ts";
import type { LbHostPart, Undo } from "../../lb-host.ts";
import { LbController, type LbControllerOptions } from "../../nftables/lb-controller.ts";
import { describePath, type Forward } from "../../routing/encap.ts";
import type { LbHostSinks } from "../lb-host-sinks.ts";
import type { PassBook } from "../pass-book.ts";
import { lbEventLog } from "./lb-event-log.ts";

export type DataplanePartOptions = Omit<LbControllerOptions, "onEvent" | "forward"> & {
  readonly forward: Forward;
  readonly book: PassBook;
  readonly fastPath: FastPath | undefined;
};

export class DataplanePart implements LbHostPart {
  readonly name = "dataplane";
  readonly controller: LbController;
  readonly #forward: Forward;
  readonly #sinks: LbHostSinks;

  constructor(options: DataplanePartOptions, sinks: LbHostSinks) {
    const { book, fastPath, ...controllerOptions } = options;
    this.#forward = options.forward;
    this.#sinks = sinks;
    const onEvent = lbEventLog(
      {
        book,
        forwarding: () => this.controller.forwarding,
        fastPath,
        lookup: options.health?.lookup,
        now: () => performance.now(),
      },
      sinks,
    );
    this.controller = new LbController({ ...controllerOptions, onEvent });
  }

  async start(): Promise<Undo> {
    const { say, obs } = this.#sinks;
    const forward = this.#forward;
    if (forward.mode === "encap")
      say(
        `passlb lb: forwarding: ${describePath(forward, "encap")} (mtu ${forward.encap.mtu}); routed directly: ${forward.direct.map(formatCidr).join(", ") || "none"}`,
      );
    obs?.observer.forwardMode(forward);
    for (const what of ["table", "routes"]) obs?.metrics.driftRepair("nftables", what, 0);
    await this.controller.start();
    return () => this.controller.stop();
  }
}
