/**
 * Hostile API answers to the Kubernetes source (issue 16 §3): per case a generated script
 * of list and watch answers for Services (test/kube-fuzz.ts) is replayed byte for byte by a
 * minimal HTTP server to passlb's real client stack — clientNodeTransport over
 * @kubernetes/client-node (KubeConfig, Watch), the ResourceReflector, the
 * KubeSnapshotSource. Per case: no exception anywhere (uncaught or unhandled), the source
 * settles within 5 s of the last answer, and its read holds exactly the objects the model
 * says decode (the last good state of everything the broken answers did not touch),
 * reports every object that does not decode by name and field, and reports the items and
 * events it could not store. 150 cases with a fixed seed; plus the regression tests of the
 * bugs the fuzzing found.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { KubeConfig } from "@kubernetes/client-node";
import fc from "fast-check";
import { KubeSnapshotSource } from "../src/cluster/kube-source.ts";
import { clientNodeTransport, listPage } from "../src/cluster/kube-transport.ts";
import { realClock } from "../src/health/clock.ts";
import { decodeDocuments, formatPath } from "../src/k8s/decode.ts";
import { type Answer, Model, NS, ReplayApiServer, type Script, scriptArb, service } from "./kube-fuzz.ts";
import { kubeconfigText } from "./support/fake-api-kubeconfig.ts";

const RUNS = 150;
const SETTLE_MS = 5000;

const good = [service("a", 80, 1), service("b", 443, 2), service("c", 8443, 3)];

function source(server: ReplayApiServer): KubeSnapshotSource {
  const config = new KubeConfig();
  config.loadFromString(kubeconfigText(server.url, server.token, undefined));
  return new KubeSnapshotSource({
    transport: clientNodeTransport(config),
    clock: realClock(),
    random: Math.random,
    backoff: { initialMs: 5, maxMs: 40 },
    debounce: { quietMs: 5, maxMs: 50 },
  });
}

/** what the source must hand out for the model's store: decoded objects and problems */
function expected(model: Model) {
  const services: unknown[] = [];
  const problems: string[] = [];
  const kindProblems: string[] = [];
  for (const [key, raw] of [...model.store].sort(([a], [b]) => (a < b ? -1 : 1))) {
    // as the reflector stores it: kind and apiVersion filled in when they are not strings
    const value = {
      ...raw,
      kind: typeof raw.kind === "string" ? raw.kind : "Service",
      apiVersion: typeof raw.apiVersion === "string" ? raw.apiVersion : "v1",
    };
    const d = decodeDocuments([{ source: "kube-api", index: 1, value }]);
    if (d.problems.length > 0)
      for (const p of d.problems)
        problems.push(`${p.object}: ${p.path.length > 0 ? `${formatPath(p.path)}: ` : ""}${p.message}`);
    else if (d.snapshot.services.length === 1) services.push(d.snapshot.services[0]);
    else kindProblems.push(`Service ${key.replace(/^\//, "")}: kind: `);
  }
  return { services, problems, kindProblems };
}

let cases = 0;
async function runCase(server: ReplayApiServer, script: Script) {
  const model = new Model();
  server.load(script, model, `case-${++cases}`);
  const src = source(server);
  const reads: { services: readonly unknown[]; problems: readonly string[] }[] = [];
  void src.start({
    onChange: () => {},
    onRead: (r) => {
      if (r.ok) reads.push({ services: r.snapshot.services, problems: r.problems });
    },
  });
  try {
    const deadline = performance.now() + 20_000;
    while (!server.done && performance.now() < deadline) await new Promise((r) => setTimeout(r, 5));
    assert.ok(server.done, `the source stopped asking after answer ${server.served} of ${script.length}`);
    const settleBy = performance.now() + SETTLE_MS;
    let diff = "";
    for (;;) {
      await new Promise((r) => setTimeout(r, 10));
      await src.flush();
      const want = expected(model);
      const last = reads[reads.length - 1];
      diff = check(last, want, model);
      if (diff === "") return;
      if (performance.now() > settleBy) break;
    }
    assert.fail(`not settled ${SETTLE_MS} ms after the last answer: ${diff}`);
  } finally {
    await src.close();
    server.cut();
    assert.deepEqual(server.errors, [], "the source asked in an order the script did not expect");
  }
}

function check(
  last: { services: readonly unknown[]; problems: readonly string[] } | undefined,
  want: ReturnType<typeof expected>,
  model: Model,
): string {
  if (!last) return "no read yet";
  const key = (s: unknown) => {
    const m = (s as { metadata: { namespace?: string; name: string } }).metadata;
    return `${m.namespace ?? ""}/${m.name}`;
  };
  const have = [...last.services].sort((a, b) => (key(a) < key(b) ? -1 : 1));
  try {
    assert.deepEqual(have, want.services);
  } catch {
    return `services ${JSON.stringify(have.map(key))}, want ${JSON.stringify(want.services.map(key))} (or their content differs)`;
  }
  const missing = want.problems.filter((p) => !last.problems.includes(p));
  const noKind = want.kindProblems.filter((p) => !last.problems.some((q) => q.startsWith(p)));
  if (missing.length + noKind.length > 0)
    return `problems missing: ${JSON.stringify([...missing, ...noKind])}`;
  const listed = last.problems.filter((p) => p.startsWith("Service list item ")).length;
  const events = last.problems.filter((p) => p.startsWith("Service watch event ")).length;
  if (
    model.listRejects + model.watchRejects <= 20 &&
    (listed !== model.listRejects || events !== model.watchRejects)
  )
    return `rejects reported: ${listed} list items / ${events} events, want ${model.listRejects} / ${model.watchRejects}`;
  const other = last.problems.filter(
    (p) =>
      !want.problems.includes(p) &&
      !want.kindProblems.some((k) => p.startsWith(k)) &&
      !/^Service (list item|watch event|more items)/.test(p),
  );
  if (other.length > 0) return `unexpected problems: ${JSON.stringify(other)}`;
  return "";
}

test("fuzz: 150 scripts of hostile list and watch answers, no crash, no hang, last good state kept, bad objects named", {
  timeout: 600_000,
}, async (t) => {
  const crashes: string[] = [];
  const onCrash = (e: unknown) => crashes.push(e instanceof Error ? (e.stack ?? e.message) : String(e));
  process.on("uncaughtException", onCrash);
  process.on("unhandledRejection", onCrash);
  t.after(() => {
    process.off("uncaughtException", onCrash);
    process.off("unhandledRejection", onCrash);
  });
  const server = new ReplayApiServer();
  await server.start();
  t.after(() => server.close());
  const counts = { answers: 0, lists: 0, watches: 0, cut: 0, expired: 0 };
  await fc.assert(
    fc.asyncProperty(scriptArb(good), async (script) => {
      counts.answers += script.length;
      for (const a of script as Answer[]) {
        if (a.on === "list") counts.lists++;
        else counts.watches++;
        if (a.reply.end === "destroy") counts.cut++;
        if (a.expires) counts.expired++;
      }
      await runCase(server, script);
      assert.deepEqual(crashes, [], "an exception escaped");
    }),
    { numRuns: RUNS, seed: 16, endOnFailure: true, includeErrorInReport: true },
  );
  t.diagnostic(`${RUNS} scripts: ${JSON.stringify(counts)}`);
});

test("a list whose items or metadata have the wrong type is an error, not an empty list", () => {
  // found by the fuzzer: `items: "abc"` was spread into three characters, every one
  // dropped, and the store replaced by nothing — every Service gone from the LB
  for (const [text, why] of [
    ['{"items":"abc","metadata":{"resourceVersion":"5"}}', /items is a string, not an array/],
    ['{"items":{},"metadata":{"resourceVersion":"5"}}', /items is an object/],
    ['{"items":[],"metadata":{"resourceVersion":5}}', /metadata\.resourceVersion is a number, not a string/],
    ['{"items":[],"metadata":{"continue":{}}}', /metadata\.continue is an object/],
    ['{"items":[],"metadata":"x"}', /metadata is a string/],
    ["[]", /an array, not an object/],
    ['{"items":[', /not JSON/],
  ] as const)
    assert.throws(
      () => listPage(text, "/api/v1/services"),
      (e: Error & { code?: string }) => e.code === "api_answer_invalid" && why.test(e.message),
      text,
    );
  // Go's nil slice, and a missing one, are no items
  assert.deepEqual(listPage('{"items":null,"metadata":{"resourceVersion":"7"}}', "/p"), {
    items: [],
    resourceVersion: "7",
    continue: "",
  });
});

test("an unusable list item or event, or another kind in the collection, is reported, and nothing crashes", async (t) => {
  // found by the fuzzer: a list item whose metadata.namespace is an object with an own
  // `toString` key made the store's key (a template literal) throw inside the list loop —
  // an unhandled rejection that ends the process; items without a string name, and a
  // Pod in the Services watch, vanished without a word
  const crashes: unknown[] = [];
  const onCrash = (e: unknown) => crashes.push(e);
  process.on("unhandledRejection", onCrash);
  t.after(() => process.off("unhandledRejection", onCrash));
  const server = new ReplayApiServer();
  await server.start();
  t.after(() => server.close());
  const items = [
    service("a", 80, 1),
    { metadata: { name: "x", namespace: JSON.parse('{"toString":1}') } },
    { metadata: { name: 7 } },
    null,
  ];
  const list = JSON.stringify({ metadata: { resourceVersion: "9" }, items });
  const pod = { ...service("p", 80, 10), kind: "Pod" };
  const watch = `${JSON.stringify({ type: "ADDED", object: pod })}\n${JSON.stringify({ type: "MODIFIED", object: { metadata: {} } })}\n${JSON.stringify({ type: "ERROR", object: JSON.parse('{"code":500,"reason":{"toString":0},"message":[1]}') })}\n`;
  const model = new Model();
  const script: Answer[] = [
    {
      on: "list",
      reply: { status: 200, text: list, cuts: [], end: "end" },
      effect: { kind: "replace", items },
    },
    {
      on: "watch",
      reply: { status: 200, text: watch, cuts: [], end: "end" },
      effect: {
        kind: "events",
        events: [
          ["ADDED", pod],
          ["MODIFIED", { metadata: {} }],
        ],
      },
    },
  ];
  server.load(script, model, "regression");
  const src = source(server);
  t.after(() => src.close());
  const reads: string[][] = [];
  void src.start({ onChange: () => {}, onRead: (r) => void (r.ok && reads.push([...r.problems])) });
  const deadline = Date.now() + 5000;
  const want = [
    'Service fuzz/p: kind: "Pod" (apiVersion "v1") is not a Service (v1); left out',
    'Service list item 1: "x": metadata.namespace is an object, not a string; left out',
    "Service list item 2: metadata.name is a number, not a string; left out",
    "Service list item 3: null, not an object; left out",
    "Service watch event MODIFIED: metadata.name is missing, not a string; ignored",
  ];
  while (Date.now() < deadline && JSON.stringify(reads.at(-1)) !== JSON.stringify(want)) {
    await new Promise((r) => setTimeout(r, 20));
    await src.flush();
  }
  assert.deepEqual(reads.at(-1), want);
  assert.deepEqual(
    src.snapshot?.services.map((s) => s.metadata.name),
    ["a"],
  );
  assert.deepEqual(crashes, []);
  assert.equal(NS, "fuzz");
});
