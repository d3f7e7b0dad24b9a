/**
 * What the nftables LbController says (nftables/lb-controller.ts LbEvent), turned into the
 * host's lines, metrics and dashboard events, and into the pass bookkeeping (pass-book.ts):
 * a kept Service, the outcome of a pass, the first sync; a committed pass also reaches the
 * XDP fast path. A retried failure repeats its message: one dashboard event until it
 * changes.
 */
import type { HealthLookup, ServiceForwarding } from "../../../forwarding/forwarding-state.ts";
import type { FastPath } from "../../fast-path.ts";
import type { LbEvent } from "../../nftables/lb-controller.ts";
import type { LbHostSinks } from "../lb-host-sinks.ts";
import type { PassBook } from "../pass-book.ts";

export interface LbEventLogOptions {
  readonly book: PassBook;
  readonly forwarding: () => readonly ServiceForwarding[];
  readonly fastPath: FastPath | undefined;
  /** the prober's verdicts, for the dashboard's forwarding view */
  readonly lookup: HealthLookup | undefined;
  readonly now: () => number;
}

export function lbEventLog(o: LbEventLogOptions, sinks: LbHostSinks): (e: LbEvent) => void {
  const { say, obs } = sinks;
  let lastNote = "";
  return (e) => {
    say(`passlb lb: ${describeLbEvent(e)}`);
    if (e.kind === "kept_last_good") o.book.kept(e.service);
    if (e.kind === "synced" || e.kind === "sync_failed") o.book.passEnded(e.kind === "synced");
    if (e.kind === "synced") o.fastPath?.synced(o.forwarding());
    if (!obs) return;
    if (e.kind === "drift") obs.metrics.driftRepair("nftables", e.scope);
    if (e.kind === "synced") {
      if (e.mode !== "noop") obs.metrics.nftTransaction(e.mode, true, e.ms / 1000);
      obs.metrics.reconcile("lb", "ok");
      const seconds = o.book.programmed(o.now());
      if (seconds !== undefined) obs.metrics.programmed("nftables", seconds);
      obs.observer.forwarding(o.forwarding(), o.lookup);
    } else if (e.kind === "sync_failed") {
      obs.metrics.reconcile("lb", "retry");
      obs.observer.note({ event: "sync_failed", severity: "warning", message: describeLbEvent(e) });
    } else if (e.kind !== "adopted" && describeLbEvent(e) !== lastNote) {
      lastNote = describeLbEvent(e);
      obs.observer.note({
        event: e.kind,
        severity: e.kind === "flows_released" ? "info" : "warning",
        message: lastNote,
      });
    }
  };
}

export function describeLbEvent(e: LbEvent): string {
  switch (e.kind) {
    case "synced":
      return `${e.mode} sync, ${e.bytes} bytes, ${e.ms.toFixed(1)} ms`;
    case "sync_failed":
      return `sync failed (retry in ${e.retryInMs} ms): ${(e.error as Error).message ?? String(e.error)}`;
    case "adopted":
      return `adopted the existing table (${e.sets} sets/maps, ${e.chains} chains) without a flush`;
    case "drift":
      if (e.scope === "flows") return `flow table drifted (${e.what}); restoring it`;
      return e.scope === "table"
        ? `kernel table drifted (${e.what}); full sync`
        : `policy routing drifted (${e.what}); installing the routes again`;
    case "routes_failed":
      return `policy routes not fully installed (retrying): ${(e.error as Error).message}`;
    case "kept_last_good":
      return `${e.service}: kept its last good data plane (${e.reason})`;
    case "flows_released":
      return `${e.service}: released ${e.flows} pinned flow(s) of ${e.node}, which left its table`;
    case "flows_release_failed":
      return `${e.service}: could not release the pinned flows of ${e.node}: ${(e.error as Error).message}`;
  }
}
