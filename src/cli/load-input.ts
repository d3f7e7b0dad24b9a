/**
 * Reads `-f` paths into a decoded Snapshot for a CLI command. Prints every input problem
 * (file, document, object, field) to stderr and returns undefined when there are any: the
 * caller exits 2. Notices (skipped kinds) go to stderr too, unless quiet.
 */
import { readManifests } from "../cluster/manifest-files.ts";
import { PasslbError } from "../errors.ts";
import { decodeDocuments, formatProblem } from "../k8s/decode.ts";
import type { Document } from "../k8s/documents.ts";
import type { Snapshot } from "../k8s/snapshot.ts";

export interface CliIo {
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
  readonly readStdin: () => Promise<string>;
}

export async function loadSnapshot(
  paths: readonly string[],
  io: CliIo,
  options: {
    quiet?: boolean;
    /** documents of these kinds are the caller's (no "does not read this kind" notice) */
    ownKinds?: readonly string[];
    onDocuments?: (documents: readonly Document[]) => void;
  } = {},
): Promise<Snapshot | undefined> {
  if (paths.length === 0) {
    io.stderr("error: no manifests given: pass -f FILE|DIR|- (repeatable)\n");
    return undefined;
  }
  let read: Awaited<ReturnType<typeof readManifests>>;
  try {
    read = await readManifests(paths, io.readStdin);
  } catch (e) {
    if (e instanceof PasslbError) {
      io.stderr(`error: ${e.message}\n`);
      return undefined;
    }
    throw e;
  }
  const decoded = decodeDocuments(read.documents);
  options.onDocuments?.(read.documents);
  const own = (n: string) => (options.ownKinds ?? []).some((k) => n.includes(`: skipped ${k} `));
  if (!options.quiet) for (const n of decoded.notices) if (!own(n)) io.stderr(`notice: ${n}\n`);
  const problems = [...read.problems.map(formatProblem), ...decoded.problems.map(formatProblem)];
  if (problems.length > 0) {
    io.stderr(`error: the input has ${problems.length} problem${problems.length === 1 ? "" : "s"}:\n`);
    for (const p of problems) io.stderr(`  ${p}\n`);
    return undefined;
  }
  return decoded.snapshot;
}
