/**
 * Test-only: the patch formats and selectors of the fake Kubernetes API server.
 * - JSON merge patch (RFC 7386): objects merge, null removes, everything else replaces.
 *   Strategic merge patch is treated as a merge patch (no patchMergeKey list merging).
 * - JSON patch (RFC 6902): add, remove, replace, test, copy, move with RFC 6901 pointers.
 * - Label selectors (equality and set-less existence forms: a=b, a==b, a!=b, a, !a) and
 *   field selectors on metadata.name / metadata.namespace, as list and watch filter them.
 * Deliberately not: set-based selectors (`in`, `notin`), server-side apply (a 415 here; passlb
 * applies nothing), strategic merge's list merge keys (passlb only PUTs built-in objects).
 */

import { ApiStatusError } from "./fake-api-status.ts";

type Json = unknown;

const ACCEPTED = "application/json-patch+json, application/merge-patch+json";

/**
 * The patched object, by the request's Content-Type (apiserver handlers/patch.go: an
 * unsupported type is 415 with NewUnsupportedMediaTypeError's words; custom resources take
 * no strategic merge patch, apiextensions-apiserver customresource_handler.go).
 */
export function applyPatch(contentType: string, custom: boolean, current: Json, patch: Json): Json {
  const type = contentType.split(";")[0]?.trim() ?? "";
  if (type === "application/json-patch+json") return jsonPatch(current, patch);
  if (type === "application/merge-patch+json") return mergePatch(current, patch);
  if (type === "application/strategic-merge-patch+json" && !custom) return mergePatch(current, patch);
  const accepted = custom
    ? `${ACCEPTED}, application/apply-patch+yaml`
    : `${ACCEPTED}, application/strategic-merge-patch+json, application/apply-patch+yaml`;
  throw new ApiStatusError(
    415,
    "UnsupportedMediaType",
    `the body of the request was in an unknown format - accepted media types include: ${accepted}`,
  );
}

function isObject(x: Json): x is Record<string, Json> {
  return typeof x === "object" && x !== null && !Array.isArray(x);
}

export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return structuredClone(patch);
  const out: Record<string, Json> = isObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete out[key];
    else out[key] = mergePatch(out[key], value);
  }
  return out;
}

export class PatchError extends Error {}

function unescapeToken(token: string): string {
  return token.replace(/~1/g, "/").replace(/~0/g, "~");
}

function pointer(path: string): string[] {
  if (path === "") return [];
  if (!path.startsWith("/")) throw new PatchError(`invalid JSON pointer ${JSON.stringify(path)}`);
  return path.slice(1).split("/").map(unescapeToken);
}

function parentOf(doc: Json, tokens: readonly string[]): { parent: Json; key: string } {
  let cur = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isObject(cur)) cur = cur[t];
    else throw new PatchError(`path segment ${t} not found`);
    if (cur === undefined) throw new PatchError(`path segment ${t} not found`);
  }
  const key = tokens[tokens.length - 1];
  if (key === undefined) throw new PatchError("cannot operate on the document root");
  return { parent: cur, key };
}

function getAt(doc: Json, path: string): Json {
  let cur = doc;
  for (const t of pointer(path)) {
    if (Array.isArray(cur)) cur = cur[Number(t)];
    else if (isObject(cur)) cur = cur[t];
    else return undefined;
  }
  return cur;
}

function removeAt(doc: Json, path: string): Json {
  const { parent, key } = parentOf(doc, pointer(path));
  if (Array.isArray(parent)) {
    const i = Number(key);
    if (!Number.isInteger(i) || i < 0 || i >= parent.length) throw new PatchError(`no element at ${path}`);
    return parent.splice(i, 1)[0];
  }
  if (!isObject(parent) || !(key in parent)) throw new PatchError(`no member at ${path}`);
  const old = parent[key];
  delete parent[key];
  return old;
}

function addAt(doc: Json, path: string, value: Json, replace: boolean): void {
  const { parent, key } = parentOf(doc, pointer(path));
  if (Array.isArray(parent)) {
    const i = key === "-" ? parent.length : Number(key);
    if (!Number.isInteger(i) || i < 0 || i > parent.length) throw new PatchError(`bad index at ${path}`);
    if (replace) {
      if (i >= parent.length) throw new PatchError(`no element at ${path}`);
      parent[i] = value;
    } else parent.splice(i, 0, value);
    return;
  }
  if (!isObject(parent)) throw new PatchError(`parent of ${path} is not an object`);
  if (replace && !(key in parent)) throw new PatchError(`no member at ${path}`);
  parent[key] = value;
}

interface JsonPatchOp {
  readonly op: string;
  readonly path: string;
  readonly from?: string;
  readonly value?: Json;
}

export function jsonPatch(target: Json, ops: Json): Json {
  if (!Array.isArray(ops)) throw new PatchError("a JSON patch is an array of operations");
  const doc = structuredClone(target);
  for (const raw of ops as JsonPatchOp[]) {
    const value = structuredClone(raw.value);
    switch (raw.op) {
      case "add":
        addAt(doc, raw.path, value, false);
        break;
      case "replace":
        addAt(doc, raw.path, value, true);
        break;
      case "remove":
        removeAt(doc, raw.path);
        break;
      case "test":
        if (JSON.stringify(getAt(doc, raw.path)) !== JSON.stringify(raw.value)) {
          throw new PatchError(`testing value ${raw.path} failed: test failed`);
        }
        break;
      case "copy":
        addAt(doc, raw.path, structuredClone(getAt(doc, raw.from ?? "")), false);
        break;
      case "move":
        addAt(doc, raw.path, removeAt(doc, raw.from ?? ""), false);
        break;
      default:
        throw new PatchError(`unknown JSON patch op ${JSON.stringify(raw.op)}`);
    }
  }
  return doc;
}

export type Matcher = (obj: Record<string, Json>) => boolean;

export function selectorMatcher(labelSelector: string | null, fieldSelector: string | null): Matcher {
  const tests: Matcher[] = [];
  for (const term of (labelSelector ?? "").split(",").map((s) => s.trim())) {
    if (term === "") continue;
    const m = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (m) {
      const [, key = "", op, value] = m;
      tests.push((o) => {
        const v = labels(o)[key];
        return op === "!=" ? v !== value : v === value;
      });
    } else if (term.startsWith("!")) tests.push((o) => !(term.slice(1) in labels(o)));
    else tests.push((o) => term in labels(o));
  }
  for (const term of (fieldSelector ?? "").split(",").map((s) => s.trim())) {
    if (term === "") continue;
    const m = /^([^!=]+?)\s*(==|=|!=)\s*(.*)$/.exec(term);
    if (!m) throw new PatchError(`unsupported field selector ${term}`);
    const [, field = "", op, value] = m;
    tests.push((o) => {
      const v = String(getAt(o, `/${field.split(".").join("/")}`) ?? "");
      return op === "!=" ? v !== value : v === value;
    });
  }
  return (o) => tests.every((t) => t(o));
}

function labels(o: Record<string, Json>): Record<string, string> {
  const meta = o.metadata;
  const l = isObject(meta) ? meta.labels : undefined;
  return isObject(l) ? (l as Record<string, string>) : {};
}
