/**
 * Adapter: a manifest folder as a live source of Snapshots. Reads the folder now, again
 * shortly after anything in it changes (fs.watch, debounced) and on a fixed period as a
 * fallback for changes a watch misses (network filesystems, editors that replace files).
 * Reads never overlap; a change during a read causes one more read.
 *
 * Each read reports either a decoded Snapshot or the problems that stopped it (unreadable
 * path, invalid YAML, invalid objects); keeping the last good snapshot is the consumer's
 * decision. Decoding stays in the pure core (k8s/decode.ts).
 */
import { type FSWatcher, watch } from "node:fs";
import { decodeDocuments, formatProblem } from "../k8s/decode.ts";
import { readManifests } from "./manifest-files.ts";
import type { SnapshotSource, SourceHandlers, SourceRead } from "./snapshot-source.ts";

/** A folder read is all or nothing: any problem makes it not ok (the agent and `passlb lb`
 * keep their last good state then). */
export type FolderRead = SourceRead;
export type FolderHandlers = SourceHandlers;

export interface FolderOptions {
  readonly path: string;
  readonly rereadMs: number;
  readonly debounceMs: number;
}

export class ManifestFolderSource implements SnapshotSource {
  readonly #options: FolderOptions;
  #watcher: FSWatcher | undefined;
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
    try {
      this.#watcher = watch(this.#options.path, { recursive: true }, () => this.#changed());
      this.#watcher.on("error", () => {}); // the periodic re-read still runs
    } catch {
      this.#watcher = undefined; // a missing folder: the reads report it
    }
    this.#period = setInterval(() => {
      handlers.onChange();
      void this.#read();
    }, this.#options.rereadMs);
    await this.#read();
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#watcher?.close();
    if (this.#debounce) clearTimeout(this.#debounce);
    if (this.#period) clearInterval(this.#period);
    await this.#reading;
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
