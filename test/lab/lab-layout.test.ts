/**
 * The lab's pure parts: the topology file's checks, the addressing plan and build steps
 * (golden), and the generated manifests, decoded by the same decoder passlb uses (so the
 * lab feeds the agents and the LB valid input) and checked for the eTP-relevant facts.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { stringify } from "yaml";
import { readManifests } from "../../src/cluster/manifest-files.ts";
import { mergeServiceEndpoints, slicesByService } from "../../src/endpoints/merge.ts";
import { decodeDocuments } from "../../src/k8s/decode.ts";
import { labLayout } from "../../src/lab/lab-layout.ts";
import { labManifests } from "../../src/lab/lab-manifests.ts";
import { parseTopology } from "../../src/lab/topology.ts";
import { assertGolden } from "../golden.ts";

const topologyOf = (path: string) => {
  const read = parseTopology(readFileSync(path, "utf8"));
  if (!read.ok) assert.fail(read.problems.join("; "));
  return read.topology;
};

test("the example topology's layout: documentation addresses only, plb-prefixed names", () => {
  const layout = labLayout(topologyOf("examples/lab/topology.yaml"));
  assertGolden(
    "test/fixtures/lab/layout/qs-commands.golden.txt",
    `${layout.commands.map((c) => c.join(" ")).join("\n")}\n`,
  );
  const allowed = /^(192\.0\.2\.|198\.51\.100\.|203\.0\.113\.|fd00:|fe80::1(\/64)?$|::\/0$)/;
  for (const c of layout.commands)
    for (const word of c)
      if (/^[0-9a-f:.]+(\/\d+)?$/.test(word) && (word.includes(".") || word.includes(":")) && word.length > 3)
        assert.match(word, allowed, `${c.join(" ")}`);
  for (const c of layout.commands) {
    const ns = c[1] === "-n" ? c[2] : c[1] === "netns" ? c[3] : undefined;
    if (ns) assert.match(ns, /^plb-qs-/);
    const i = c.indexOf("add");
    if (c[3] === "link" && i === 4)
      assert.match(c[5]!, /^(plb|eth0$)/, "links are named plb… (eth0 only inside a namespace)");
  }
  assert.deepEqual(
    layout.nodes.map((n) => [n.name, n.ipv4, n.ipv6]),
    [
      ["node-a1", "198.51.100.11", "fd00:198:51:100::11"],
      ["node-a2", "198.51.100.12", "fd00:198:51:100::12"],
      ["node-b1", "198.51.100.21", "fd00:198:51:100::21"],
      ["node-b2", "198.51.100.22", "fd00:198:51:100::22"],
      ["node-c1", "198.51.100.31", "fd00:198:51:100::31"],
      ["node-c2", "198.51.100.32", "fd00:198:51:100::32"],
    ],
  );
  assert.deepEqual(
    layout.clients.map((c) => [c.name, c.zone, c.ipv4]),
    [
      ["client-a", "zone-a", "192.0.2.10"],
      ["client-b", "zone-b", "192.0.2.74"],
      ["client-c", "zone-c", "192.0.2.138"],
    ],
  );
});

test("generated manifests decode cleanly and give the slices the topology describes", async () => {
  const topology = topologyOf("test/fixtures/lab/e2e/topology.yaml");
  const layout = labLayout(topology);
  const services = await readManifests(["test/fixtures/lab/e2e/services.yaml"], async () => "");
  const svc = decodeDocuments(services.documents).snapshot.services;
  const m = labManifests(layout, svc);
  const text = [...m.nodes, ...m.pods, ...m.endpointSlices].map((o) => stringify(o)).join("---\n");
  assertGolden("test/fixtures/lab/layout/e2e-manifests.golden.yaml", text);
  const decoded = decodeDocuments([
    ...services.documents,
    ...[...m.nodes, ...m.pods, ...m.endpointSlices].map((value, i) => ({
      source: "generated",
      index: i + 1,
      value,
    })),
  ]);
  assert.deepEqual(decoded.problems, []);
  const slices = slicesByService(decoded.snapshot.endpointSlices);
  const drain = mergeServiceEndpoints(slices.get("e2e/drain") ?? []).ports[0]!.endpoints;
  assert.deepEqual(
    drain.map((e) => [e.target, e.ready, e.serving, e.terminating]),
    [
      ["e2e/a2-2", false, true, true],
      ["e2e/a2-3", false, false, false],
    ],
  );
  const any = slices.get("e2e/any") ?? [];
  assert.deepEqual(
    any.map((s) => s.addressType).sort(),
    ["IPv4", "IPv6"],
    "dual-stack Service: a slice per family",
  );
  const web = slices.get("e2e/web") ?? [];
  assert.deepEqual(
    web.map((s) => s.addressType),
    ["IPv4"],
    "single-stack Service: IPv4 only",
  );
});

test("topology mistakes are reported with their field", () => {
  const bad = parseTopology("name: Bad_Name\nservices: []\nzones: []\n");
  assert.equal(bad.ok, false);
  if (!bad.ok) {
    assert.ok(
      bad.problems.some((p) => p.startsWith("name:")),
      bad.problems.join("; "),
    );
    assert.ok(
      bad.problems.some((p) => p.startsWith("services:")),
      bad.problems.join("; "),
    );
    assert.ok(
      bad.problems.some((p) => p.startsWith("zones:")),
      bad.problems.join("; "),
    );
  }
  const dup = parseTopology(
    "name: x\nservices: [s.yaml]\nzones:\n  - name: z\n    clients: [n1]\n    nodes: [{ name: n1 }]\n",
  );
  assert.deepEqual(dup, { ok: false, problems: ["host name n1 is used twice"] });
});

test("routed zones: nodes behind the router in subnets of their own, documentation addresses only", () => {
  const layout = labLayout(topologyOf("test/fixtures/lab/encap/topology.yaml"));
  assertGolden(
    "test/fixtures/lab/layout/encap-commands.golden.txt",
    `${layout.commands.map((c) => c.join(" ")).join("\n")}\n`,
  );
  const allowed = /^(192\.0\.2\.|198\.51\.100\.|203\.0\.113\.|fd00:|fe80::1(\/64)?$|::\/0$)/;
  for (const c of layout.commands)
    for (const word of c)
      if (/^[0-9a-f:.]+(\/\d+)?$/.test(word) && (word.includes(".") || word.includes(":")) && word.length > 3)
        assert.match(word, allowed, `${c.join(" ")}`);
  assert.equal(layout.router?.ns, "plb-encap-encap-router");
  assert.deepEqual(
    layout.nodes.map((n) => [n.name, n.network, n.ipv4, n.ipv6, n.uplinkNs]),
    [
      ["node-a1", "routed", "198.51.100.65", "fd00:198:51:101::1", "plb-encap-encap-router"],
      ["node-a2", "routed", "198.51.100.66", "fd00:198:51:101::2", "plb-encap-encap-router"],
      ["node-b1", "routed", "198.51.100.81", "fd00:198:51:102::1", "plb-encap-encap-router"],
      ["node-c1", "segment", "198.51.100.31", "fd00:198:51:100::31", "plb-encap-lb"],
    ],
  );
  const line = (c: readonly string[]) => c.join(" ");
  const all = layout.commands.map(line);
  // no L2 path: routed nodes' veths end in the router, never on the LB host's bridge
  assert.ok(!all.some((l) => /^ip -n plb-encap-lb link add plbn[0-2] /.test(l)));
  assert.ok(all.includes("ip -n plb-encap-lb route add 198.51.100.64/28 via 198.51.100.130"));
  // the LB host reaches a routed node's pod through the router, the router through the node
  assert.ok(all.includes("ip -n plb-encap-lb route add 203.0.113.65/32 via 198.51.100.130"));
  assert.ok(all.includes("ip -n plb-encap-encap-router route add 203.0.113.65/32 via 198.51.100.65"));
  // the segment node reaches the routed subnets (inside its on-link /24) through the LB host
  assert.ok(all.includes("ip -n plb-encap-node-c1 route add 198.51.100.64/28 via 198.51.100.1"));
});

test("routed zones need a router", () => {
  const read = parseTopology(
    "name: x\nservices: [s.yaml]\nzones:\n  - name: z\n    network: routed\n    nodes: [{ name: n1 }]\n",
  );
  assert.deepEqual(read, {
    ok: false,
    problems: ["zones.0.network: routed needs a router (add `router: {}`)"],
  });
  const two = parseTopology("name: x\nservices: [s.yaml]\nlbHosts: 2\nrouter: {}\nzones:\n  - name: z\n");
  assert.deepEqual(two, { ok: false, problems: ["router: not supported together with lbHosts ≥ 2 yet"] });
});
