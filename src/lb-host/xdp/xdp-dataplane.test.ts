import assert from "node:assert/strict";
import { test } from "node:test";
import { FakeBpfTool } from "../../drivers/fake-bpftool.ts";
import type { ServiceForwarding } from "../../forwarding/forwarding-state.ts";
import { maglevTable } from "../../forwarding/maglev.ts";
import type { LoadBalancerPlan } from "../../plan/load-balancer-plan.ts";
import { XdpDataplane } from "./xdp-dataplane.ts";
import { XDP_MAPS } from "./xdp-layout.ts";
import type { NextHop } from "./xdp-maps.ts";

// the fields of a forwarding state the XDP renderer reads (forwarding-state.ts builds the rest)
function web(nodes: readonly string[]): ServiceForwarding {
  const backends = nodes.map((n, i) => ({
    node: n,
    zone: "",
    addresses: { IPv4: `198.51.100.${i + 1}` },
    weight: 1,
  }));
  const plan = {
    service: "t/web",
    vips: [{ address: "192.0.2.100", family: "IPv4" }],
    members: backends.map((b) => ({ ...b })),
    sourceRanges: [],
    sessionAffinity: { type: "None" },
    zonalAffinity: false,
  } as unknown as LoadBalancerPlan;
  const table = maglevTable({ backends: nodes.map((n) => ({ name: n, weight: 1 })), size: 251, seed: 1 });
  return {
    service: "t/web",
    plan,
    listeners: [
      {
        listener: "TCP/80",
        protocol: "TCP",
        port: 80,
        backends,
        failOpen: false,
        table,
        zoneTables: new Map(),
      },
    ],
  };
}

function setup(bpf = new FakeBpfTool(XDP_MAPS)) {
  const hops = new Map<string, NextHop>();
  for (let i = 1; i <= 3; i++)
    hops.set(`198.51.100.${i}`, {
      xdp: true,
      ifindex: 2,
      mtu: 1500,
      dmac: `02:00:00:00:00:0${i}`,
      smac: "02:00:00:00:00:aa",
    });
  let now = 0;
  const dp = new XdpDataplane({
    bpf,
    nextHops: { resolve: async () => hops },
    interfaces: ["eth0"],
    pinDir: "/bpf/passlb",
    object: "x.o",
    seed: 1,
    blockSize: 251,
    now: () => (now += 5000),
  });
  return { bpf, dp };
}

/** the batches run from now on; the barriers (a batch of their own, after a commit: see
 * the ring group test) only with `barriers` */
function recordBatches(bpf: FakeBpfTool, barriers = false): string[][] {
  const batches: string[][] = [];
  const batch = bpf.batch.bind(bpf);
  bpf.batch = async (ops) => {
    if (barriers || ops.some((o) => o.op !== "barrier"))
      batches.push(ops.map((o) => `${o.op} ${o.map.split("/").pop()}`));
    return batch(ops);
  };
  return batches;
}

/** the same forwarding for `count` Services (one shared Maglev table, as eTP Cluster gives) */
function many(nodes: readonly string[], count: number): ServiceForwarding[] {
  const one = web(nodes);
  return Array.from({ length: count }, (_, i) => ({
    ...one,
    service: `t/web-${i}`,
    plan: {
      ...one.plan,
      service: `t/web-${i}`,
      vips: [{ address: `192.0.2.${i + 1}`, family: "IPv4" }],
    } as unknown as LoadBalancerPlan,
  }));
}

test("a changed table is written to a fresh block before its ring id points at it", async () => {
  const { bpf, dp } = setup();
  await dp.start();
  await dp.apply({ forwarding: [web(["a", "b"])], zones: [] });
  const only = (m: string) => [...bpf.maps.get(`/bpf/passlb/maps/${m}`)!.values()];
  const vip = only("vips")[0]!;
  const ref = only("ring_ids")[0]!;
  const batches = recordBatches(bpf);
  await dp.apply({ forwarding: [web(["a", "b", "c"])], zones: [] });
  assert.equal(only("vips")[0], vip, "the VIP entry is not rewritten: it names the same ring id");
  assert.notEqual(only("ring_ids")[0], ref, "the ring id now points at another block");
  const lines = batches[0]!;
  const lastRing = lines.lastIndexOf("update rings");
  const refAt = lines.indexOf("update ring_ids");
  assert.ok(lastRing !== -1 && refAt > lastRing, "every ring slot is written before the swap");
  assert.equal(
    lines.filter((l) => l === "update rings").length,
    251,
    "a block never written: the whole ring",
  );
  assert.ok(!lines.includes("update vips"));
});

test("a shared ring moves with one ring_ids write however many VIPs share it", async () => {
  const { bpf, dp } = setup();
  await dp.start();
  await dp.apply({ forwarding: many(["a", "b", "c"], 50), zones: [] });
  assert.equal(bpf.maps.get("/bpf/passlb/maps/ring_ids")!.size, 1, "one ring for the 50 VIPs");
  const batches = recordBatches(bpf);
  await dp.apply({ forwarding: many(["a", "b"], 50), zones: [] });
  await dp.apply({ forwarding: many(["a", "b", "c"], 50), zones: [] });
  const count = (i: number, line: string) => batches[i]!.filter((l) => l === line).length;
  assert.equal(count(0, "update ring_ids"), 1);
  assert.equal(count(0, "update vips"), 0, "no VIP entry rewritten");
  assert.equal(
    count(1, "update rings"),
    0,
    "the old block still holds the old ring: taken back, nothing written",
  );
  assert.equal(count(1, "update ring_ids"), 1);
  // a Service leaving the shared ring gets an id of its own; the others keep theirs
  const split = many(["a", "b", "c"], 50);
  split[0] = { ...many(["a"], 1)[0]!, service: "t/web-0", plan: split[0]!.plan };
  await dp.apply({ forwarding: split, zones: [] });
  assert.equal(count(2, "update vips"), 1, "only the Service that left is rewritten");
  assert.equal(bpf.maps.get("/bpf/passlb/maps/ring_ids")!.size, 2);
});

test("attachment and maps: detached and flushed state is found and restored", async () => {
  const { bpf, dp } = setup();
  await dp.start();
  await dp.apply({ forwarding: [web(["a", "b"])], zones: [] });
  assert.deepEqual(await dp.check(), []);
  await bpf.detach("eth0");
  bpf.maps.get("/bpf/passlb/maps/vips")!.clear();
  const findings = await dp.check();
  assert.ok(
    findings.some((f) => f.includes("not attached to eth0")),
    findings.join("; "),
  );
  assert.ok(
    findings.some((f) => f.startsWith("map vips")),
    findings.join("; "),
  );
  assert.equal(bpf.maps.get("/bpf/passlb/maps/vips")!.size, 1, "restored");
  assert.notEqual((await bpf.attached("eth0")).progId, undefined);
  assert.deepEqual(await dp.check(), [], "and stays so");
});

test("a scribbled ring slot is found by the drift check and written back", async () => {
  const { bpf, dp } = setup();
  await dp.start();
  await dp.apply({ forwarding: [web(["a", "b"])], zones: [] });
  const rings = bpf.maps.get("/bpf/passlb/maps/rings")!;
  const [slot, node] = [...rings].find(([, v]) => v !== "00 00 00 00")!;
  rings.set(slot, "ff 00 00 00");
  const findings = await dp.check();
  assert.ok(
    findings.some((f) => f === "map rings: 1 slot differs from what was written"),
    findings.join("; "),
  );
  assert.equal(rings.get(slot), node, "restored");
  assert.deepEqual(await dp.check(), [], "and stays so");
});

test("a restarted process adopts the pinned maps: the same node indexes, the program kept", async () => {
  const first = setup();
  await first.dp.start();
  await first.dp.apply({ forwarding: [web(["a", "b"])], zones: [] });
  // a leaves and c takes its index with a later generation (a's flows no longer match it)
  await first.dp.apply({ forwarding: [web(["b"])], zones: [] });
  await first.dp.apply({ forwarding: [web(["b", "c"])], zones: [] });
  const idC = first.dp.nodeIndex("c/4");
  assert.deepEqual(idC, { index: 0, gen: 3 });
  const prog = await first.bpf.prog("/bpf/passlb/prog/passlb_xdp");
  const second = setup(first.bpf);
  const r = await second.dp.start();
  assert.deepEqual(r, { adopted: true, replaced: false });
  assert.deepEqual(second.dp.nodeIndex("c/4"), idC, "flows keep naming the same node and generation");
  const batches = recordBatches(first.bpf);
  await second.dp.apply({ forwarding: [web(["b", "c"])], zones: [] });
  // (rings are written again into a fresh block: the pool does not know an adopted block's content)
  assert.deepEqual(
    batches[0]!.filter(
      (op) => !op.endsWith(" rings") && !op.endsWith(" ring_ids") && !op.startsWith("barrier"),
    ),
    [],
    "nodes and VIPs are not rewritten (the nodes' generations kept)",
  );
  await second.dp.apply({ forwarding: [web(["b", "c", "d"])], zones: [] });
  assert.equal(second.dp.nodeIndex("d/4")?.gen, 4, "generations carry on after the restart");
  assert.equal(
    (await first.bpf.prog("/bpf/passlb/prog/passlb_xdp"))?.id,
    prog?.id,
    "the attached program kept",
  );
  // a changed object replaces the program atomically (same maps)
  first.bpf.tag = "t2";
  const third = setup(first.bpf);
  assert.deepEqual(await third.dp.start(), { adopted: true, replaced: true });
  assert.notEqual((await first.bpf.attached("eth0")).progId, prog?.id);
});

test("one Service's endpoint change writes that Service's entries, however many Services there are", async () => {
  const written = async (count: number) => {
    const { bpf, dp } = setup();
    await dp.start();
    await dp.apply({ forwarding: many(["a", "b", "c"], count), zones: [] });
    const batches = recordBatches(bpf);
    const changed = many(["a", "b", "c"], count);
    changed[7] = { ...many(["a", "b"], 1)[0]!, service: "t/web-7", plan: changed[7]!.plan };
    await dp.apply({ forwarding: changed, zones: [] });
    assert.equal(batches.length, 1, "one batch");
    return batches[0]!;
  };
  const small = await written(20);
  const large = await written(2000);
  assert.equal(large.length, small.length, "the ops do not grow with the Services left alone");
  assert.equal(large.filter((l) => l === "update vips").length, 1, "only the changed Service's VIP");
  assert.ok(large.length <= 251 + 3, `at most one ring block, its id and the VIP: ${large.length} ops`);
});

test("a node's health flip writes the rings of the Services that node serves, no others", async () => {
  const { bpf, dp } = setup();
  await dp.start();
  const served = many(["a", "b"], 30); // these use node a
  const others = many(["b", "c"], 30).map((f, i) => ({
    ...f,
    service: `t/other-${i}`,
    plan: {
      ...f.plan,
      service: `t/other-${i}`,
      vips: [{ address: `203.0.113.${i + 1}`, family: "IPv4" }],
    } as unknown as LoadBalancerPlan,
  }));
  await dp.apply({ forwarding: [...served, ...others], zones: [] });
  const ringIds = () => new Map(bpf.maps.get("/bpf/passlb/maps/ring_ids")!);
  const before = ringIds();
  assert.equal(before.size, 2);
  const batches = recordBatches(bpf);
  // node a unhealthy: the Services it served now want a table without it
  await dp.apply({ forwarding: [...many(["b"], 30), ...others], zones: [] });
  const lines = batches[0]!;
  assert.equal(lines.filter((l) => l === "update ring_ids").length, 1, "one ring swapped");
  assert.equal(lines.filter((l) => l === "update vips").length, 0, "no VIP entry rewritten");
  assert.ok(lines.filter((l) => l === "update rings").length <= 251, "one block at most");
  const after = ringIds();
  const unchanged = [...before].filter(([k, v]) => after.get(k) === v);
  assert.equal(unchanged.length, 1, "the ring of the Services a does not serve is untouched");
});

test("a health flip of a ring group: one ring_ids write, no VIP looked at again, few slots after the first, a barrier", async () => {
  const { bpf, dp } = setup();
  await dp.start();
  // as lb-forwardings.ts gives them: every Service's listener names the selection's group,
  // and a flip hands the same plan objects new listeners with the group's new table
  const names = Array.from({ length: 20 }, (_, i) => `n${i}`);
  const base = many(names, 2000).map((f) => ({
    ...f,
    listeners: f.listeners.map((l) => ({ ...l, group: "members-1#IPv4#check" })),
  }));
  const without = (node: string): ServiceForwarding[] => {
    const nodes = names.filter((n) => n !== node);
    const table = maglevTable({ backends: nodes.map((n) => ({ name: n, weight: 1 })), size: 251, seed: 1 });
    return base.map((f) => ({
      ...f,
      listeners: f.listeners.map((l) => ({
        ...l,
        backends: l.backends.filter((b) => b.node !== node),
        table,
      })),
    }));
  };
  await dp.apply({ forwarding: base, zones: [] });
  const batches = recordBatches(bpf, true);
  const flips = [without("n1"), base, without("n2"), base, without("n3")];
  for (const forwarding of flips) await dp.apply({ forwarding, zones: [] });
  await dp.settled(); // the last barrier
  // each flip: its commit, then (after it, in a batch of its own) the barrier that frees
  // the block it retired
  assert.equal(batches.length, 2 * flips.length);
  const commits = batches.filter((_, i) => i % 2 === 0);
  for (const [i, lines] of commits.entries()) {
    assert.equal(lines.filter((l) => l === "update ring_ids").length, 1, `flip ${i}: one ring swapped`);
    assert.equal(lines.filter((l) => l.endsWith(" vips")).length, 0, `flip ${i}: no VIP entry written`);
    assert.deepEqual(
      batches[2 * i + 1],
      ["barrier rcu_barrier"],
      `flip ${i}: the old block retired behind a barrier`,
    );
  }
  const slots = commits.map((lines) => lines.filter((l) => l === "update rings").length);
  assert.equal(slots[0], 251, "the first flip writes a fresh block whole");
  assert.equal(slots[1], 0, "back to the old content: its block, nothing written");
  // into the block of the ring's version before last, a flip writes the slots in which two
  // tables of 19 of the 20 nodes differ (43 of 251 here: Maglev at M/N = 12 moves more than
  // the minimum, docs/maglev.md), not the whole ring
  for (const i of [2, 4])
    assert.ok(slots[i]! < 251 / 4, `flip ${i} wrote ${slots[i]} slots (a block of the same ring)`);
  assert.equal(slots[3], 0, "back again: nothing written");
  assert.equal(bpf.barriers, 5);
});

test("without the barrier map, a retired block waits out the grace, and start says so", async () => {
  const bpf = new FakeBpfTool(XDP_MAPS);
  bpf.createBarrier = async () => {
    throw new Error("array_of_maps: Invalid argument");
  };
  const { dp } = setup(bpf);
  const r = await dp.start();
  assert.match(r.notes?.join() ?? "", /no RCU barrier map .*reused after 2000 ms/);
  const batches = recordBatches(bpf);
  await dp.apply({ forwarding: [web(["a", "b"])], zones: [] });
  await dp.apply({ forwarding: [web(["a"])], zones: [] });
  assert.ok(batches.every((lines) => !lines.includes("barrier rcu_barrier")));
});
