/**
 * A broken manifest arrives mid-run (issue 16 §1), in the lab as root with real packets
 * (test/fixtures/lab/rolling/): while clients open a new connection every 20 ms to two
 * VIPs (`roll/steady`, eTP Local; `roll/cluster`, eTP Cluster) and hold long-lived ones to
 * `roll/steady`, the manifest folder that `passlb lb` and every `passlb agent` watch gets
 *   - a file that is not YAML;
 *   - the Service `roll/cluster` with a port out of range (`spec.ports[0].port: 70000`);
 *   - the EndpointSlice of `roll/cluster` with an endpoint address that is not an IP.
 * Bounds: the last good state of everything is kept — 0 failed new connections to either
 * VIP (the broken object's own Service included: "the Service in error keeps its last
 * good data plane", docs/architecture.md "Conventions"), 0 broken long-lived ones — and the LB's and the
 * agents' logs name the file, the object and the field. After each case the folder is repaired and
 * both VIPs serve again before the next.
 * Root only; otherwise skipped with the reason. The lab (`fbad<pid>`) is removed when the
 * test ends, pass or fail.
 */
import assert from "node:assert/strict";
import { readFileSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { parseAllDocuments, stringify } from "yaml";
import { labUnavailable, sleep, startLab } from "./lab-harness.ts";
import { holdLoad, streamFigures, streamLoad, waitServing } from "./under-load.ts";

const TOPOLOGY = "test/fixtures/lab/rolling/topology.yaml";
const RUN_MS = 11_000;
/** the clients are up and connected (their start included, on a loaded machine) */
const SETTLE_MS = 4000;
const why = labUnavailable();

interface BadInput {
  readonly what: string;
  /** writes the broken input into the folder */
  readonly write: (dir: string) => void;
  /** what a log line must name: file, object, field */
  readonly names: readonly RegExp[];
}

/** Rewrites one file of the folder atomically (as the lab does), editing its documents. */
function editFile(dir: string, file: string, edit: (docs: Record<string, unknown>[]) => void): void {
  const path = join(dir, file);
  const docs = parseAllDocuments(readFileSync(path, "utf8")).map((d) => d.toJS() as Record<string, unknown>);
  edit(docs);
  writeFileSync(`${path}.tmp`, docs.map((d) => stringify(d)).join("---\n"));
  renameSync(`${path}.tmp`, path);
}
const named = (docs: Record<string, unknown>[], kind: string, name: string) => {
  const d = docs.find(
    (x) => x.kind === kind && (x.metadata as { name?: string } | undefined)?.name?.startsWith(name),
  );
  if (!d) throw new Error(`no ${kind} ${name}`);
  return d as { spec: { ports: { port: number }[] }; endpoints: { addresses: string[] }[] };
};

const CASES: readonly BadInput[] = [
  {
    what: "a file that is not YAML",
    write: (dir) => writeFileSync(join(dir, "broken.yaml"), "kind: Service\nmetadata: { name: oops\n"),
    names: [/broken\.yaml/],
  },
  {
    what: "a Service with a port out of range",
    write: (dir) =>
      editFile(dir, "services.yaml", (docs) => {
        named(docs, "Service", "cluster").spec.ports[0]!.port = 70000;
      }),
    names: [/services\.yaml/, /Service roll\/cluster/, /spec\.ports\[0\]\.port/],
  },
  {
    what: "an EndpointSlice with an address that is not an IP",
    write: (dir) =>
      editFile(dir, "endpointslices.yaml", (docs) => {
        named(docs, "EndpointSlice", "cluster-lab-v4").endpoints[0]!.addresses = ["not-an-ip"];
      }),
    names: [/endpointslices\.yaml/, /EndpointSlice roll\/cluster-lab-v4-0/, /endpoints\[0\]\.addresses\[0\]/],
  },
];

test("a broken manifest mid-run: the last good state is kept, the error names file, object and field", {
  timeout: 240_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "fbad", lb: true });
  const steady = { client: "client-a", target: `${await lab.vip("roll/steady")}:82` };
  const cluster = { client: "client-b", target: `${await lab.vip("roll/cluster")}:81` };
  const dir = lab.state.manifestsDir;
  const logs = lab.state.processes.filter((p) => p.role === "lb" || p.role === "agent");
  for (const c of CASES)
    await t.test(c.what, async (st) => {
      await waitServing(lab, [steady, cluster]);
      const from = new Map(logs.map((p) => [p.log, readFileSync(p.log, "utf8").length]));
      const runs = [streamLoad(lab, steady, RUN_MS), streamLoad(lab, cluster, RUN_MS)];
      const held = holdLoad(lab, { ...steady, client: "client-b" }, RUN_MS);
      await sleep(SETTLE_MS);
      const faultAt = Date.now();
      c.write(dir);
      const [a, b] = await Promise.all(runs);
      const h = await held;
      // repair: the folder as the topology says, without the extra file
      rmSync(join(dir, "broken.yaml"), { force: true });
      await lab.update((topo) => topo);
      const fresh = (p: (typeof logs)[number]) => readFileSync(p.log, "utf8").slice(from.get(p.log) ?? 0);
      const lines = (p: (typeof logs)[number]) =>
        fresh(p)
          .split("\n")
          .filter((l) => c.names[0]!.test(l));
      const lbLines = lines(logs.find((p) => p.role === "lb")!);
      const agentLines = logs.filter((p) => p.role === "agent").map(lines);
      const figures = [a!, b!].map((s) => streamFigures(s, faultAt));
      st.diagnostic(
        `${c.what}: steady ${figures[0]!.failed.length} of ${a!.events.length} failed ${JSON.stringify(figures[0]!.errors)}, cluster ${figures[1]!.failed.length} of ${b!.events.length} failed ${JSON.stringify(figures[1]!.errors)}; long-lived ${h.connections.filter((x) => !x.ok).length} of ${h.connections.length} broke; the LB said: ${lbLines.slice(0, 2).join(" | ")}; node-a1's agent said: ${(agentLines[0] ?? []).slice(0, 2).join(" | ")}`,
      );
      for (const [i, f] of figures.entries()) {
        assert.ok(
          f.before.length >= 20 && f.after(1000).length >= 150,
          `connections before (${f.before.length}) and after (${f.after(1000).length}) the input`,
        );
        assert.deepEqual(f.failed, [], `new connections to ${i === 0 ? "steady" : "cluster"} failed`);
      }
      assert.deepEqual(
        h.connections.filter((x) => !x.ok),
        [],
        "long-lived connections broke",
      );
      for (const [who, found] of [
        ["the LB", lbLines],
        ...agentLines.map((l, i) => [`the agent of ${logs.filter((p) => p.role === "agent")[i]!.host}`, l]),
      ] as [string, string[]][])
        for (const re of c.names)
          assert.ok(
            found.some((l) => re.test(l)),
            `${who}'s log names ${re} (${JSON.stringify(found.slice(0, 3))})`,
          );
    });
});
