/**
 * The manifest fuzzer (issue 16 §3), shared by test/manifest-fuzz.test.ts (a few thousand
 * cases) and bench/manifest-fuzz.bench.ts (100,000): fast-check generates manifest text —
 * valid clusters, near-valid ones (one field replaced by something hostile) and garbage
 * (random text, random JSON, billion-laughs aliases, duplicate keys, deep nesting) — and
 * `runPipeline` takes it the whole way `passlb plan` and `passlb lb` do: parse → decode →
 * plan → the provider views (GKE, Azure, passlb text) → the LB's nftables transaction (the
 * real LbController with a recording applier) and every node agent's ruleset. Names,
 * labels, annotations and port names carry random unicode and injection attempts.
 *
 * `scriptProblems` is the escaping property: a rendered nft script is printable ASCII,
 * quotes only passlb's own hash comments, and contains no input name that is not already a
 * plain nft identifier. `nftCheckAll` feeds scripts to the real `nft --check` in a
 * namespace, in batches (the LB's under a table name of its own per case), and finds the
 * culprit of a refused batch one by one.
 */
import { spawnSync } from "node:child_process";
import fc from "fast-check";
import { stringify } from "yaml";
import { runAzure } from "../src/cli/provider-azure.ts";
import { runGke } from "../src/cli/provider-gke.ts";
import type { NftDriver } from "../src/drivers/nft.ts";
import { nftScript } from "../src/drivers/nft-transaction.ts";
import { FakeClock } from "../src/health/clock.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import { parseDocuments } from "../src/k8s/documents.ts";
import type { Snapshot } from "../src/k8s/snapshot.ts";
import { LbController } from "../src/lb-host/nftables/lb-controller.ts";
import { kernelTableSize } from "../src/lb-host/nftables/render/kernel-table-size.ts";
import { agentRulesFromSnapshot } from "../src/node-agent/agent-rules-snapshot.ts";
import { agentRuleset } from "../src/node-agent/agent-ruleset.ts";
import { renderPlansText } from "../src/plan/plan-text.ts";
import { createPlanCache, planSnapshot } from "../src/plan/planner.ts";

// ---------------------------------------------------------------- generators

const HOSTILE = [
  'x"; flush ruleset; "',
  "a\nadd table inet evil",
  "b\r\ndelete table inet passlb",
  "c} ; flush ruleset ; {",
  "d # comment",
  "e\u0000f",
  "é-ü",
  "名前",
  "🙂",
  "$(reboot)",
  "@dispatch4",
  "..",
  "-lead",
  "a".repeat(300),
  "",
  " ",
];
const dnsLabel = fc.stringMatching(/^[a-z]([a-z0-9-]{0,14}[a-z0-9])?$/);
/** names: mostly valid, often hostile or random unicode */
const nameArb = fc.oneof(
  { weight: 4, arbitrary: dnsLabel },
  { weight: 2, arbitrary: fc.constantFrom(...HOSTILE) },
  { weight: 2, arbitrary: fc.string({ unit: "binary", maxLength: 40 }) },
  { weight: 1, arbitrary: fc.string({ unit: "grapheme", maxLength: 20 }) },
);
const hugeNumber = fc.constantFrom(
  2 ** 31,
  2 ** 53 + 1,
  1e308,
  -1,
  0,
  65536,
  Number.MAX_SAFE_INTEGER,
  1.5,
  Number.NaN,
  Number.POSITIVE_INFINITY,
);
const portArb = fc.oneof(
  { weight: 6, arbitrary: fc.integer({ min: 1, max: 65535 }) },
  { weight: 1, arbitrary: hugeNumber },
  { weight: 1, arbitrary: fc.constantFrom("80", "http", null, true) },
);
const ipv4 = fc
  .tuple(fc.constantFrom("192.0.2", "198.51.100", "203.0.113"), fc.integer({ min: 0, max: 255 }))
  .map(([p, n]) => `${p}.${n}`);
const ipv6 = fc.integer({ min: 1, max: 0xffff }).map((n) => `fd00:10::${n.toString(16)}`);
const addrArb = fc.oneof(
  { weight: 4, arbitrary: ipv4 },
  { weight: 2, arbitrary: ipv6 },
  {
    weight: 1,
    arbitrary: fc.constantFrom("300.1.1.1", "::ffff:1.2.3.4", "fd00::/8", "1.2.3", "", "0.0.0.0"),
  },
  { weight: 1, arbitrary: nameArb },
);
const cidrArb = fc.oneof(
  ipv4.map((a) => `${a}/${24 + (a.length % 9)}`),
  fc.constantFrom("192.0.2.0/24", "0.0.0.0/0", "fd00::/8", "::/0", "192.0.2.1/33", "bogus", "10.0.0.0/-1"),
  nameArb,
);
const KNOWN_ANNOTATIONS = [
  "networking.gke.io/weighted-load-balancing",
  "cloud.google.com/l4-rbs",
  "networking.gke.io/load-balancer-type",
  "service.beta.kubernetes.io/azure-load-balancer-internal",
  "service.beta.kubernetes.io/azure-load-balancer-health-probe-request-path",
  "service.beta.kubernetes.io/azure-load-balancer-health-probe-interval",
  "service.beta.kubernetes.io/azure-load-balancer-health-probe-num-of-probe",
  "service.beta.kubernetes.io/azure-load-balancer-tcp-idle-timeout",
  "service.beta.kubernetes.io/azure-pip-name",
  "passlb.io/pool",
];
const annotationsArb = fc.dictionary(
  fc.oneof(fc.constantFrom(...KNOWN_ANNOTATIONS), nameArb),
  fc.oneof(nameArb, fc.constantFrom("true", "false", "pods-per-node", "5", "-1", "99999999999999999999")),
  { maxKeys: 4 },
);
const labelsArb = fc.dictionary(nameArb, nameArb, { maxKeys: 3 });

interface Cluster {
  readonly docs: unknown[];
}

/** `hostile`: every field may be anything (near-valid); otherwise well-formed values, with
 * random unicode only where Kubernetes allows any text (annotation values) */
function clusterArb(hostile: boolean): fc.Arbitrary<Cluster> {
  const pick = <T, U>(good: fc.Arbitrary<T>, bad: fc.Arbitrary<U>): fc.Arbitrary<T | U> =>
    hostile ? fc.oneof({ weight: 3, arbitrary: good }, { weight: 1, arbitrary: bad }) : good;
  const name = pick(dnsLabel, nameArb);
  const port = pick(fc.integer({ min: 1, max: 65535 }), portArb);
  const nodePortArb = pick(fc.integer({ min: 30000, max: 32767 }), portArb);
  const nodeArb = fc.record({
    name: pick(fc.constantFrom("node-a", "node-b", "node-c"), nameArb),
    zone: fc.constantFrom("zone-a", "zone-b"),
    address: ipv4,
    address6: fc.option(ipv6, { nil: undefined }),
  });
  const serviceArb = fc.record({
    name,
    namespace: pick(fc.constantFrom("default", "shop"), nameArb),
    labels: hostile ? labelsArb : fc.dictionary(dnsLabel, dnsLabel, { maxKeys: 3 }),
    annotations: hostile
      ? annotationsArb
      : fc.dictionary(
          fc.oneof(fc.constantFrom(...KNOWN_ANNOTATIONS), dnsLabel),
          fc.oneof(
            fc.constantFrom("true", "false", "pods-per-node", "5"),
            fc.string({ unit: "grapheme", maxLength: 20 }),
          ),
          { maxKeys: 3 },
        ),
    policy: pick(fc.constantFrom("Cluster", "Local"), fc.constantFrom("bogus", undefined)),
    affinity: pick(fc.constantFrom("None", "ClientIP", undefined), fc.constantFrom("Sticky", 7)),
    families: pick(
      fc.constantFrom(["IPv4"], ["IPv6"], ["IPv4", "IPv6"], undefined),
      fc.constantFrom(["IPv7"], []),
    ),
    ranges: fc.option(
      fc.array(
        pick(
          ipv4.map((a) => `${a}/32`),
          cidrArb,
        ),
        { maxLength: 3 },
      ),
      { nil: undefined },
    ),
    ports: fc.uniqueArray(
      fc.record({
        name: pick(dnsLabel, fc.option(nameArb, { nil: undefined })),
        port,
        protocol: pick(fc.constantFrom("TCP", "UDP", "SCTP", "TCP"), fc.constantFrom("ICMP", undefined)),
        nodePort: fc.option(nodePortArb, { nil: undefined }),
        targetPort: fc.option(pick(fc.integer({ min: 1, max: 65535 }), fc.oneof(portArb, nameArb)), {
          nil: undefined,
        }),
      }),
      { minLength: hostile ? 0 : 1, maxLength: 3, selector: (p) => p.name ?? "" },
    ),
    hcnp: fc.option(nodePortArb, { nil: undefined }),
    lbIp: hostile ? fc.option(addrArb, { nil: undefined }) : fc.constant(undefined),
    endpoints: fc.array(
      fc.record({
        address: pick(ipv4, addrArb),
        node: pick(fc.constantFrom("node-a", "node-b", "node-c"), fc.constant("nosuch")),
        ready: pick(fc.boolean(), fc.constantFrom(undefined, "yes")),
        terminating: fc.boolean(),
      }),
      { maxLength: 5 },
    ),
  });
  return fc
    .record({
      nodes: hostile
        ? fc.array(nodeArb, { minLength: 1, maxLength: 3 })
        : fc.uniqueArray(nodeArb, { minLength: 1, maxLength: 3, selector: (n) => n.name }),
      services: hostile
        ? fc.array(serviceArb, { minLength: 1, maxLength: 3 })
        : fc.uniqueArray(serviceArb, {
            minLength: 1,
            maxLength: 3,
            selector: (s) => `${s.namespace}/${s.name}`,
          }),
      pools: fc.array(
        pick(fc.constantFrom("203.0.113.10-203.0.113.40", "fd00:10::10-fd00:10::40"), cidrArb),
        {
          minLength: 1,
          maxLength: 2,
        },
      ),
      zones: fc.boolean(),
    })
    .map(({ nodes, services, pools, zones }) => {
      const docs: unknown[] = [
        {
          apiVersion: "passlb.io/v1alpha1",
          kind: "PasslbConfig",
          metadata: { name: "default" },
          spec: {
            defaultClass: true,
            pools: [{ name: "default", addresses: pools }],
            ...(zones && { zones: [{ name: "zone-a", clientCIDRs: ["192.0.2.0/25"] }] }),
          },
        },
      ];
      for (const n of nodes)
        docs.push({
          apiVersion: "v1",
          kind: "Node",
          metadata: { name: n.name, labels: { "topology.kubernetes.io/zone": n.zone } },
          spec: {},
          status: {
            addresses: [
              { type: "InternalIP", address: n.address },
              ...(n.address6 ? [{ type: "InternalIP", address: n.address6 }] : []),
            ],
            conditions: [{ type: "Ready", status: "True" }],
          },
        });
      for (const s of services) {
        docs.push({
          apiVersion: "v1",
          kind: "Service",
          metadata: { name: s.name, namespace: s.namespace, labels: s.labels, annotations: s.annotations },
          spec: {
            type: "LoadBalancer",
            ...(s.policy && { externalTrafficPolicy: s.policy }),
            ...(s.affinity && { sessionAffinity: s.affinity }),
            ...(s.families && { ipFamilies: s.families, ipFamilyPolicy: "PreferDualStack" }),
            ...(s.ranges && { loadBalancerSourceRanges: s.ranges }),
            ...(s.hcnp !== undefined && (hostile || s.policy === "Local") && { healthCheckNodePort: s.hcnp }),
            ...(s.lbIp !== undefined && { loadBalancerIP: s.lbIp }),
            selector: { app: s.name },
            ports: s.ports.map((p) => ({
              ...(p.name !== undefined && { name: p.name }),
              port: p.port,
              ...(p.protocol && { protocol: p.protocol }),
              ...(p.nodePort !== undefined && { nodePort: p.nodePort }),
              ...(p.targetPort !== undefined && { targetPort: p.targetPort }),
            })),
          },
        });
        docs.push({
          apiVersion: "discovery.k8s.io/v1",
          kind: "EndpointSlice",
          metadata: {
            name: `${s.name}-1`,
            namespace: s.namespace,
            labels: { "kubernetes.io/service-name": s.name },
          },
          addressType: s.endpoints.some((e) => e.address.includes(":")) ? "IPv6" : "IPv4",
          ports: s.ports.map((p) => ({
            ...(p.name !== undefined && { name: p.name }),
            port: typeof p.targetPort === "number" ? p.targetPort : 8080,
            ...(p.protocol && { protocol: p.protocol }),
          })),
          endpoints: s.endpoints.map((e) => ({
            addresses: [e.address],
            conditions: { ready: e.ready, serving: e.ready, terminating: e.terminating },
            nodeName: e.node,
          })),
        });
      }
      return { docs };
    });
}

/** One field somewhere replaced by something hostile (near-valid input). */
function mutate(value: unknown, path: number[], replacement: unknown): unknown {
  if (path.length === 0 || value === null || typeof value !== "object") return replacement;
  const entries = Array.isArray(value) ? value.map((v, i) => [i, v] as const) : Object.entries(value);
  if (entries.length === 0) return replacement;
  const [key, child] = entries[path[0]! % entries.length]!;
  const next = mutate(child, path.slice(1), replacement);
  if (Array.isArray(value)) return value.map((v, i) => (i === key ? next : v));
  return { ...(value as object), [key]: next };
}
const deep = (depth: number): unknown => {
  let v: unknown = "bottom";
  for (let i = 0; i < depth; i++) v = i % 2 ? [v] : { a: v };
  return v;
};
const hostileValue = fc.oneof(
  fc.anything({ maxDepth: 3 }),
  hugeNumber,
  fc.constantFrom(...HOSTILE),
  fc.integer({ min: 50, max: 3000 }).map(deep),
  fc.constant(null),
);

function billionLaughs(levels: number, width: number): string {
  const lines = ["a0: &a0 [lol]"];
  for (let i = 1; i <= levels; i++)
    lines.push(`a${i}: &a${i} [${Array.from({ length: width }, () => `*a${i - 1}`).join(", ")}]`);
  return `apiVersion: v1\nkind: Service\nmetadata: { name: laughs }\nspec:\n  type: LoadBalancer\n  ports: [{ port: 80 }]\n${lines.join("\n")}\n`;
}
const garbageText = fc.oneof(
  fc.string({ unit: "binary", maxLength: 300 }),
  fc.json({ maxDepth: 4 }),
  fc
    .tuple(fc.integer({ min: 3, max: 9 }), fc.integer({ min: 2, max: 10 }))
    .map(([l, w]) => billionLaughs(l, w)),
  fc.constantFrom(
    "apiVersion: v1\nkind: Service\nmetadata: { name: a, name: b }\nspec: { type: LoadBalancer, type: ClusterIP, ports: [{ port: 80 }] }\n",
    "apiVersion: v1\napiVersion: v2\nkind: Node\nkind: Service\n",
    `${"[".repeat(5000)}${"]".repeat(5000)}`,
    `${"- ".repeat(2000)}x\n`,
    "--- !!binary AAAA\n",
    "a: !!js/function 'function(){}'\n",
    "? [a, b]\n: c\n",
    "\uFEFFapiVersion: v1\nkind: List\nitems: 7\n",
    '{"apiVersion":"v1","kind":"List","items":[null, 1, "x", {"kind":"Service"}]}',
  ),
  fc.integer({ min: 50, max: 3000 }).map((d) => JSON.stringify(deep(d))),
);

/** YAML or a JSON List; yaml's stringify recurses and overflows on the deep values, JSON does not */
function asText(docs: unknown[], yaml: boolean): string {
  if (yaml)
    try {
      return docs.map((d) => stringify(d)).join("---\n");
    } catch {
      // fall through: the same documents as JSON
    }
  return JSON.stringify({ apiVersion: "v1", kind: "List", items: docs });
}

export type FuzzKind = "valid" | "near-valid" | "garbage";

/** Manifest text of the three kinds, labelled (for the figures). */
export const manifestText: fc.Arbitrary<{ kind: FuzzKind; text: string }> = fc.oneof(
  fc
    .tuple(clusterArb(false), fc.boolean())
    .map(([c, y]) => ({ kind: "valid" as const, text: asText(c.docs, y) })),
  fc
    .tuple(clusterArb(true), fc.array(fc.nat(), { minLength: 1, maxLength: 6 }), hostileValue, fc.boolean())
    .map(([c, path, value, y]) => ({
      kind: "near-valid" as const,
      text: asText(mutate(c.docs, path, value) as unknown[], y),
    })),
  garbageText.map((text) => ({ kind: "garbage" as const, text })),
);

// ---------------------------------------------------------------- the pipeline

export interface PipelineResult {
  readonly documents: number;
  readonly problems: number;
  readonly plans: number;
  /** the LB's transaction ("" when nothing to program), under table `table` */
  readonly lbScript: string;
  readonly agentScripts: readonly string[];
  /** every name from the input that could reach a script */
  readonly names: readonly string[];
  readonly ms: number;
}

const silent = { stdout: () => {}, stderr: () => {}, readStdin: async () => "" };

/** parse → decode → plan → views → LB transaction and agent rulesets; throws only on a bug. */
export async function runPipeline(text: string, table = "passlb"): Promise<PipelineResult> {
  const started = performance.now();
  const parsed = parseDocuments("fuzz.yaml", text);
  const decoded = decodeDocuments(parsed.documents);
  const snapshot: Snapshot = decoded.snapshot;
  const planned = planSnapshot(snapshot);
  renderPlansText(planned.plans, planned.skipped, { explain: true });
  const capture = silent;
  runGke(snapshot, {}, { output: "text", explain: true }, capture);
  runGke(snapshot, {}, { output: "json", explain: false }, capture);
  runAzure(snapshot, {}, { output: "text", explain: true }, capture);
  runAzure(snapshot, {}, { output: "yaml", explain: false }, capture);
  let lbScript = "";
  const nft: NftDriver = {
    run: async (tx) => {
      lbScript = nftScript(tx);
    },
    check: async () => {},
    dump: async () => undefined,
    counters: async () => new Map(),
  };
  const c = new LbController({
    table,
    seed: 1,
    nft,
    clock: new FakeClock(), // never advanced: the fuzz calls syncOnce itself
    sizeFor: kernelTableSize(),
    driftCheckMs: 0,
  });
  await c.start();
  c.setSnapshot(snapshot, decoded.problems.length > 0, false);
  const outcome = await c.syncOnce();
  if (outcome.kind === "failed") throw outcome.cause;
  if (outcome.kind === "retry") throw outcome.cause;
  await c.stop();
  const plans = createPlanCache(); // as the agent keeps one: each node's rules from the same plans
  const agentScripts = snapshot.nodes.map((n) =>
    nftScript(agentRuleset(agentRulesFromSnapshot(snapshot, n.metadata.name ?? "", plans))),
  );
  const names = [
    ...snapshot.services.flatMap((s) => [
      s.metadata.name ?? "",
      s.metadata.namespace ?? "",
      ...(s.spec.ports ?? []).map((p) => p.name ?? ""),
      ...Object.keys(s.metadata.annotations ?? {}),
      ...Object.values(s.metadata.annotations ?? {}),
    ]),
    ...snapshot.nodes.map((n) => n.metadata.name ?? ""),
  ];
  return {
    documents: parsed.documents.length,
    problems: parsed.problems.length + decoded.problems.length,
    plans: planned.plans.length,
    lbScript,
    agentScripts,
    names,
    ms: performance.now() - started,
  };
}

/** characters that would change an nft script's structure if a name carried them in:
 * quotes, line breaks, statement and block separators, comments, NUL, backslash, non-ASCII
 * (a name made only of characters the renderer itself writes, like `@dispatch4`, may occur
 * in a script by coincidence and proves nothing) */
const structural = (name: string): boolean => name.includes("\u0000") || /["'\n\r;{}#$\\]|[^ -~]/.test(name);

/** Escaping: what is wrong with a rendered script, given the input names (empty: fine). */
export function scriptProblems(script: string, names: readonly string[]): string[] {
  const out: string[] = [];
  const bad = /[^\x20-\x7e\n]/.exec(script);
  if (bad)
    out.push(`non-printable or non-ASCII character U+${bad[0].charCodeAt(0).toString(16)} in the script`);
  for (const m of script.matchAll(/"[^"\n]*"?/g))
    if (!/^"passlb [0-9a-f]{8}"$/.test(m[0])) out.push(`unexpected quoted text ${JSON.stringify(m[0])}`);
  for (const name of new Set(names))
    if (name.length >= 2 && structural(name) && script.includes(name))
      out.push(`input name ${JSON.stringify(name)} reached the script unescaped`);
  return out;
}

// ---------------------------------------------------------------- nft --check

function nftCheck(ns: string, script: string): string | undefined {
  const r = spawnSync("ip", ["netns", "exec", ns, "nft", "-c", "-f", "-"], {
    input: script,
    encoding: "utf8",
  });
  return r.status === 0 ? undefined : (r.stderr || r.error?.message || `exit ${r.status}`).trim();
}

/** The real `nft --check` over many scripts, in batches; returns each refused script with nft's error. */
export function nftCheckAll(
  ns: string,
  scripts: readonly string[],
  batch = 100,
): { script: string; error: string }[] {
  const refused: { script: string; error: string }[] = [];
  for (let i = 0; i < scripts.length; i += batch) {
    const part = scripts.slice(i, i + batch);
    if (nftCheck(ns, part.join("\n")) === undefined) continue;
    for (const s of part) {
      const error = nftCheck(ns, s);
      if (error !== undefined) refused.push({ script: s, error });
    }
  }
  return refused;
}
