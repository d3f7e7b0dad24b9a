/**
 * Documents in, a Snapshot out, with every problem listed at once. Each problem names the
 * source file, the document (and List item) number, the object (`Kind namespace/name`) and
 * the field path. Unknown kinds are notices, not errors. Pure: the caller reads the files.
 *
 * Decoding is all-or-nothing per object: an object with any problem is left out of the
 * snapshot (callers that must keep the last good state do so themselves).
 */
import type { z } from "zod";
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

function zodProblems(error: z.ZodError, raw: unknown): FieldProblem[] {
  return error.issues.map((issue) => {
    const path = issue.path.filter((p): p is string | number => typeof p !== "symbol");
    return { path, message: valueAt(raw, path) === undefined ? "is required" : zodMessage(issue) };
  });
}

function valueAt(value: unknown, path: FieldPath): unknown {
  let v = value;
  for (const part of path) {
    if (typeof v !== "object" || v === null) return undefined;
    v = (v as Record<string | number, unknown>)[part];
  }
  return v;
}

/** Semantic rules run on an object the schema rejected, so that one pass lists every
 * problem; whatever they say about a field the schema already flagged is dropped, and a
 * rule that trips over a malformed field simply says nothing. */
function bestEffort(kind: KnownKind, raw: unknown, reported: readonly FieldProblem[]): FieldProblem[] {
  let found: FieldProblem[];
  try {
    if (kind === "Service") found = validateService(raw as Service, DEFAULT_CONFIG);
    else if (kind === "PasslbConfig") found = validateConfig((raw as { spec: PasslbConfigSpec }).spec);
    else if (kind === "EndpointSlice") found = validateEndpointSlice(raw as EndpointSlice);
    else if (kind === "Node") found = validateNode(raw as Node);
    else if (kind === "Pod") found = validatePod(raw as Pod);
    else if (kind === "Endpoints") found = validateEndpoints(raw as Endpoints);
    else found = [];
  } catch {
    return [];
  }
  const covered = (p: FieldPath) => reported.some((r) => r.path.every((part, i) => p[i] === part));
  return found.filter((p) => !covered(p.path));
}

export function zodMessage(issue: z.core.$ZodIssue): string {
  switch (issue.code) {
    case "invalid_value":
      return `must be one of ${issue.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "invalid_type":
      return issue.message.includes("received undefined")
        ? "is required"
        : issue.message.replace(/^Invalid input: /, "");
    case "too_small":
      if (issue.origin === "number") return `must be at least ${issue.minimum}`;
      if (issue.origin === "string") return "must not be empty";
      if (issue.origin === "array")
        return `must have at least ${issue.minimum} item${issue.minimum === 1 ? "" : "s"}`;
      return issue.message;
    case "too_big":
      return issue.origin === "number" ? `must be at most ${issue.maximum}` : issue.message;
    default:
      return issue.message;
  }
}

/** Decodes documents into a snapshot. PasslbConfig objects are merged in input order
 * (at most one is expected; a second is a problem). */
export function decodeDocuments(documents: readonly Document[]): DecodeResult {
  const problems: InputProblem[] = [];
  const notices: string[] = [];
  const services: Service[] = [];
  const nodes: Node[] = [];
  const pods: Pod[] = [];
  const endpointSlices: EndpointSlice[] = [];
  const endpoints: Endpoints[] = [];
  const namespaces: Namespace[] = [];
  let config: PasslbConfigSpec | undefined;
  const seen = new Map<string, Document>();

  const decoded: { doc: Document; kind: KnownKind; object: unknown; label: string }[] = [];
  for (const doc of documents) {
    const { kind, label } = describe(doc.value);
    const report = (path: FieldPath, message: string) =>
      problems.push({
        source: doc.source,
        index: doc.index,
        ...(doc.item !== undefined && { item: doc.item }),
        object: label,
        path,
        message,
      });
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
      const structural = zodProblems(result.error, doc.value);
      for (const p of [...structural, ...bestEffort(known, doc.value, structural)]) report(p.path, p.message);
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
    decoded.push({ doc, kind: known, object: result.data, label });
  }

  // The config comes first: other rules (the node port range) depend on it.
  for (const d of decoded) {
    if (d.kind !== "PasslbConfig") continue;
    const spec = (d.object as { spec: PasslbConfigSpec }).spec;
    const found = validateConfig(spec);
    if (config !== undefined)
      found.push({ path: ["metadata", "name"], message: "only one PasslbConfig may be given" });
    if (pushAll(found, d)) config = spec;
  }
  const effective = config ?? DEFAULT_CONFIG;

  for (const d of decoded) {
    switch (d.kind) {
      case "Service": {
        const svc = withNamespace(d.object as Service);
        if (pushAll(validateService(svc, effective), d)) services.push(svc);
        break;
      }
      case "Node": {
        const node = d.object as Node;
        if (pushAll(validateNode(node), d)) nodes.push(node);
        break;
      }
      case "Pod": {
        const pod = withNamespace(d.object as Pod);
        if (pushAll(validatePod(pod), d)) pods.push(pod);
        break;
      }
      case "EndpointSlice": {
        const slice = withNamespace(d.object as EndpointSlice);
        if (pushAll(validateEndpointSlice(slice), d)) endpointSlices.push(slice);
        break;
      }
      case "Endpoints": {
        const ep = withNamespace(d.object as Endpoints);
        if (pushAll(validateEndpoints(ep), d)) endpoints.push(ep);
        break;
      }
      case "Namespace":
        namespaces.push(d.object as Namespace);
        break;
      case "PasslbConfig":
        break;
    }
  }

  function pushAll(found: FieldProblem[], d: { doc: Document; label: string }): boolean {
    for (const p of found)
      problems.push({
        source: d.doc.source,
        index: d.doc.index,
        ...(d.doc.item !== undefined && { item: d.doc.item }),
        object: d.label,
        path: p.path,
        message: p.message,
      });
    return found.length === 0;
  }

  problems.sort(
    (a, b) => a.source.localeCompare(b.source) || a.index - b.index || (a.item ?? 0) - (b.item ?? 0),
  );
  return {
    snapshot: { services, nodes, pods, endpointSlices, endpoints, namespaces, config: effective },
    problems,
    notices,
  };
}

function withNamespace<T extends { metadata: { namespace?: string | undefined } }>(obj: T): T {
  if (obj.metadata.namespace !== undefined) return obj;
  return { ...obj, metadata: { ...obj.metadata, namespace: "default" } };
}
