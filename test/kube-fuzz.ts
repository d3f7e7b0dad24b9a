/**
 * The Kubernetes source's fuzzer (issue 16 §3), for test/kube-fuzz.test.ts: fast-check
 * generates what the API server answers to the Services list and watch — lists truncated
 * mid-JSON, `items`/`metadata` of the wrong type, items and events whose fields have the
 * wrong types (a string for a number, null arrays, objects for strings, an own `toString`
 * key), unknown kinds, huge objects, watch streams cut mid-event, garbage lines, ERROR
 * events with odd Status bodies, HTTP errors with garbage bodies — and `ReplayApiServer`,
 * a minimal HTTP server, replays those bytes to passlb's real client stack
 * (clientNodeTransport over @kubernetes/client-node's KubeConfig and Watch, the
 * ResourceReflector, the KubeSnapshotSource). It is the client that is under test, so the
 * server only replays: the strict fake API server (test/support/fake-api-*.ts) refuses to
 * send anything malformed by design.
 *
 * `Model` is the oracle: the objects the source must hold after the answers, applied the
 * way client-go's reflector does (a list replaces the store, events change it; an answer
 * that cannot be read changes nothing), keyed by namespace/name. What each stored object
 * decodes to is k8s/decode.ts's business (fuzzed by test/manifest-fuzz.ts): the property
 * here is that the source hands out exactly the objects that decode, reports exactly the
 * ones that do not by name and field, and keeps everything else.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { Socket } from "node:net";
import fc from "fast-check";

// ---------------------------------------------------------------- what the server answers

export interface Reply {
  readonly status: number;
  /** the body; `__MODEL__` stands for the model's list at the time of the request */
  readonly text: string;
  /** where the body's UTF-8 bytes are cut into writes (fractions of its length: mid-line, mid-character) */
  readonly cuts: readonly number[];
  /** after the body: finish the response, or cut the connection (no end of the chunked body) */
  readonly end: "end" | "destroy";
}

export interface Answer {
  readonly on: "list" | "watch";
  readonly reply: Reply;
  readonly effect: Effect;
  /** the watch ends with 410 Gone (an ERROR event or the HTTP status): the reflector lists again */
  readonly expires?: boolean;
}

/** the answers of one case, in order; each has what it does to the model */
export type Script = readonly Answer[];

export type Effect =
  | { readonly kind: "none" }
  | { readonly kind: "replace"; readonly items: readonly unknown[] }
  | { readonly kind: "events"; readonly events: readonly (readonly [string, unknown])[] };

export const NS = "fuzz";
const NAMES = ["a", "b", "c", "d", "e"];

export function service(name: string, port: number, rv: number): Record<string, unknown> {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: NS, resourceVersion: String(rv), uid: `uid-${name}` },
    spec: {
      type: "LoadBalancer",
      selector: { app: name },
      ports: [{ name: "http", port, protocol: "TCP", targetPort: 8080 }],
      externalTrafficPolicy: "Cluster",
    },
    status: { loadBalancer: {} },
  };
}

/** values that break a field's type (JSON.parse, so `toString`/`__proto__` are own keys) */
const hostileValue = fc.oneof(
  fc.constantFrom<unknown>(
    null,
    "",
    "80",
    "x".repeat(300),
    5,
    -1,
    1e308,
    0.5,
    true,
    [],
    [null],
    {},
    JSON.parse('{"toString":1,"valueOf":2}'),
    JSON.parse('{"__proto__":{"polluted":1}}'),
    { nested: { deeper: [1, "2", null] } },
  ),
  fc.jsonValue({ maxDepth: 3 }),
);

const PATHS: readonly (readonly (string | number)[])[] = [
  ["spec"],
  ["spec", "ports"],
  ["spec", "ports", 0],
  ["spec", "ports", 0, "port"],
  ["spec", "ports", 0, "protocol"],
  ["spec", "type"],
  ["spec", "selector"],
  ["spec", "externalTrafficPolicy"],
  ["spec", "loadBalancerSourceRanges"],
  ["metadata", "labels"],
  ["metadata", "annotations"],
  ["metadata", "name"],
  ["metadata", "namespace"],
  ["metadata", "resourceVersion"],
  ["metadata"],
  ["status"],
  ["status", "loadBalancer", "ingress"],
  ["kind"],
  ["apiVersion"],
];

function setPath(obj: Record<string, unknown>, path: readonly (string | number)[], value: unknown): unknown {
  const copy = structuredClone(obj);
  let at: Record<string | number, unknown> = copy;
  for (const key of path.slice(0, -1)) {
    const next = at[key];
    if (typeof next !== "object" || next === null) return copy;
    at = next as Record<string | number, unknown>;
  }
  at[path[path.length - 1]!] = value;
  return copy;
}

let rv = 100;
/** a Service as the API server would send it, or one with a field broken, or another kind, or huge */
const objectArb = fc.oneof(
  {
    weight: 4,
    arbitrary: fc
      .tuple(fc.constantFrom(...NAMES), fc.integer({ min: 1, max: 65535 }))
      .map(([n, p]) => service(n, p, rv++)),
  },
  {
    weight: 3,
    arbitrary: fc
      .tuple(fc.constantFrom(...NAMES), fc.constantFrom(...PATHS), hostileValue)
      .map(([n, path, v]) => setPath(service(n, 80, rv++), path, v)),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(fc.constantFrom(...NAMES), fc.constantFrom("Pod", "Bogus", "ServiceList", "Status", ""))
      .map(([n, kind]) => ({ ...service(n, 80, rv++), kind })),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(...NAMES).map((n) => {
      const s = service(n, 80, rv++) as { metadata: Record<string, unknown> };
      s.metadata.annotations = { big: "z".repeat(200_000) };
      return s;
    }),
  },
);

const garbageLine = fc.oneof(
  fc.string({ unit: "binary", maxLength: 80 }).map((s) => s.replace(/\n/g, " ")),
  fc.constantFrom("null", "5", '"x"', "[]", "{}"),
  fc.constantFrom(
    '{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":5}}}',
    '{"type":"BOOKMARK","object":7}',
  ),
  objectArb.map((o) => JSON.stringify({ type: "FOO", object: o })),
);

/** one watch line: an event that counts, or garbage that must change nothing */
const watchLine = fc.oneof(
  {
    weight: 5,
    arbitrary: fc
      .tuple(fc.constantFrom("ADDED", "MODIFIED"), objectArb)
      .map(([t, o]) => ({ event: [t, o] as const })),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(...NAMES).map((n) => ({ event: ["DELETED", service(n, 80, rv++)] as const })),
  },
  {
    weight: 1,
    arbitrary: fc
      .tuple(
        fc.constantFrom("ADDED", "MODIFIED", "DELETED"),
        fc.constantFrom<unknown>(
          undefined,
          null,
          5,
          "x",
          [],
          { metadata: null },
          { metadata: { name: 7 } },
          {
            metadata: { name: "a", namespace: JSON.parse('{"toString":1}') },
          },
        ),
      )
      .map(([t, o]) => ({ event: [t, o] as const })),
  },
  { weight: 2, arbitrary: garbageLine.map((text) => ({ text })) },
);

const oddStatus = fc.oneof(
  fc.constantFrom<unknown>(
    { kind: "Status", code: 500, reason: "InternalError", message: "boom" },
    { code: "410" },
    { code: 410.5 },
    { code: null, message: JSON.parse('{"toString":1}') },
    JSON.parse('{"reason":{"toString":0,"valueOf":0},"message":[1,2]}'),
    "just a string",
    null,
    42,
  ),
  fc.jsonValue({ maxDepth: 2 }),
);

/** where to cut a body into writes (chunk boundaries mid-line, mid-UTF-8) */
const cutsArb = fc.array(fc.double({ min: 0, max: 1, noNaN: true }), { maxLength: 3 });

/** a watch answer: events and garbage, then a clean end, a cut mid-event, an ERROR, or an HTTP error */
const watchReply = fc
  .record({
    lines: fc.array(watchLine, { maxLength: 8 }),
    ending: fc.constantFrom("end", "end", "cut", "error", "expired", "http-error"),
    status: oddStatus,
    httpStatus: fc.constantFrom(500, 503, 403, 410, 404, 400),
    garbage: fc.string({ unit: "binary", maxLength: 60 }),
  })
  .chain(({ lines, ending, status, httpStatus, garbage }) => {
    if (ending === "http-error")
      return fc.constant<Answer>({
        on: "watch",
        reply: { status: httpStatus, text: garbage, cuts: [], end: "end" },
        effect: { kind: "none" },
        expires: httpStatus === 410,
      });
    const events = lines.flatMap((l) => ("event" in l ? [l.event] : []));
    let text = lines
      .map((l) => `${"text" in l ? l.text : JSON.stringify({ type: l.event[0], object: l.event[1] })}\n`)
      .join("");
    if (ending === "cut")
      text += JSON.stringify({ type: "ADDED", object: service("a", 1, rv++) }).slice(0, 40);
    if (ending === "error") text += `${JSON.stringify({ type: "ERROR", object: status })}\n`;
    if (ending === "expired")
      text += `${JSON.stringify({ type: "ERROR", object: { kind: "Status", code: 410, reason: "Expired", message: "too old resource version" } })}\n`;
    const expires =
      ending === "expired" || (ending === "error" && (status as { code?: unknown } | null)?.code === 410);
    return cutsArb.map(
      (cuts): Answer => ({
        on: "watch",
        reply: { status: 200, text, cuts, end: ending === "cut" ? "destroy" : "end" },
        effect: { kind: "events", events },
        expires,
      }),
    );
  });

const listText = (items: readonly unknown[], extra: Record<string, unknown> = {}) =>
  JSON.stringify({
    kind: "ServiceList",
    apiVersion: "v1",
    metadata: { resourceVersion: String(rv++), ...extra },
    items,
  });

/** a list answer for the current items: usable (maybe with broken items), or not usable at all */
export const listReply = (current: readonly unknown[]) =>
  fc.oneof(
    {
      // usable: the current items plus generated ones (broken or not); replaces the store
      weight: 2,
      arbitrary: fc
        .array(
          fc.oneof(objectArb, fc.constantFrom<unknown>(null, 5, "item", [], { metadata: { name: 7 } })),
          {
            maxLength: 4,
          },
        )
        .map((more) => {
          const items = [...current, ...more];
          return {
            on: "list",
            reply: { status: 200, text: listText(items), cuts: [], end: "end" },
            effect: { kind: "replace", items },
          } satisfies Answer as Answer;
        }),
    },
    {
      // not usable: cut mid-JSON, wrong types at the top, an error status with garbage
      weight: 3,
      arbitrary: fc
        .oneof(
          fc.nat().map((n) => {
            const t = listText(current);
            return t.slice(0, n % Math.max(1, t.length - 1));
          }),
          fc
            .constantFrom<unknown>("abc", 5, {}, true, JSON.parse('{"toString":1}'))
            .map((items) =>
              JSON.stringify({ kind: "ServiceList", metadata: { resourceVersion: "9" }, items }),
            ),
          fc
            .constantFrom<unknown>(5, {}, ["1"], true)
            .map((v) => JSON.stringify({ kind: "ServiceList", metadata: { resourceVersion: v }, items: [] })),
          fc.constantFrom("[]", "null", '"ServiceList"', "<html>502 Bad Gateway</html>", ""),
          fc.constant(JSON.stringify({ kind: "ServiceList", metadata: "rv", items: [] })),
        )
        .chain((text) =>
          fc.tuple(fc.constantFrom(200, 200, 500, 502), cutsArb).map(
            ([status, cuts]): Answer => ({
              on: "list",
              reply: { status, text, cuts, end: "end" },
              effect: { kind: "none" },
            }),
          ),
        ),
    },
  );

/** the answers of a case: a list (maybe broken first), then watches; a 410 asks for another list */
export const scriptArb = (good: readonly unknown[]): fc.Arbitrary<Script> =>
  fc
    .tuple(
      fc.option(listReply(good), { nil: undefined }),
      fc.array(watchReply, { minLength: 1, maxLength: 3 }),
      fc.array(listReply(good), { minLength: 1, maxLength: 2 }),
    )
    .map(([firstList, watches, relists]) => {
      const script: Answer[] = [];
      const modelList: Answer = {
        on: "list",
        reply: { status: 200, text: "__MODEL__", cuts: [], end: "end" },
        effect: { kind: "none" },
      };
      if (firstList) script.push(firstList);
      if (!firstList || firstList.effect.kind === "none")
        script.push({
          on: "list",
          reply: { status: 200, text: listText(good), cuts: [], end: "end" },
          effect: { kind: "replace", items: good },
        });
      for (const w of watches) {
        script.push(w);
        if (!w.expires) continue;
        // the reflector lists again: the broken answers, up to the first usable one
        const usable = relists.findIndex((r) => r.effect.kind !== "none");
        script.push(...(usable < 0 ? [...relists, modelList] : relists.slice(0, usable + 1)));
      }
      return script;
    });

// ---------------------------------------------------------------- the oracle

/** The store a reflector must hold: key → raw object, as client-go's reflector applies answers. */
export class Model {
  readonly store = new Map<string, Record<string, unknown>>();
  /** items of the last list, and events since, that had no usable key (the source reports them) */
  listRejects = 0;
  watchRejects = 0;

  apply(effect: Effect): void {
    if (effect.kind === "replace") {
      this.store.clear();
      this.listRejects = 0;
      this.watchRejects = 0;
      for (const item of effect.items) {
        const key = keyOf(item);
        if (key !== undefined) this.store.set(key, item as Record<string, unknown>);
        else this.listRejects++;
      }
    } else if (effect.kind === "events") {
      for (const [type, object] of effect.events) {
        const key = keyOf(object);
        if (key === undefined) {
          this.watchRejects++;
          continue;
        }
        if (type === "DELETED") this.store.delete(key);
        else this.store.set(key, object as Record<string, unknown>);
      }
    }
  }

  /** the list answer for the current store (a list again: no rejects) */
  listText(): string {
    this.listRejects = 0;
    this.watchRejects = 0;
    return listText([...this.store.values()]);
  }
}

/** namespace/name, or undefined when the object has no usable key (not stored, reported) */
export function keyOf(item: unknown): string | undefined {
  if (typeof item !== "object" || item === null || Array.isArray(item)) return undefined;
  const meta = (item as { metadata?: unknown }).metadata as { name?: unknown; namespace?: unknown } | null;
  if (typeof meta !== "object" || meta === null || Array.isArray(meta)) return undefined;
  if (typeof meta.name !== "string") return undefined;
  if (meta.namespace !== undefined && meta.namespace !== null && typeof meta.namespace !== "string")
    return undefined;
  return `${meta.namespace ?? ""}/${meta.name}`;
}

// ---------------------------------------------------------------- the server

/**
 * Serves one case's Script in order for the Services collection (list: GET without
 * `watch`, watch: `watch=true`), the model's list when a list is asked for past the script,
 * and for every other collection an empty list and a silent watch. Test-only.
 */
export class ReplayApiServer {
  readonly #server: Server;
  readonly #sockets = new Set<Socket>();
  #script: Script = [];
  #model: Model | undefined;
  /** the script's position */
  served = 0;
  /** requests that came past the end of the script, and while a reply was still due */
  extra = 0;
  port = 0;
  errors: string[] = [];

  constructor() {
    this.#server = createServer((req, res) => this.#handle(req, res));
    this.#server.on("connection", (s) => {
      this.#sockets.add(s);
      s.on("close", () => this.#sockets.delete(s));
    });
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  async start(): Promise<void> {
    await new Promise<void>((r) => this.#server.listen({ host: "127.0.0.1", port: 0 }, r));
    this.port = (this.#server.address() as { port: number }).port;
  }

  /** the case's bearer token: requests with another (a closed source's last watch) get a silent answer */
  token = "";

  load(script: Script, model: Model, token: string): void {
    this.token = token;
    this.#script = script;
    this.#model = model;
    this.served = 0;
    this.extra = 0;
  }

  /** every answer of the script was given */
  get done(): boolean {
    return this.served >= this.#script.length;
  }

  cut(): void {
    for (const s of this.#sockets) s.destroy();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((r) => this.#server.close(r));
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? "/", "http://x");
    const watch = url.searchParams.get("watch") === "true";
    res.on("error", () => {});
    if (url.pathname !== "/api/v1/services" || req.headers.authorization !== `Bearer ${this.token}`) {
      if (watch) return void res.writeHead(200, { "content-type": "application/json" }).flushHeaders();
      const kind = url.pathname.split("/").pop() ?? "";
      return void res.writeHead(200, { "content-type": "application/json" }).end(
        JSON.stringify({
          kind: `${kind}List`,
          apiVersion: "v1",
          metadata: { resourceVersion: "1" },
          items: [],
        }),
      );
    }
    const next = this.#script[this.served];
    if (!next || next.on !== (watch ? "watch" : "list")) {
      // past the script (or a request the script did not expect): the model's list, a silent watch
      if (next)
        this.errors.push(`expected a ${next.on} at step ${this.served}, got a ${watch ? "watch" : "list"}`);
      else this.extra++;
      if (watch) return void res.writeHead(200, { "content-type": "application/json" }).flushHeaders();
      return void res.writeHead(200, { "content-type": "application/json" }).end(this.#model?.listText());
    }
    this.served++;
    this.#model?.apply(next.effect);
    const { reply } = next;
    res.writeHead(reply.status, { "content-type": "application/json" });
    const body = Buffer.from(reply.text === "__MODEL__" ? (this.#model?.listText() ?? "") : reply.text);
    const at = [...new Set(reply.cuts.map((f) => Math.floor(f * body.length)))].sort((a, b) => a - b);
    const chunks = [...at, body.length]
      .map((to, i) => body.subarray(i === 0 ? 0 : at[i - 1], to))
      .filter((c) => c.length > 0);
    const write = (i: number) => {
      if (res.destroyed) return;
      if (i < chunks.length) {
        res.write(chunks[i], () => setTimeout(() => write(i + 1), 1));
        return;
      }
      // a cut: the connection goes without the chunked body's end (after the bytes left)
      if (reply.end === "end") res.end();
      else setTimeout(() => res.socket?.destroy(), 5);
    };
    write(0);
  }
}
