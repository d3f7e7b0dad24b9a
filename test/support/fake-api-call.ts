/**
 * Test-only: one raw HTTP request to the fake Kubernetes API server as a given identity, for
 * the tests of the fake itself (test/support/fake-api-*.test.ts): the status, the decoded
 * body and the Warning headers, with nothing of a client library in between.
 */
import type { FakeApiServer, FakeIdentity } from "./fake-api-server.ts";

export interface CallResult {
  readonly status: number;
  // biome-ignore lint/suspicious/noExplicitAny: JSON answers, read only in assertions
  readonly body: any;
  readonly warnings: string[];
}

export async function call(
  api: FakeApiServer,
  as: FakeIdentity | undefined,
  method: string,
  path: string,
  body?: unknown,
  contentType = "application/json",
): Promise<CallResult> {
  const headers: Record<string, string> = { "content-type": contentType };
  if (as !== undefined) headers.authorization = `Bearer ${as}`;
  const res = await fetch(`${api.url}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await res.text();
  const warning = res.headers.get("warning");
  return {
    status: res.status,
    body: text === "" ? undefined : JSON.parse(text),
    warnings: warning ? warning.split(/,\s*(?=299 )/) : [],
  };
}

export const admin = (api: FakeApiServer, method: string, path: string, body?: unknown, type?: string) =>
  call(api, "admin", method, path, body, type);
