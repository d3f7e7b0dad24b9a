/**
 * Adapter: watches manifest paths by polling — every `intervalMs` it lists the files again
 * (manifest-files.ts rules) and compares names, sizes and modification times; any
 * difference calls `onChange`. Polling instead of fs.watch: it behaves the same on every
 * file system, catches editors that replace files, and costs a few stat calls a second.
 * Stops when `signal` aborts. Does not read or decode the files (the caller does).
 */
import { stat } from "node:fs/promises";
import { listManifestFiles } from "./manifest-files.ts";

export async function manifestSignature(paths: readonly string[]): Promise<string> {
  const parts: string[] = [];
  for (const path of paths) {
    let files: string[];
    try {
      files = await listManifestFiles(path);
    } catch {
      parts.push(`${path}:missing`);
      continue;
    }
    for (const f of files) {
      try {
        const s = await stat(f);
        parts.push(`${f}:${s.size}:${s.mtimeMs}`);
      } catch {
        parts.push(`${f}:gone`);
      }
    }
  }
  return parts.join("\n");
}

export function watchManifests(
  paths: readonly string[],
  options: { intervalMs: number; signal: AbortSignal; onChange: () => void; initial: string },
): void {
  let last = options.initial;
  const tick = async () => {
    if (options.signal.aborted) return;
    const now = await manifestSignature(paths);
    if (now !== last) {
      last = now;
      options.onChange();
    }
    if (!options.signal.aborted) timer = setTimeout(tick, options.intervalMs);
  };
  let timer = setTimeout(tick, options.intervalMs);
  options.signal.addEventListener("abort", () => clearTimeout(timer), { once: true });
}
