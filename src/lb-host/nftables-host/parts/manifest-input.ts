/**
 * The manifests input (-f/--manifests): read once before the data plane starts — unreadable
 * input then stops the host with exit 2 —, handed to the data plane once it runs, and (not
 * with `--once`) polled for changes; a read with problems keeps the last good state of the
 * Services in error (docs/dataplane-nftables.md). Three parts of one input: `firstRead`,
 * `feed`, `watch`; the watch's undo stops polling.
 */
import { readManifests } from "../../../cluster/manifest-files.ts";
import { manifestSignature, watchManifests } from "../../../cluster/watch-manifests.ts";
import { decodeDocuments, formatProblem } from "../../../k8s/decode.ts";
import type { Snapshot } from "../../../k8s/snapshot.ts";
import { planSnapshot } from "../../../plan/planner.ts";
import type { LbHostPart } from "../../lb-host.ts";
import type { LbController } from "../../nftables/lb-controller.ts";
import { StartRefused } from "../start-refused.ts";
import type { PlannedRead } from "./planned-read.ts";

interface Read {
  readonly snapshot: Snapshot;
  readonly degraded: boolean;
}

export interface ManifestInputOptions {
  readonly paths: readonly string[];
  readonly pollMs: number;
  readonly once: boolean;
  readonly readStdin: () => Promise<string>;
  readonly say: (line: string) => void;
}

export class ManifestInput {
  readonly #o: ManifestInputOptions;
  readonly #controller: LbController;
  readonly #planned: PlannedRead;
  #first: Read | undefined;

  constructor(options: ManifestInputOptions, controller: LbController, planned: PlannedRead) {
    this.#o = options;
    this.#controller = controller;
    this.#planned = planned;
  }

  /** the first read, before the data plane starts */
  firstRead(): LbHostPart {
    return {
      name: "manifests",
      start: async () => {
        this.#first = await this.#load();
        if (!this.#first) throw new StartRefused(2, undefined);
        return undefined;
      },
    };
  }

  /** the first read to the running data plane */
  feed(): LbHostPart {
    return {
      name: "input",
      start: () => {
        const first = this.#first!;
        this.#controller.setSnapshot(first.snapshot, first.degraded, !this.#o.once);
        return undefined;
      },
    };
  }

  /** every change of the files, read again */
  watch(): LbHostPart {
    return {
      name: "watch",
      start: async () => {
        const { paths, pollMs } = this.#o;
        const stop = new AbortController();
        watchManifests([...paths], {
          intervalMs: pollMs,
          signal: stop.signal,
          initial: await manifestSignature([...paths]),
          onChange: () => {
            void this.#load().then((next) => {
              if (next) this.#controller.setSnapshot(next.snapshot, next.degraded);
            });
          },
        });
        return () => stop.abort();
      },
    };
  }

  async #load(): Promise<Read | undefined> {
    const { say } = this.#o;
    try {
      const read = await readManifests([...this.#o.paths], this.#o.readStdin);
      const decoded = decodeDocuments(read.documents);
      const problems = [...read.problems.map(formatProblem), ...decoded.problems.map(formatProblem)];
      for (const p of problems) say(`passlb lb: input problem: ${p}`);
      const plans = planSnapshot(decoded.snapshot).plans;
      this.#planned(decoded.snapshot, plans, true);
      return { snapshot: decoded.snapshot, degraded: problems.length > 0 };
    } catch (e) {
      say(`passlb lb: ${(e as Error).message}`);
      return undefined;
    }
  }
}
