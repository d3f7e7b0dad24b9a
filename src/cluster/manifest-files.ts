/**
 * Adapter: reads manifest paths (files, directories recursively, `-` for stdin) into
 * documents. Directories contribute `*.yaml`, `*.yml` and `*.json` files in name order,
 * hidden entries skipped. Parsing and decoding stay in the pure core (k8s/).
 */
import { readdir, readFile, stat } from "node:fs/promises";
import { join } from "node:path";
import { PasslbError } from "../errors.ts";
import { type Document, type DocumentProblem, parseDocuments } from "../k8s/documents.ts";

const MANIFEST_FILE = /\.(ya?ml|json)$/i;

export interface ManifestRead {
  readonly documents: Document[];
  readonly problems: DocumentProblem[];
  /** every file read, for watchers */
  readonly files: string[];
}

export async function listManifestFiles(path: string): Promise<string[]> {
  let info: Awaited<ReturnType<typeof stat>>;
  try {
    info = await stat(path);
  } catch (cause) {
    throw new PasslbError("input_unreadable", `${path}: no such file or directory`, { cause });
  }
  if (!info.isDirectory()) return [path];
  const out: string[] = [];
  const entries = (await readdir(path, { withFileTypes: true })).sort((a, b) => a.name.localeCompare(b.name));
  for (const entry of entries) {
    if (entry.name.startsWith(".")) continue;
    const child = join(path, entry.name);
    if (entry.isDirectory()) out.push(...(await listManifestFiles(child)));
    else if (MANIFEST_FILE.test(entry.name)) out.push(child);
  }
  return out;
}

export async function readManifests(
  paths: readonly string[],
  readStdin: () => Promise<string>,
): Promise<ManifestRead> {
  const documents: Document[] = [];
  const problems: DocumentProblem[] = [];
  const files: string[] = [];
  for (const path of paths) {
    const sources = path === "-" ? ["-"] : await listManifestFiles(path);
    for (const source of sources) {
      let text: string;
      try {
        text = source === "-" ? await readStdin() : await readFile(source, "utf8");
      } catch (cause) {
        throw new PasslbError("input_unreadable", `${source}: cannot be read: ${(cause as Error).message}`, {
          cause,
        });
      }
      if (source !== "-") files.push(source);
      const parsed = parseDocuments(source === "-" ? "<stdin>" : source, text);
      documents.push(...parsed.documents);
      problems.push(...parsed.problems);
    }
  }
  return { documents, problems, files };
}
