/**
 * The live reload's decision in lab mode (lab-reload.ts) and the steps it takes
 * (src/lab/lab-change.ts): new, moved, removed and re-ported pods, new and removed nodes
 * and zones, and — over random sequences of folders — that nothing running is ever
 * renumbered and no two hosts ever share an address, a veth or a namespace.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { readManifests } from "../cluster/manifest-files.ts";
import { decodeDocuments } from "../k8s/decode.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { labChangeCommands, labUndoAdd, layoutWithout } from "../lab/lab-change.ts";
import { type LabLayout, labLayout } from "../lab/lab-layout.ts";
import type { Topology } from "../lab/topology.ts";
import { labReloadLayout } from "./lab-reload.ts";
import { labRewrite } from "./lab-rewrite.ts";

async function quickstart(): Promise<Snapshot> {
  const read = await readManifests(["examples/quickstart"], async () => "");
  return decodeDocuments(read.documents).snapshot;
}

/** a small topology: zone → node → pod names (each pod serves TCP 8080, or `ports`) */
function topo(zones: Record<string, Record<string, string[]>>, ports: Record<string, number> = {}): Topology {
  return {
    name: "t",
    services: ["services.yaml"],
    namespace: "default",
    lb: { name: "lb" },
    zones: Object.entries(zones).map(([zone, nodes]) => ({
      name: zone,
      clients: [`client-${zone}`],
      nodes: Object.entries(nodes).map(([node, pods]) => ({
        name: node,
        excludeFromLoadBalancers: false,
        pods: pods.map((p) => ({
          name: p,
          labels: { app: "web" },
          ports: [{ port: ports[p] ?? 8080, protocol: "TCP" as const }],
          ready: true,
          terminating: false,
        })),
      })),
    })),
  };
}

const cmd = (c: readonly string[]) => c.join(" ");
const hostOf = (l: LabLayout, name: string) => [...l.nodes, ...l.pods].find((h) => h.name === name);

test("the quickstart folder edited: kept hosts stay put, new and moved pods are built, removed ones go", async () => {
  const snapshot = await quickstart();
  const running = labLayout(labRewrite(snapshot, { name: "up" }).topology);
  const pods = snapshot.pods
    .filter((p) => p.metadata.name !== "web-1")
    .map((p) =>
      p.metadata.name === "web-7"
        ? { ...p, status: { ...p.status, conditions: [{ type: "Ready", status: "True" }] } }
        : p.metadata.name === "echo-1"
          ? { ...p, spec: { ...p.spec, nodeName: "node-b2" } }
          : p,
    );
  const extra = { ...snapshot.pods[0]!, metadata: { ...snapshot.pods[0]!.metadata, name: "web-9" } };
  const next = labRewrite(
    {
      ...snapshot,
      pods: [...pods, extra],
      nodes: snapshot.nodes.filter((n) => n.metadata.name !== "node-c2"),
    },
    { name: "up", zones: running.zones.map((z) => z.name) },
  );
  const change = labReloadLayout(running, next.topology);
  const onC2 = running.pods.filter((p) => p.node === "node-c2").map((p) => p.name);
  assert.deepEqual(
    change.remove.nodes.map((n) => n.name),
    ["node-c2"],
  );
  assert.deepEqual(change.remove.pods.map((p) => p.name).sort(), ["echo-1", "web-1", ...onC2].sort());
  assert.deepEqual(
    change.add.pods.map((p) => `${p.name}@${p.node}`),
    ["web-9@node-a1", "echo-1@node-b2"],
  );
  assert.deepEqual(
    change.removeFirst,
    ["plb-up-echo-1"],
    "a moved pod's namespace is rebuilt: it goes first",
  );
  assert.deepEqual(change.add.nodes, []);
  assert.deepEqual(change.restart, []);
  assert.equal(change.layout.pods.find((p) => p.name === "web-7")?.spec.ready, true);
  // hosts that stay keep their addresses and veths; new ones take slots no running pod holds
  for (const p of change.layout.pods) {
    const before = running.pods.find((q) => q.name === p.name);
    if (before && before.node === p.node) assert.deepEqual([p.ipv4, p.veth], [before.ipv4, before.veth]);
  }
  const held = new Set(running.pods.map((p) => p.ipv4));
  for (const p of change.add.pods) assert.ok(!held.has(p.ipv4), `${p.name} ${p.ipv4} is new`);
  assert.equal(
    change.add.pods.find((p) => p.name === "web-9")!.ipv4,
    `203.0.113.${65 + running.pods.length}`,
  );

  const c = labChangeCommands(running, change).build.map(cmd);
  const web9 = change.add.pods.find((p) => p.name === "web-9")!;
  assert.ok(c.includes("ip netns add plb-up-web-9"));
  assert.ok(
    c.includes(`ip -n plb-up-node-a1 link add ${web9.veth} type veth peer name eth0 netns plb-up-web-9`),
  );
  assert.ok(c.includes(`ip -n plb-up-lb route add ${web9.ipv4}/32 via 198.51.100.11`));
  assert.ok(c.includes(`ip -n plb-up-node-b1 route add ${web9.ipv6}/128 via fd00:198:51:100::11`));
  assert.ok(!c.some((x) => x.includes("plb-up-node-c2")), "nothing is built on a node that goes");
});

test("removing a pod unlinks it on its node and unroutes it on the LB and the nodes that stay", () => {
  const running = labLayout(topo({ za: { n1: ["a", "b"], n2: ["c"] }, zb: { n3: ["d"] } }));
  const change = labReloadLayout(running, topo({ za: { n1: ["a"], n2: ["c"] } }));
  assert.deepEqual(change.remove.pods.map((p) => p.name).sort(), ["b", "d"]);
  assert.deepEqual(
    change.remove.nodes.map((n) => n.name),
    ["n3"],
  );
  assert.deepEqual(change.removeFirst, [], "nothing new takes their place: they go after the manifests");
  const { first, last, build } = labChangeCommands(running, change);
  assert.deepEqual([first, build], [[], []]);
  const b = running.pods.find((p) => p.name === "b")!;
  assert.deepEqual(last.map(cmd).sort(), [
    "ip -n plb-t-lb link del plbn2",
    "ip -n plb-t-lb route del 203.0.113.66/32",
    "ip -n plb-t-lb route del 203.0.113.68/32",
    "ip -n plb-t-lb route del fd00:203::42/128",
    "ip -n plb-t-lb route del fd00:203::44/128",
    `ip -n plb-t-n1 link del ${b.veth}`,
    "ip -n plb-t-n1 route del 203.0.113.68/32",
    "ip -n plb-t-n1 route del fd00:203::44/128",
    "ip -n plb-t-n2 route del 203.0.113.66/32",
    "ip -n plb-t-n2 route del 203.0.113.68/32",
    "ip -n plb-t-n2 route del fd00:203::42/128",
    "ip -n plb-t-n2 route del fd00:203::44/128",
  ]);
  // the zone stays (its client and ranges), as do the layout's other hosts
  assert.deepEqual(change.layout.zones, running.zones);
  assert.deepEqual(
    change.layout.pods.map((p) => p.name),
    ["a", "c"],
  );
});

test("changed ports restart the echo server in place; nothing is built or removed", () => {
  const running = labLayout(topo({ za: { n1: ["a", "b"] } }));
  const change = labReloadLayout(running, topo({ za: { n1: ["a", "b"] } }, { b: 9090 }));
  assert.deepEqual(
    change.restart.map((p) => [p.name, p.ipv4, p.spec.ports[0]!.port]),
    [["b", "203.0.113.66", 9090]],
  );
  assert.deepEqual([change.add.pods, change.remove.pods, change.removeFirst], [[], [], []]);
  assert.equal(change.layout.pods.find((p) => p.name === "b")!.spec.ports[0]!.port, 9090);
});

test("a new node (and a new zone) takes the lowest free number, routes to the running pods, and its pods", () => {
  const running = labLayout(topo({ za: { n1: ["a"], n2: ["b"], n3: [] } }));
  // n2 left earlier: its number (198.51.100.12) is free again
  const shrunk = labReloadLayout(running, topo({ za: { n1: ["a"], n3: [] } })).layout;
  const change = labReloadLayout(shrunk, topo({ za: { n1: ["a"], n3: [], n4: ["c"] }, zb: { m1: ["d"] } }));
  assert.deepEqual(
    change.add.nodes.map((n) => [n.name, n.zone, n.ipv4, n.veth]),
    [
      ["n4", "za", "198.51.100.12", "plbn1"],
      ["m1", "zb", "198.51.100.21", "plbn3"],
    ],
  );
  assert.deepEqual(
    change.add.zones.map((z) => [z.name, z.clientCidr4, z.clientCidr6]),
    [["zb", "192.0.2.64/26", "fd00:192:0:2::/64"]],
  );
  assert.deepEqual(
    change.add.clients.map((c) => [c.name, c.ipv4]),
    [["client-zb", "192.0.2.74"]],
  );
  assert.deepEqual(
    change.add.pods.map((p) => [p.name, p.ipv4, p.veth]),
    [
      ["c", "203.0.113.66", "plbp0"],
      ["d", "203.0.113.67", "plbp0"],
    ],
  );
  const c = labChangeCommands(shrunk, change).build.map(cmd);
  for (const line of [
    "ip netns add plb-t-n4",
    "ip -n plb-t-lb link add plbn1 type veth peer name eth0 netns plb-t-n4",
    "ip -n plb-t-n4 addr add 198.51.100.12/24 dev eth0",
    "ip -n plb-t-n4 route add 203.0.113.65/32 via 198.51.100.11", // a running pod, from the new node
    "ip -n plb-t-n1 route add 203.0.113.66/32 via 198.51.100.12", // a new pod, from a running node
    "ip -n plb-t-m1 route add 203.0.113.66/32 via 198.51.100.12", // a new pod, from another new node
    "ip -n plb-t-lb addr replace 192.0.2.65/26 dev plbclients",
    "ip -n plb-t-lb link add plbc1 type veth peer name eth0 netns plb-t-client-zb",
    "ip -n plb-t-client-zb route add default via 192.0.2.65",
  ])
    assert.ok(c.includes(line), line);
  assert.equal(c.filter((x) => x === "ip -n plb-t-m1 route add 203.0.113.66/32 via 198.51.100.12").length, 1);
  assert.ok(
    c.indexOf("ip netns add plb-t-m1") <
      c.indexOf("ip -n plb-t-m1 route add 203.0.113.66/32 via 198.51.100.12"),
  );
});

test("a change that fails half-way is undone: its hosts go, the routes to them too, the rest stays", () => {
  const running = labLayout(topo({ za: { n1: ["a"] } }));
  const change = labReloadLayout(running, topo({ za: { n1: ["a", "b"] }, zb: { m1: ["c"] } }));
  const undo = labUndoAdd(change);
  assert.deepEqual(undo.namespaces.sort(), ["plb-t-b", "plb-t-c", "plb-t-client-zb", "plb-t-m1"]);
  const b = change.add.pods.find((p) => p.name === "b")!;
  assert.deepEqual(
    undo.commands.map(cmd).sort(),
    [
      "ip -n plb-t-lb link del plbc1",
      "ip -n plb-t-lb link del plbn1",
      `ip -n plb-t-lb route del ${b.ipv4}/32`,
      `ip -n plb-t-lb route del ${b.ipv6}/128`,
      "ip -n plb-t-lb route del 203.0.113.67/32",
      "ip -n plb-t-lb route del fd00:203::43/128",
      `ip -n plb-t-n1 link del ${b.veth}`,
      "ip -n plb-t-n1 route del 203.0.113.67/32",
      "ip -n plb-t-n1 route del fd00:203::43/128",
    ].sort(),
  );
  // what runs once the undo is done is the running layout
  assert.deepEqual(layoutWithout(change.layout, undo.namespaces).pods, running.pods);
  assert.deepEqual(
    layoutWithout(change.layout, undo.namespaces).nodes.map((n) => n.name),
    running.nodes.map((n) => n.name),
  );
});

test("when every pod slot is held, a pod that leaves gives its slot to a new one and goes first", () => {
  const names = Array.from({ length: 62 }, (_, i) => `p${i}`);
  const running = labLayout(topo({ za: { n1: names } }));
  const change = labReloadLayout(running, topo({ za: { n1: [...names.slice(1), "q"] } }));
  assert.deepEqual(
    change.add.pods.map((p) => [p.name, p.ipv4]),
    [["q", "203.0.113.65"]],
  );
  assert.deepEqual(change.removeFirst, ["plb-t-p0"]);
  const { first, last } = labChangeCommands(running, change);
  assert.ok(first.map(cmd).includes("ip -n plb-t-lb route del 203.0.113.65/32"));
  assert.deepEqual(last, []);
});

test("a node moved to another zone is rebuilt there with its pods, both torn down first", () => {
  const running = labLayout(topo({ za: { n1: ["a"] }, zb: { m1: [] } }));
  const change = labReloadLayout(running, topo({ za: {}, zb: { m1: [], n1: ["a"] } }));
  assert.deepEqual([...change.removeFirst].sort(), ["plb-t-a", "plb-t-n1"]);
  assert.deepEqual(
    change.add.nodes.map((n) => [n.name, n.zone, n.ipv4]),
    [["n1", "zb", "198.51.100.22"]],
  );
  assert.deepEqual(
    change.add.pods.map((p) => [p.name, p.node, p.zone]),
    [["a", "n1", "zb"]],
  );
});

// random folders over a small pool of names: nothing running is renumbered, nothing clashes
const folder = fc.record({
  za: fc.dictionary(fc.constantFrom("n1", "n2", "n3"), fc.subarray(["a", "b", "c", "d", "e"])),
  zb: fc.dictionary(fc.constantFrom("m1", "m2"), fc.subarray(["f", "g", "h"])),
});
const asTopology = (f: { za: Record<string, string[]>; zb: Record<string, string[]> }, port: number) => {
  // a pod name lives on one node only (the folder would be refused otherwise)
  const seen = new Set<string>();
  const z = (nodes: Record<string, string[]>) =>
    Object.fromEntries(
      Object.entries(nodes).map(([n, ps]) => [n, ps.filter((p) => !seen.has(p) && seen.add(p))]),
    );
  return topo({ za: z(f.za), zb: z(f.zb) }, { a: port });
};

test("over random edits, running hosts keep their numbers and no two hosts share one", () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(folder, fc.constantFrom(8080, 9090)), { minLength: 1, maxLength: 6 }),
      (steps) => {
        let layout = labLayout(topo({ za: { n1: ["a"] } }));
        for (const [f, port] of steps) {
          const next = asTopology(f, port);
          const change = labReloadLayout(layout, next);
          const after = change.layout;
          // the layout is the folder
          const want = next.zones.flatMap((z) =>
            z.nodes.flatMap((n) => n.pods.map((p) => `${p.name}@${n.name}`)),
          );
          assert.deepEqual(after.pods.map((p) => `${p.name}@${p.node}`).sort(), want.sort());
          // kept hosts keep everything they run with
          const removed = new Set([...change.remove.nodes, ...change.remove.pods].map((h) => h.ns));
          for (const h of [...layout.nodes, ...layout.pods]) {
            if (removed.has(h.ns)) continue;
            const now = hostOf(after, h.name)!;
            assert.deepEqual([now.ipv4, now.ipv6, now.veth], [h.ipv4, h.ipv6, h.veth]);
          }
          // unique addresses, namespaces, veths (per node and on the LB)
          const unique = (xs: string[]) => assert.equal(new Set(xs).size, xs.length, xs.join(" "));
          unique([...after.nodes, ...after.pods, ...after.clients].flatMap((h) => [h.ipv4, h.ipv6, h.ns]));
          unique(after.nodes.map((n) => n.veth));
          for (const n of after.nodes) unique(n.pods.map((p) => p.veth));
          // a new host never takes what a host still being torn down holds
          const late = [...change.remove.nodes, ...change.remove.pods].filter(
            (h) => !change.removeFirst.includes(h.ns),
          );
          const lateHeld = new Set(late.flatMap((h) => [h.ipv4, h.ns]));
          for (const h of [...change.add.nodes, ...change.add.pods]) {
            assert.ok(
              !lateHeld.has(h.ipv4) && !lateHeld.has(h.ns),
              `${h.name} clashes with a host still running`,
            );
            const lateVeths = late.flatMap((x) =>
              "node" in x && x.node === (h as { node?: string }).node ? [x.veth] : [],
            );
            if (h.role === "pod") assert.ok(!lateVeths.includes(h.veth));
          }
          layout = after;
        }
      },
    ),
    { numRuns: 150 },
  );
});
