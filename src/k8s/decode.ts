/**
 * Documents in, a Snapshot out, with every problem listed at once. Each problem names the
 * source file, the document (and List item) number, the object (`Kind namespace/name`) and
 * the field path. Unknown kinds are notices, not errors. Pure: the caller reads the files.
 *
 * Decoding is all-or-nothing per object: an object with any problem is left out of the
 * snapshot (callers that must keep the last good state do so themselves).
 */
import type { Document, DocumentProblem } from "./documents.ts";
import {
  type EndpointSlice,
  type Endpoints,
  KIND_SCHEMAS,
  type KnownKind,
  type Namespace,
  type Node,
  type PasslbConfigSpec,
  type Pod,
  type Service,
} from "./objects.ts";
import { schemaProblems } from "./schema-problems.ts";
import { DEFAULT_CONFIG, type Snapshot } from "./snapshot.ts";
import {
  type FieldPath,
  type FieldProblem,
  validateConfig,
  validateEndpointSlice,
  validateEndpoints,
  validateNode,
  validatePod,
  validateService,
} from "./validate.ts";

export interface InputProblem {
  readonly source: string;
  readonly index: number;
  readonly item?: number;
  /** `Service team-a/web`, or `document` when the object could not be named */
  readonly object: string;
  readonly path: FieldPath;
  readonly message: string;
}

export interface DecodeResult {
  readonly snapshot: Snapshot;
  readonly problems: InputProblem[];
  /** skipped kinds and other things worth a line, never errors */
  readonly notices: string[];
}

const NAMESPACED: ReadonlySet<string> = new Set(["Service", "Pod", "EndpointSlice", "Endpoints"]);

export function formatPath(path: FieldPath): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_]*$/.test(part)) out += out === "" ? part : `.${part}`;
    else out += `[${JSON.stringify(part)}]`;
  }
  return out;
}

/** `file.yaml (document 2, item 3): Service default/web: spec.ports[0].port: message` */
export function formatProblem(p: InputProblem | DocumentProblem): string {
  const where =
    "item" in p && p.item !== undefined ? `document ${p.index}, item ${p.item}` : `document ${p.index}`;
  if (!("object" in p)) return `${p.source} (${where}): ${p.message}`;
  const field = p.path.length > 0 ? `${formatPath(p.path)}: ` : "";
  return `${p.source} (${where}): ${p.object}: ${field}${p.message}`;
}

function describe(value: unknown): { kind?: string; apiVersion?: string; label: string } {
  if (typeof value !== "object" || value === null || Array.isArray(value)) return { label: "document" };
  const v = value as {
    kind?: unknown;
    apiVersion?: unknown;
    metadata?: { name?: unknown; namespace?: unknown };
  };
  const kind = typeof v.kind === "string" ? v.kind : undefined;
  const apiVersion = typeof v.apiVersion === "string" ? v.apiVersion : undefined;
  const name = typeof v.metadata?.name === "string" ? v.metadata.name : "<unnamed>";
  const ns = typeof v.metadata?.namespace === "string" ? v.metadata.namespace : "default";
  const label =
    kind === undefined ? "document" : NAMESPACED.has(kind) ? `${kind} ${ns}/${name}` : `${kind} ${name}`;
  return { ...(kind !== undefined && { kind }), ...(apiVersion !== undefined && { apiVersion }), label };
}

/** Decodes documents into a snapshot, in three steps: read each document against its kind's
 * schema → the PasslbConfig (other rules, the node port range, depend on it) → each object's
 * semantic rules. PasslbConfig objects are merged in input order (at most one is expected;
 * a second is a problem). */
export function decodeDocuments(documents: readonly Document[]): DecodeResult {
  const read = readObjects(documents);
  const config = decodeConfig(read.value);
  const validated = validateObjects(read.value, config.value);
  const problems = [...read.problems, ...config.problems, ...validated.problems];
  problems.sort(
    (a, b) => a.source.localeCompare(b.source) || a.index - b.index || (a.item ?? 0) - (b.item ?? 0),
  );
  return {
    snapshot: { ...validated.value, config: config.value },
    problems,
    notices: read.notices,
  };
}

/** An object its schema accepted, with where it came from. */
interface ReadObject {
  readonly doc: Document;
  readonly kind: KnownKind;
  readonly object: unknown;
  /** `Service team-a/web` */
  readonly label: string;
}

interface Decoded<T> {
  readonly value: T;
  readonly problems: InputProblem[];
}

/** A problem of one field of one document's object, as every reader reports it. */
export function problemAt(doc: Document, object: string, path: FieldPath, message: string): InputProblem {
  return {
    source: doc.source,
    index: doc.index,
    ...(doc.item !== undefined && { item: doc.item }),
    object,
    path,
    message,
  };
}

/** Each document against its kind's schema; unknown kinds become notices, a second object of
 * the same kind and name a problem. */
function readObjects(documents: readonly Document[]): Decoded<ReadObject[]> & { notices: string[] } {
  const problems: InputProblem[] = [];
  const notices: string[] = [];
  const objects: ReadObject[] = [];
  const seen = new Map<string, Document>();
  for (const doc of documents) {
    const { kind, label } = describe(doc.value);
    const report = (path: FieldPath, message: string) => problems.push(problemAt(doc, label, path, message));
    if (typeof doc.value !== "object" || doc.value === null || Array.isArray(doc.value)) {
      report([], "is not a Kubernetes object (expected a mapping with apiVersion and kind)");
      continue;
    }
    if (kind === undefined) {
      report(["kind"], "is required");
      continue;
    }
    // own keys only: `kind: __proto__` or `kind: toString` are inherited keys of any object
    // (found by the fuzz bench, issue 16: they reached safeParse and threw)
    if (!Object.hasOwn(KIND_SCHEMAS, kind)) {
      const where =
        doc.item === undefined ? `document ${doc.index}` : `document ${doc.index}, item ${doc.item}`;
      notices.push(`${doc.source} (${where}): skipped ${label}: passlb does not read this kind`);
      continue;
    }
    const known = kind as KnownKind;
    const result = KIND_SCHEMAS[known].safeParse(doc.value);
    if (!result.success) {
      for (const p of schemaProblems(known, doc.value, result.error)) report(p.path, p.message);
      continue;
    }
    const key = `${known}\u0000${label}`;
    const previous = seen.get(key);
    if (previous) {
      report(
        ["metadata", "name"],
        `duplicates the object in ${previous.source} (document ${previous.index})`,
      );
      continue;
    }
    seen.set(key, doc);
    objects.push({ doc, kind: known, object: result.data, label });
  }
  return { value: objects, problems, notices };
}

/** The one valid PasslbConfig, or the defaults. */
function decodeConfig(objects: readonly ReadObject[]): Decoded<PasslbConfigSpec> {
  const problems: InputProblem[] = [];
  let config: PasslbConfigSpec | undefined;
  for (const d of objects) {
    if (d.kind !== "PasslbConfig") continue;
    const spec = (d.object as { spec: PasslbConfigSpec }).spec;
    const found = validateConfig(spec);
    if (config !== undefined)
      found.push({ path: ["metadata", "name"], message: "only one PasslbConfig may be given" });
    problems.push(...problemsOf(found, d));
    if (found.length === 0) config = spec;
  }
  return { value: config ?? DEFAULT_CONFIG, problems };
}

/** Every object but the config through its kind's semantic rules; those with a problem are left out. */
function validateObjects(
  objects: readonly ReadObject[],
  config: PasslbConfigSpec,
): Decoded<Omit<Snapshot, "config">> {
  const problems: InputProblem[] = [];
  const value = {
    services: [] as Service[],
    nodes: [] as Node[],
    pods: [] as Pod[],
    endpointSlices: [] as EndpointSlice[],
    endpoints: [] as Endpoints[],
    namespaces: [] as Namespace[],
  };
  const valid = (found: FieldProblem[], d: ReadObject): boolean => {
    problems.push(...problemsOf(found, d));
    return found.length === 0;
  };
  for (const d of objects) {
    switch (d.kind) {
      case "Service": {
        const svc = withNamespace(d.object as Service);
        if (valid(validateService(svc, config), d)) value.services.push(svc);
        break;
      }
      case "Node": {
        const node = d.object as Node;
        if (valid(validateNode(node), d)) value.nodes.push(node);
        break;
      }
      case "Pod": {
        const pod = withNamespace(d.object as Pod);
        if (valid(validatePod(pod), d)) value.pods.push(pod);
        break;
      }
      case "EndpointSlice": {
        const slice = withNamespace(d.object as EndpointSlice);
        if (valid(validateEndpointSlice(slice), d)) value.endpointSlices.push(slice);
        break;
      }
      case "Endpoints": {
        const ep = withNamespace(d.object as Endpoints);
        if (valid(validateEndpoints(ep), d)) value.endpoints.push(ep);
        break;
      }
      case "Namespace":
        value.namespaces.push(d.object as Namespace);
        break;
      case "PasslbConfig":
        break;
    }
  }
  return { value, problems };
}

function problemsOf(found: readonly FieldProblem[], d: ReadObject): InputProblem[] {
  return found.map((p) => problemAt(d.doc, d.label, p.path, p.message));
}

function withNamespace<T extends { metadata: { namespace?: string | undefined } }>(obj: T): T {
  if (obj.metadata.namespace !== undefined) return obj;
  return { ...obj, metadata: { ...obj.metadata, namespace: "default" } };
}
