/**
 * The lab rewrite and the lab-mode reload: the bundled quickstart becomes the same lab as
 * the hand-written examples/lab/topology.yaml; a folder written for another network only
 * ever reaches the lab with documentation and ULA addresses; limits are errors; a reload
 * keeps hosts and reports what needs a rebuild.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { readManifests } from "../cluster/manifest-files.ts";
import { decodeDocuments } from "../k8s/decode.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { labLayout } from "../lab/lab-layout.ts";
import { labManifests } from "../lab/lab-manifests.ts";
import { parseTopology, TopologySchema } from "../lab/topology.ts";
import { cidrContains, parseCidr, parseIp } from "../net/ip.ts";
import { planSnapshot } from "../plan/planner.ts";
import { LAB_POOL_V4, LAB_POOL_V6, labRewrite } from "./lab-rewrite.ts";

async function load(dir: string): Promise<Snapshot> {
  const read = await readManifests([dir], async () => "");
  const decoded = decodeDocuments(read.documents);
  assert.deepEqual([...read.problems, ...decoded.problems], []);
  return decoded.snapshot;
}

const shape = (t: {
  zones: readonly { name: string; nodes: readonly { name: string; pods: readonly object[] }[] }[];
}) =>
  t.zones.map((z) => ({
    zone: z.name,
    nodes: z.nodes.map((n) => ({
      node: n.name,
      pods: n.pods.map((p) => {
        const { namespace: _ns, ...rest } = p as { namespace?: string };
        return rest;
      }),
    })),
  }));

test("the quickstart becomes the lab of examples/lab/topology.yaml, with a client per zone", async () => {
  const rw = labRewrite(await load("examples/quickstart"), { name: "up" });
  assert.deepEqual(rw.errors, []);
  assert.deepEqual(rw.notes, []);
  const handWritten = parseTopology(readFileSync("examples/lab/topology.yaml", "utf8"));
  assert.ok(handWritten.ok);
  // same zones, nodes, pods (labels, ports, readiness) in the same order
  assert.deepEqual(shape(TopologySchema.parse(rw.topology)), shape(handWritten.topology));
  assert.deepEqual(
    [...rw.clients],
    [
      ["zone-a", "client-zone-a"],
      ["zone-b", "client-zone-b"],
      ["zone-c", "client-zone-c"],
    ],
  );
  // its addresses already fit the lab: the same plans, the same VIPs
  const layout = labLayout(rw.topology);
  const gen = labManifests(layout, rw.services);
  const folder = decodeDocuments(
    [...rw.manifests, ...gen.nodes, ...gen.pods, ...gen.endpointSlices].map((value, i) => ({
      source: "lab",
      index: i + 1,
      value,
    })),
  );
  assert.deepEqual(folder.problems, []);
  const vips = planSnapshot(folder.snapshot).plans.map(
    (p) => `${p.service} ${p.vips.map((v) => v.address).join(",")}`,
  );
  const original = planSnapshot(await load("examples/quickstart")).plans.map(
    (p) => `${p.service} ${p.vips.map((v) => v.address).join(",")}`,
  );
  assert.deepEqual(vips, original);
});

test("a folder for another network: only lab addresses remain, each change is a note", async () => {
  const rw = labRewrite(await load("test/fixtures/up-lab/foreign"), { name: "up" });
  assert.deepEqual(rw.errors, []);
  const codes = rw.notes.map((n) => `${n.code} ${n.subject}`).sort();
  assert.deepEqual(codes, [
    "lab_pod_skipped Pod shop/stray",
    "lab_pool_rewritten pool corp",
    "lab_pool_rewritten pool corp",
    "lab_vip_dropped Service shop/api",
    "lab_zone_assigned Node loose",
  ]);
  assert.deepEqual(
    rw.topology.zones.map((z) => [
      z.name,
      z.clients,
      z.nodes.map((n) => [n.name, n.excludeFromLoadBalancers]),
    ]),
    [
      ["east", ["client-east"], [["e1", false]]],
      ["west", ["client-west"], [["w1", true]]],
      ["nozone", ["client-nozone"], [["loose", false]]],
    ],
  );
  const api2 = rw.topology.zones[2]!.nodes[0]!.pods[0]!;
  assert.deepEqual(api2.ports, [{ port: 8443, protocol: "TCP" }], "the Service's targetPort");
  assert.equal(api2.ready, false);
  assert.equal(api2.terminating, true);
  const config = rw.manifests.find((m) => (m as { kind?: string }).kind === "PasslbConfig") as {
    spec: {
      pools: { name: string; addresses: string[] }[];
      zones: { name: string; clientCIDRs: string[] }[];
    };
  };
  assert.deepEqual(
    config.spec.pools.map((p) => p.addresses),
    [[LAB_POOL_V4, LAB_POOL_V6], ["203.0.113.200-203.0.113.210"]],
  );
  assert.deepEqual(config.spec.zones, [
    { name: "east", clientCIDRs: ["192.0.2.0/26", "fd00:192:0:1::/64"] },
    { name: "west", clientCIDRs: ["192.0.2.64/26", "fd00:192:0:2::/64"] },
  ]);
  const api = rw.services[0]!;
  assert.equal(api.spec.loadBalancerIP, undefined);
  assert.deepEqual(api.status?.loadBalancer?.ingress, []);
  // 10.1.0.0/16 covers east's clients: east's lab range; 10.1.2.0/24 covers no zone's
  // whole range and 198.51.100.0/24 is not a client range: both kept
  assert.deepEqual(api.spec.loadBalancerSourceRanges, ["192.0.2.0/26", "10.1.2.0/24", "198.51.100.0/24"]);
  // every address a lab host or VIP gets is documentation or ULA space
  const allowed = ["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24", "fd00::/8"].map((c) => parseCidr(c)!);
  const layout = labLayout(rw.topology);
  for (const h of [layout.lb, ...layout.clients, ...layout.nodes, ...layout.pods])
    for (const a of [h.ipv4, h.ipv6]) {
      const ip = parseIp(a)!;
      assert.ok(
        allowed.some((c) => cidrContains(c, ip)),
        a,
      );
    }
});

test("what the lab cannot hold is an error, not half a lab", async () => {
  const rw = labRewrite(await load("test/fixtures/up-lab/too-many-zones"), { name: "up" });
  assert.deepEqual(rw.errors, ["the lab has room for 4 zones, not 5"]);
});
