/**
 * What a schema's rejection says, as field problems a person can act on: zod's issues with
 * their paths and in our words (`is required`, `must be one of "TCP", "UDP"`), plus what the
 * semantic rules (validate.ts) find on the same object, so that one pass lists every problem
 * of a rejected object. Pure. Not here: where the object came from (decode.ts adds the file,
 * document and object name).
 */
import type { z } from "zod";
import type { EndpointSlice, Endpoints, KnownKind, Node, PasslbConfigSpec, Pod, Service } from "./objects.ts";
import { DEFAULT_CONFIG } from "./snapshot.ts";
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

/** Every problem of an object `kind`'s schema rejected: the schema's, then the rules' on other fields. */
export function schemaProblems(kind: KnownKind, raw: unknown, error: z.ZodError): FieldProblem[] {
  const structural = zodProblems(error, raw);
  return [...structural, ...bestEffort(kind, raw, structural)];
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
