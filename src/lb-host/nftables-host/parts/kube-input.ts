/**
 * Kubernetes mode's input (cli/lb-kube.ts): the source's reads, prepared into the LB's
 * snapshot (VIPs from Service status only), planned and handed to the data plane. Started
 * after the data plane; its first read is not awaited (`--once` waits for it, racing the
 * shutdown signal). While the API server is away the kernel keeps the last table
 * (docs/kubernetes.md). Undo: closes the source.
 */
import type { KubeLbRun } from "../../../cli/lb-nftables.ts";
import { planSnapshot } from "../../../plan/planner.ts";
import type { LbHostPart, Undo } from "../../lb-host.ts";
import type { LbController } from "../../nftables/lb-controller.ts";
import type { PlannedRead } from "./planned-read.ts";

export class KubeInput implements LbHostPart {
  readonly name = "input";
  /** the source's first read; set by start */
  first: Promise<void> = Promise.resolve();

  constructor(
    readonly kube: KubeLbRun,
    readonly controller: LbController,
    readonly planned: PlannedRead,
    readonly options: { readonly once: boolean; readonly changed: () => void },
  ) {}

  start(): Undo {
    const { kube, controller, options } = this;
    this.first = kube.source.start({
      onChange: options.changed,
      onRead: (read) => {
        if (!read.ok) return;
        const next = kube.prepare(read);
        const plans = planSnapshot(next.snapshot, { vipSource: "status" }).plans;
        this.planned(next.snapshot, plans, false);
        controller.setSnapshot(next.snapshot, next.degraded, !options.once);
      },
    });
    return () => kube.source.close();
  }
}
