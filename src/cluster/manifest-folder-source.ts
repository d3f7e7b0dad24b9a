/**
 * Adapter: a manifest folder (or several files and folders, as `passlb lb -f` takes them)
 * as a live source of Snapshots. Reads the paths now, again
 * shortly after anything in it changes, and at the latest `rereadMs` (the agent's sync
 * period) after the previous read whatever happens. Changes are found by polling the files'
 * names, sizes and modification times every `pollMs` (watch-manifests.ts's signature), not
 * with fs.watch: Node 20's recursive fs.watch on Linux watches each file's inode, so after a
 * file is replaced by a rename (how editors, `kubectl`-style tools and passlb's own lab
 * write files) later changes to it went unseen until the period re-read. A detected change
 * is debounced (`debounceMs`, restarted by each change) so a burst of writes is read once.
 * The poll and the reads are two CoalescingRunners (coalescing-runner.ts): reads never
 * overlap; a change during a read causes one more read.
 *
 * Each read reports either a decoded Snapshot or the problems that stopped it (unreadable
 * path, invalid YAML, invalid objects, each naming its file); keeping the last good snapshot
 * is the consumer's decision. Decoding stays in the pure core (k8s/decode.ts). A path `-`
 * is stdin (manifest-files.ts): read through `readStdin`, which the caller makes return the
 * same text on every read (stdin can be read once; the other paths are still watched).
 */
import { type Clock, realClock } from "../health/clock.ts";
import { decodeDocuments, formatProblem } from "../k8s/decode.ts";
import { CoalescingRunner, type RunReason } from "./coalescing-runner.ts";
import { readManifests } from "./manifest-files.ts";
import type { SnapshotSource, SourceHandlers, SourceRead } from "./snapshot-source.ts";
import { manifestSignature } from "./watch-manifests.ts";

/** A folder read is all or nothing: any problem makes it not ok (the agent and `passlb lb`
 * keep their last good state then). */
export type FolderRead = SourceRead;
export type FolderHandlers = SourceHandlers;

export interface FolderOptions {
  /** a folder, or files and folders in order */
  readonly path: string | readonly string[];
  /** the text of `-` (default: none) */
  readonly readStdin?: () => Promise<string>;
  readonly rereadMs: number;
  readonly debounceMs: number;
  /** how often the files' signature is compared (default 500 ms) */
  readonly pollMs?: number;
  /** default: the real clock */
  readonly clock?: Clock;
}

export class ManifestFolderSource implements SnapshotSource {
  readonly #options: FolderOptions;
  #poll: CoalescingRunner | undefined;
  #reads: CoalescingRunner | undefined;
  #signature = "";
  #closed = false;
  #handlers: FolderHandlers | undefined;

  constructor(options: FolderOptions) {
    this.#options = options;
  }

  /** Starts watching and performs the first read; resolves when that read was handled. */
  async start(handlers: FolderHandlers): Promise<void> {
    this.#handlers = handlers;
    this.#signature = await manifestSignature(this.#paths);
    if (this.#closed) return;
    const clock = this.#options.clock ?? realClock();
    this.#poll = new CoalescingRunner(() => this.#checkSignature(), {
      clock,
      maxIntervalMs: this.#options.pollMs ?? 500,
    });
    this.#reads = new CoalescingRunner((reason) => this.#read(reason), {
      clock,
      delayMs: this.#options.debounceMs,
      maxDelayMs: Number.POSITIVE_INFINITY,
      maxIntervalMs: this.#options.rereadMs,
    });
    this.#reads.run(0);
    await this.#reads.idle();
  }

  get #paths(): readonly string[] {
    const { path } = this.#options;
    return typeof path === "string" ? [path] : path;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await Promise.all([this.#poll?.stop(), this.#reads?.stop()]);
  }

  async #checkSignature(): Promise<void> {
    if (this.#closed) return;
    const now = await manifestSignature(this.#paths);
    if (now === this.#signature || this.#closed) return;
    this.#signature = now;
    this.#handlers?.onChange();
    this.#reads?.run();
  }

  async #read(reason: RunReason): Promise<void> {
    if (this.#closed) return;
    if (reason === "periodic") this.#handlers?.onChange();
    const read = await readFolder(this.#paths, this.#options.readStdin ?? (async () => ""));
    if (this.#closed) return;
    await this.#handlers?.onRead(read);
  }
}

async function readFolder(paths: readonly string[], readStdin: () => Promise<string>): Promise<FolderRead> {
  try {
    const read = await readManifests(paths, readStdin);
    const decoded = decodeDocuments(read.documents);
    const problems = [...read.problems.map(formatProblem), ...decoded.problems.map(formatProblem)];
    if (problems.length > 0) return { ok: false, problems };
    return { ok: true, snapshot: decoded.snapshot, notices: decoded.notices, problems: [] };
  } catch (e) {
    return { ok: false, problems: [(e as Error).message] };
  }
}
