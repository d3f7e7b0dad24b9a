/**
 * Adapter: the folder `passlb up` runs, read once: its signature (names, sizes, times: what
 * the poll compares) and its decoded Snapshot, or the problems that stop it. A folder with
 * any problem gives no Snapshot: the caller keeps its last good state.
 */
import { readManifests } from "../cluster/manifest-files.ts";
import { manifestSignature } from "../cluster/watch-manifests.ts";
import { decodeDocuments, formatProblem } from "../k8s/decode.ts";
import type { Snapshot } from "../k8s/snapshot.ts";

export interface FolderSnapshot {
  readonly signature: string;
  readonly snapshot?: Snapshot;
  readonly errors: readonly string[];
}

export async function readFolderSnapshot(dir: string): Promise<FolderSnapshot> {
  let signature = "";
  try {
    signature = await manifestSignature([dir]);
    const read = await readManifests([dir], async () => "");
    const decoded = decodeDocuments(read.documents);
    const problems = [...read.problems.map(formatProblem), ...decoded.problems.map(formatProblem)];
    return problems.length > 0
      ? { signature, errors: problems }
      : { signature, snapshot: decoded.snapshot, errors: [] };
  } catch (e) {
    return { signature, errors: [(e as Error).message] };
  }
}
