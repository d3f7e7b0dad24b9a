/**
 * The live cluster as a Snapshot, read through kubectl: one `kubectl get
 * services,nodes,endpointslices,namespaces,pods -A -o json` and one `kubectl get
 * loadbalancerippools -o json`, decoded by the same code as `passlb plan -f` (the pools
 * become a PasslbConfig document, so they are validated the same way).
 *
 * Unlike a manifest folder, a live cluster is not the user's input to fix: an object that
 * does not decode is left out with a warning instead of failing the whole command.
 */
import { PasslbError } from "../errors.ts";
import { decodeDocuments, formatProblem } from "../k8s/decode.ts";
import { type Document, parseDocuments } from "../k8s/documents.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { poolsFromCluster } from "./ip-pools.ts";
import { type KubectlRunner, runAll } from "./kubectl-runner.ts";

export const CLUSTER_GET = ["get", "services,nodes,endpointslices,namespaces,pods", "-A", "-o", "json"];
export const POOLS_GET = ["get", "loadbalancerippools", "-o", "json"];

export interface ClusterSnapshot {
  readonly snapshot: Snapshot;
  /** objects left out and disabled pools, one line each */
  readonly warnings: readonly string[];
}

export function parseJsonList(args: readonly string[], text: string): unknown[] {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (e) {
    throw new PasslbError("kubectl_failed", `kubectl ${args.join(" ")} did not print JSON`, { cause: e });
  }
  const items = (value as { items?: unknown } | null)?.items;
  if (!Array.isArray(items))
    throw new PasslbError("kubectl_failed", `kubectl ${args.join(" ")} did not print a List`);
  return items;
}

export async function readClusterSnapshot(
  kubectl: KubectlRunner,
  options: { defaultClass: boolean; acceptClasses?: readonly string[] },
): Promise<ClusterSnapshot> {
  const [objectsText = "", poolsText = ""] = await runAll(kubectl, [CLUSTER_GET, POOLS_GET]);
  const source = `kubectl ${CLUSTER_GET.join(" ")}`;
  const parsed = parseDocuments(source, objectsText);
  if (parsed.problems.length > 0)
    throw new PasslbError("kubectl_failed", `${source} did not print JSON: ${parsed.problems[0]?.message}`);
  const pools = poolsFromCluster(parseJsonList(POOLS_GET, poolsText));
  const config: Document = {
    source: `kubectl ${POOLS_GET.join(" ")}`,
    index: 1,
    value: {
      apiVersion: "passlb.io/v1alpha1",
      kind: "PasslbConfig",
      metadata: { name: "cluster" },
      spec: {
        defaultClass: options.defaultClass,
        acceptClasses: [...(options.acceptClasses ?? [])],
        pools: pools.pools,
      },
    },
  };
  const decoded = decodeDocuments([...parsed.documents, config]);
  const warnings = [
    ...pools.problems.map((p) => `left out ${p}`),
    ...pools.disabled.map(
      (name) => `LoadBalancerIPPool ${name} is disabled: no addresses are assigned from it`,
    ),
    ...decoded.problems.map((p) => `left out: ${formatProblem(p)}`),
  ];
  return { snapshot: decoded.snapshot, warnings };
}
