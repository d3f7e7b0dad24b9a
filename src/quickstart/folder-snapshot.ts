/**
 * Adapter: the folder `passlb up` runs, read once: its signature (names, sizes, times: what
 * the poll compares) and its decoded Snapshot, or the problems that stop it. A folder with
 * any problem gives no Snapshot: the caller keeps its last good state. And, in lab mode, what
 * the live view takes from the lab's own manifest folder (`readLabFolderView`).
 */
import { readManifests } from "../cluster/manifest-files.ts";
import { manifestSignature } from "../cluster/watch-manifests.ts";
import { decodeDocuments, formatProblem } from "../k8s/decode.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import type { LoadBalancerPlan } from "../plan/load-balancer-plan.ts";
import { planSnapshot } from "../plan/planner.ts";
import { serviceTargets } from "./lab-view.ts";

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

export interface LabFolderView {
  /** the plans, as the LB makes them from the same folder */
  readonly plans: readonly LoadBalancerPlan[];
  /** who serves which Service (lab-view.ts) */
  readonly targets: Map<string, Set<string>>;
  /** `namespace/pod` → its node */
  readonly podNodes: Map<string, string>;
}

/** The lab's manifest folder (written by the lab itself, so read without a problem check). */
export async function readLabFolderView(dir: string): Promise<LabFolderView> {
  const read = await readManifests([dir], async () => "");
  const decoded = decodeDocuments(read.documents);
  return {
    plans: planSnapshot(decoded.snapshot).plans,
    targets: serviceTargets(decoded.snapshot.endpointSlices),
    podNodes: new Map(
      decoded.snapshot.pods.map((p) => [
        `${p.metadata.namespace ?? "default"}/${p.metadata.name ?? ""}`,
        p.spec.nodeName ?? "",
      ]),
    ),
  };
}
