/**
 * Test-only: the HTTP side of the fake Kubernetes API server (fake-api-server.ts) — a
 * request path to its resource, namespace, name and subresource; the method and `watch`
 * parameter to a verb; JSON bodies in and out (Kubernetes API concepts, "API verbs" and
 * "Resource URIs").
 *
 * Deliberately not: anything about objects or their versions (fake-api-store.ts).
 */
import type { ServerResponse } from "node:http";
import { type FakeResource, findResource } from "./fake-api-resources.ts";
import { ApiStatusError } from "./fake-api-store.ts";

export type FakeVerb = "list" | "watch" | "get" | "create" | "update" | "patch" | "delete";

export interface Route {
  readonly res: FakeResource;
  readonly namespace: string | undefined;
  readonly name: string | undefined;
  readonly sub: string | undefined;
}

export function findByKey(key: string): FakeResource | undefined {
  const [a, b] = key.split("/");
  if (b === undefined) return findResource("", "v1", a ?? "");
  for (const v of ["v1", "v1alpha1", "v1beta1"]) {
    const r = findResource(a ?? "", v, b);
    if (r) return r;
  }
  return undefined;
}

export function parseRoute(path: string): Route | undefined {
  const parts = path.split("/").filter((p) => p !== "");
  let group: string;
  let version: string;
  let rest: string[];
  if (parts[0] === "api" && parts.length >= 2) {
    group = "";
    version = parts[1] ?? "";
    rest = parts.slice(2);
  } else if (parts[0] === "apis" && parts.length >= 3) {
    group = parts[1] ?? "";
    version = parts[2] ?? "";
    rest = parts.slice(3);
  } else return undefined;
  if (rest[0] === "namespaces" && rest.length >= 3) {
    const res = findResource(group, version, rest[2] ?? "");
    if (res) return { res, namespace: rest[1], name: rest[3], sub: rest[4] };
  }
  const res = findResource(group, version, rest[0] ?? "");
  if (!res) return undefined;
  if (rest[2] !== undefined && !(rest[2] === "status" && res.status)) return undefined;
  return { res, namespace: undefined, name: rest[1], sub: rest[2] };
}

export function verbOf(method: string, route: Route, url: URL): FakeVerb {
  const w = url.searchParams.get("watch");
  switch (method) {
    case "GET":
      if (route.name === undefined) return w === "true" || w === "1" ? "watch" : "list";
      return "get";
    case "POST":
      if (route.name === undefined) return "create";
      break;
    case "PUT":
      if (route.name !== undefined) return "update";
      break;
    case "PATCH":
      if (route.name !== undefined) return "patch";
      break;
    case "DELETE":
      if (route.name !== undefined) return "delete";
      break;
  }
  throw new ApiStatusError(405, "MethodNotAllowed", `${method} is not allowed on ${url.pathname}`);
}

export function parseBody(body: string): unknown {
  try {
    return JSON.parse(body);
  } catch {
    throw new ApiStatusError(400, "BadRequest", "the request body is not JSON");
  }
}

export interface Reply {
  readonly status: number;
  readonly body: unknown;
}

export function reply(status: number, body: unknown): Reply {
  return { status, body };
}

export function sendJson(res: ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
