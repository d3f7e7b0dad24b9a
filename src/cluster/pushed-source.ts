/**
 * A `SnapshotSource` (snapshot-source.ts) its owner pushes Snapshots into, instead of one
 * that reads a folder or the API server: `passlb up` reads and rewrites its folder itself
 * and feeds each good Snapshot to its node agents (quickstart/quickstart-agent.ts) and to
 * its LB host (quickstart/quickstart-run.ts) through one of these. Every push is one good,
 * clean read; `start` does not wait for one.
 *
 * Deliberately not here: reading, rewriting or checking anything — the owner pushes only
 * what it already accepted, so the consumer never sees a read that is not ok.
 */
import type { Snapshot } from "../k8s/snapshot.ts";
import type { SnapshotSource, SourceHandlers } from "./snapshot-source.ts";

export class PushedSource implements SnapshotSource {
  #handlers: SourceHandlers | undefined;

  async start(handlers: SourceHandlers): Promise<void> {
    this.#handlers = handlers;
  }

  /** a change was seen and a push will follow (the consumer's programming-latency clock starts) */
  changed(): void {
    this.#handlers?.onChange();
  }

  /** delivers `snapshot` as one good read; resolves when the consumer handled it */
  async push(snapshot: Snapshot): Promise<void> {
    this.#handlers?.onChange();
    await this.#handlers?.onRead({ ok: true, snapshot, notices: [], problems: [] });
  }

  async close(): Promise<void> {
    this.#handlers = undefined;
  }
}
