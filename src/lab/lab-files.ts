/**
 * The lab's files: where its state lives, the topology file read and decoded, and the
 * manifest folder the agents and the LB hosts watch (written atomically, file by file).
 */
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { stringify } from "yaml";
import { readManifests } from "../cluster/manifest-files.ts";
import { decodeDocuments } from "../k8s/decode.ts";
import type { Service } from "../k8s/objects.ts";
import { type LabLayout, labLayout } from "./lab-layout.ts";
import { labManifests } from "./lab-manifests.ts";
import { parseTopology, type Topology } from "./topology.ts";

export function defaultStateRoot(repoRoot: string): string {
  return process.getuid?.() === 0 ? "/run/passlb-lab" : join(repoRoot, ".passlb", "lab");
}

export function readTopologyFile(path: string): { topology: Topology; baseDir: string } {
  const read = parseTopology(readFileSync(path, "utf8"));
  if (!read.ok) throw new Error(`${path}: ${read.problems.join("; ")}`);
  return { topology: read.topology, baseDir: dirname(resolve(path)) };
}

/** Writes (or rewrites) the manifest folder the agents and the LB watch. */
export async function writeLabManifests(
  topology: Topology,
  baseDir: string,
  manifestsDir: string,
): Promise<LabLayout> {
  const layout = labLayout(topology);
  const paths = topology.services.map((p) => resolve(baseDir, p));
  const read = await readManifests(paths, async () => "");
  const keep = read.documents.filter((d) => {
    const kind = (d.value as { kind?: unknown } | null)?.kind;
    return kind === "Service" || kind === "PasslbConfig" || kind === "Namespace";
  });
  const decoded = decodeDocuments(keep);
  if (decoded.problems.length > 0 || read.problems.length > 0)
    throw new Error(
      `the services manifests have problems: ${JSON.stringify([...read.problems, ...decoded.problems])}`,
    );
  mkdirSync(manifestsDir, { recursive: true });
  writeLayoutManifests(
    manifestsDir,
    layout,
    keep.map((d) => d.value),
    decoded.snapshot.services,
  );
  return layout;
}

/**
 * Writes the folder for a layout: `serviceDocs` (Services, config, namespaces) as given,
 * the nodes, pods and EndpointSlices generated from the layout and `services`.
 */
export function writeLayoutManifests(
  dir: string,
  layout: LabLayout,
  serviceDocs: readonly unknown[],
  services: readonly Service[],
): void {
  const generated = labManifests(layout, services);
  writeManifestFiles(dir, [
    ["services.yaml", serviceDocs],
    ["nodes.yaml", generated.nodes],
    ["pods.yaml", generated.pods],
    ["endpointslices.yaml", generated.endpointSlices],
  ]);
}

/**
 * Writes manifest files into the folder the agents and the LB watch: each to a temporary
 * name first, then renamed, so a watcher never reads half a file.
 */
export function writeManifestFiles(dir: string, files: readonly [string, readonly unknown[]][]): void {
  for (const [file, objs] of files) {
    const tmp = join(dir, `.${file}.tmp`);
    writeFileSync(tmp, objs.map((o) => stringify(o)).join("---\n"));
    renameSync(tmp, join(dir, file));
  }
}
