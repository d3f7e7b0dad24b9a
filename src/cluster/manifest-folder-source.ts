/**
 * Adapter: a manifest folder as a live source of Snapshots. Reads the folder now, again
 * shortly after anything in it changes, and on a fixed period (`rereadMs`, the agent's
 * sync period) whatever happens. Changes are found by polling the files' names, sizes and
 * modification times every `pollMs` (watch-manifests.ts's signature), not with fs.watch:
 * Node 20's recursive fs.watch on Linux watches each file's inode, so after a file is
 * replaced by a rename (how editors, `kubectl`-style tools and passlb's own lab write
 * files) later changes to it went unseen until the period re-read. A detected change is
 * debounced (`debounceMs`) so a burst of writes is read once.
 * Reads never overlap; a change during a read causes one more read.
 *
 * Each read reports either a decoded Snapshot or the problems that stopped it (unreadable
 * path, invalid YAML, invalid objects); keeping the last good snapshot is the consumer's
 * decision. Decoding stays in the pure core (k8s/decode.ts).
 */
import { decodeDocuments, formatProblem } from "../k8s/decode.ts";
import { readManifests } from "./manifest-files.ts";
import type { SnapshotSource, SourceHandlers, SourceRead } from "./snapshot-source.ts";
import { manifestSignature } from "./watch-manifests.ts";

/** A folder read is all or nothing: any problem makes it not ok (the agent and `passlb lb`
 * keep their last good state then). */
export type FolderRead = SourceRead;
export type FolderHandlers = SourceHandlers;

export interface FolderOptions {
  readonly path: string;
  readonly rereadMs: number;
  readonly debounceMs: number;
  /** how often the files' signature is compared (default 500 ms) */
  readonly pollMs?: number;
}

export class ManifestFolderSource implements SnapshotSource {
  readonly #options: FolderOptions;
  #poll: ReturnType<typeof setInterval> | undefined;
  #signature = "";
  #polling = false;
  #debounce: ReturnType<typeof setTimeout> | undefined;
  #period: ReturnType<typeof setInterval> | undefined;
  #reading: Promise<void> | undefined;
  #again = false;
  #closed = false;
  #handlers: FolderHandlers | undefined;

  constructor(options: FolderOptions) {
    this.#options = options;
  }

  /** Starts watching and performs the first read; resolves when that read was handled. */
  async start(handlers: FolderHandlers): Promise<void> {
    this.#handlers = handlers;
    this.#signature = await manifestSignature([this.#options.path]);
    this.#poll = setInterval(() => void this.#checkSignature(), this.#options.pollMs ?? 500);
    this.#period = setInterval(() => {
      handlers.onChange();
      void this.#read();
    }, this.#options.rereadMs);
    await this.#read();
  }

  async close(): Promise<void> {
    this.#closed = true;
    if (this.#poll) clearInterval(this.#poll);
    if (this.#debounce) clearTimeout(this.#debounce);
    if (this.#period) clearInterval(this.#period);
    await this.#reading;
  }

  async #checkSignature(): Promise<void> {
    if (this.#polling || this.#closed) return;
    this.#polling = true;
    try {
      const now = await manifestSignature([this.#options.path]);
      if (now === this.#signature || this.#closed) return;
      this.#signature = now;
      this.#changed();
    } finally {
      this.#polling = false;
    }
  }

  #changed(): void {
    if (this.#closed) return;
    this.#handlers?.onChange();
    if (this.#debounce) clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => {
      this.#debounce = undefined;
      void this.#read();
    }, this.#options.debounceMs);
  }

  #read(): Promise<void> {
    if (this.#reading) {
      this.#again = true;
      return this.#reading;
    }
    this.#reading = (async () => {
      do {
        this.#again = false;
        if (this.#closed) return;
        const read = await readFolder(this.#options.path);
        if (this.#closed) return;
        await this.#handlers?.onRead(read);
      } while (this.#again);
    })().finally(() => {
      this.#reading = undefined;
    });
    return this.#reading;
  }
}

async function readFolder(path: string): Promise<FolderRead> {
  try {
    const read = await readManifests([path], async () => "");
    const decoded = decodeDocuments(read.documents);
    const problems = [...read.problems.map(formatProblem), ...decoded.problems.map(formatProblem)];
    if (problems.length > 0) return { ok: false, problems };
    return { ok: true, snapshot: decoded.snapshot, notices: decoded.notices, problems: [] };
  } catch (e) {
    return { ok: false, problems: [(e as Error).message] };
  }
}
