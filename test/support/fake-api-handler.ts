/**
 * Test-only: one HTTP request to the fake Kubernetes API server (fake-api-server.ts), in the
 * order kube-apiserver's handler chain takes it (apiserver pkg/server/config.go
 * DefaultBuildHandlerChain): authentication (bearer token → user; 401), request info and
 * authorization (RBAC; 403), then the resource handler — the pod proxy, discovery, or
 * list / watch / get / create / update / patch / delete on the store, with decoding,
 * fieldValidation warnings and validation on writes. Every request is recorded with who
 * asked and what it was answered.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import { checkFieldSelector, requestAdmission, selectorName } from "./fake-api-admission.ts";
import type { FakeFailures } from "./fake-api-failures.ts";
import { type FakeListPages, type ListPageInfo, listReply } from "./fake-api-pages.ts";
import { selectorMatcher } from "./fake-api-patch.ts";
import { ANONYMOUS, type FakeRbac, type FakeUser } from "./fake-api-rbac.ts";
import { discoveryDocument, FAKE_RESOURCES, resourceKey } from "./fake-api-resources.ts";
import { parseBody, parseRoute, type Reply, reply, sendJson, verbOf } from "./fake-api-routes.ts";
import { fieldValidationOf } from "./fake-api-schema.ts";
import { ApiStatusError, type FakeApiStore } from "./fake-api-store.ts";
import { type OpenWatch, serveWatch } from "./fake-api-watch.ts";

/** one request as the server saw it */
export interface RequestRecord {
  readonly user: string;
  readonly verb: string;
  readonly resource: string;
  readonly subresource: string;
  readonly namespace: string;
  readonly name: string;
  readonly status: number;
  readonly message: string;
}

/** what `podProxy` answers for GET /api/v1/namespaces/NS/pods/NAME[:PORT]/proxy/PATH */
export type PodProxy = (namespace: string, pod: string, port: string, path: string) => Reply;

/** what the handler reads and records; the server owns it */
export interface HandlerState {
  readonly store: FakeApiStore;
  readonly rbac: FakeRbac;
  readonly users: Record<string, FakeUser>;
  readonly pages: FakeListPages;
  readonly failures: FakeFailures;
  readonly watches: Set<OpenWatch>;
  readonly counts: Map<string, number>;
  readonly requests: RequestRecord[];
  readonly customResources: boolean;
  readonly maxWatchSeconds: number;
  readonly bookmarkMs: number;
  goneAs: "event" | "http";
  podProxy: PodProxy | undefined;
  onListPage: ((info: ListPageInfo) => void) | undefined;
}

export function handleRequest(state: HandlerState, req: IncomingMessage, res: ServerResponse): void {
  const chunks: Buffer[] = [];
  req.on("data", (c: Buffer) => chunks.push(c));
  req.on("end", () => {
    const warnings: string[] = [];
    const seen: Omit<RequestRecord, "status" | "message"> & { user: string } = {
      user: "",
      verb: "",
      resource: "",
      subresource: "",
      namespace: "",
      name: "",
    };
    try {
      const answer = serve(state, req, res, Buffer.concat(chunks).toString("utf8"), warnings, seen);
      if (answer) {
        if (warnings.length > 0)
          res.setHeader(
            "Warning",
            warnings.map((x) => `299 - ${JSON.stringify(x)}`),
          );
        sendJson(res, answer.status, answer.body);
        state.requests.push({ ...seen, status: answer.status, message: "" });
      } else state.requests.push({ ...seen, status: 200, message: "watch" });
    } catch (e) {
      const err =
        e instanceof ApiStatusError ? e : new ApiStatusError(500, "InternalError", (e as Error).message);
      state.requests.push({ ...seen, status: err.code, message: err.message });
      // FAKE_API_LOG=1: every refused request on stderr, to see what the strict server refused
      if (process.env.FAKE_API_LOG)
        process.stderr.write(`fake API ${err.code} ${seen.verb} ${seen.resource}: ${err.message}\n`);
      if (res.headersSent) res.end();
      else sendJson(res, err.code, err.status());
    } finally {
      state.store.admission = undefined;
    }
  });
}

function authenticate(state: HandlerState, req: IncomingMessage): FakeUser {
  const auth = req.headers.authorization;
  if (auth === undefined) return ANONYMOUS;
  const token = /^Bearer (.+)$/.exec(auth)?.[1];
  const user = token === undefined ? undefined : state.users[token];
  if (!user) throw new ApiStatusError(401, "Unauthorized", "Unauthorized");
  return user;
}

/** The reply to send, or undefined when the request was answered already (a watch). */
function serve(
  state: HandlerState,
  req: IncomingMessage,
  res: ServerResponse,
  body: string,
  warnings: string[],
  seen: { -readonly [K in keyof RequestRecord]?: RequestRecord[K] },
): Reply | undefined {
  const user = authenticate(state, req);
  seen.user = user.name;
  const url = new URL(req.url ?? "/", "http://fake");
  const method = req.method ?? "GET";
  const path = url.pathname.replace(/\/$/, "") || "/";
  const proxy = /^\/api\/v1\/namespaces\/([^/]+)\/pods\/([^/:]+)(?::([^/]+))?\/proxy(\/.*)?$/.exec(
    url.pathname,
  );
  if (proxy) {
    const [, namespace = "", pod = "", port = "", rest = "/"] = proxy;
    Object.assign(seen, { verb: "get", resource: "pods", subresource: "proxy", namespace, name: pod });
    state.rbac.authorize({
      user,
      verb: "get",
      path,
      resource: { group: "", resource: "pods", sub: "proxy", namespace, name: pod },
    });
    const answer = state.podProxy?.(namespace, pod, port, rest);
    if (!answer)
      throw new ApiStatusError(
        503,
        "ServiceUnavailable",
        `error trying to reach service: dial tcp: connect: connection refused`,
      );
    return answer;
  }
  const served = state.customResources ? FAKE_RESOURCES : FAKE_RESOURCES.filter((r) => !r.custom);
  const doc = method === "GET" ? discoveryDocument(path, served) : undefined;
  if (doc !== undefined || path === "/version" || /^\/(openapi|healthz|livez|readyz)/.test(path)) {
    seen.verb = method.toLowerCase();
    state.rbac.authorize({ user, verb: method.toLowerCase(), path });
    if (doc !== undefined) return { status: 200, body: doc };
    throw new ApiStatusError(404, "NotFound", "the server could not find the requested resource");
  }
  const route = parseRoute(url.pathname);
  if (!route || !served.includes(route.res))
    throw new ApiStatusError(404, "NotFound", "the server could not find the requested resource");
  const verb = verbOf(method, route, url);
  const key = resourceKey(route.res);
  const ns = route.res.namespaced ? route.namespace : undefined;
  const fieldSelector = url.searchParams.get("fieldSelector");
  const name = route.name ?? (verb === "list" || verb === "watch" ? selectorName(fieldSelector) : "");
  Object.assign(seen, { verb, resource: key, subresource: route.sub ?? "", namespace: ns ?? "", name });
  state.rbac.authorize({
    user,
    verb,
    path,
    resource: {
      group: route.res.group,
      resource: route.res.resource,
      sub: route.sub ?? "",
      namespace: ns ?? "",
      name,
    },
  });
  const countKey = `${verb} ${key} ${route.sub ?? ""}`;
  state.counts.set(countKey, (state.counts.get(countKey) ?? 0) + 1);
  state.failures.check(verb, key, route.sub ?? "");
  if (!route.res.namespaced && route.namespace !== undefined) {
    throw new ApiStatusError(404, "NotFound", "the server could not find the requested resource");
  }
  if (verb === "create" || verb === "update" || verb === "patch") {
    state.store.admission = requestAdmission(fieldValidationOf(url), warnings);
  }
  if (verb === "list" || verb === "watch") checkFieldSelector(route.res, fieldSelector);
  const store = state.store;
  switch (verb) {
    case "list":
      return listReply(state.pages, state.store, route.res, ns, url, state.onListPage);
    case "watch":
      serveWatch(
        store,
        {
          res: route.res,
          namespace: ns,
          match: selectorMatcher(url.searchParams.get("labelSelector"), fieldSelector),
          url,
          goneAs: state.goneAs,
          maxWatchSeconds: state.maxWatchSeconds,
          minRequestTimeoutSeconds: 1800,
          bookmarkMs: state.bookmarkMs,
        },
        res,
        state.watches,
      );
      return undefined;
    case "get":
      return reply(200, store.get(route.res, ns, route.name ?? ""));
    case "create": {
      if (route.res.namespaced && ns === undefined) {
        throw new ApiStatusError(405, "MethodNotAllowed", "create needs a namespace in the path");
      }
      return reply(201, store.create(route.res, ns, parseBody(body)));
    }
    case "update":
      return reply(200, store.update(route.res, ns, route.name ?? "", parseBody(body), route.sub));
    case "patch": {
      const type = String(req.headers["content-type"] ?? "application/merge-patch+json");
      return reply(200, store.patch(route.res, ns, route.name ?? "", type, parseBody(body), route.sub));
    }
    case "delete":
      return reply(200, store.delete(route.res, ns, route.name ?? ""));
  }
}
