/**
 * What `passlb lb` (and any other consumer of cluster state) needs from a source: start it
 * with two handlers, close it. Two implementations: the manifest folder
 * (manifest-folder-source.ts) and the Kubernetes API (kube-source.ts); tests may write a
 * third in memory.
 *
 * Level-triggered: a read is always the whole current state, never a delta. `onChange`
 * says "something changed, a read is coming" as early as the source knows it (consumers
 * start their programming-latency clock there); `onRead` delivers the read, at most one at
 * a time (the source waits for the handler's promise). Keeping the last good state when a
 * read is not ok is the consumer's decision.
 */
import type { Snapshot } from "../k8s/snapshot.ts";

export type SourceRead =
  | {
      readonly ok: true;
      readonly snapshot: Snapshot;
      /** things worth a line, never errors (skipped kinds, Services without an address) */
      readonly notices: readonly string[];
      /**
       * objects left out of the snapshot because they failed decoding, one line each
       * (`Service ns/name: spec.ports[0].port: must be at least 1`); empty for a clean read.
       * A consumer should treat a snapshot with problems as degraded: what vanished from it
       * may only be broken, not deleted.
       */
      readonly problems: readonly string[];
    }
  | { readonly ok: false; readonly problems: readonly string[] };

export interface SourceHandlers {
  /** something changed and a read is coming */
  readonly onChange: () => void;
  readonly onRead: (read: SourceRead) => void | Promise<void>;
}

export interface SnapshotSource {
  /** Starts the source; resolves once the first read was handled (or the source was closed). */
  start(handlers: SourceHandlers): Promise<void>;
  /** Stops every timer and connection; resolves when no handler runs any more. */
  close(): Promise<void>;
}
