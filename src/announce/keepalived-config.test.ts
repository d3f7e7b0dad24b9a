import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import { keepalivedInput as input, peers3 } from "../../test/support/keepalived-input.ts";
import { vipReady } from "./fake-announcer.ts";
import {
  BASE_PRIORITY,
  keepalivedInstances,
  NOT_READY_PENALTY,
  prefixLength,
  renderKeepalived,
  vridOf,
} from "./keepalived-config.ts";
import { announcerStatus, parseNotifyLine, stateFromAddresses } from "./keepalived-state.ts";
import { vipOwners } from "./vip-owners.ts";

test("every host renders the same instances (names, VRIDs, orders), each with its own priority", () => {
  const all = [...peers3.keys()].map((self) => keepalivedInstances(input({ self })).instances);
  const shape = (is: (typeof all)[number]) =>
    is.map((i) => [i.name, i.vrid, i.order.join(">"), i.vips.join(",")]);
  assert.deepEqual(shape(all[1]!), shape(all[0]!));
  assert.deepEqual(shape(all[2]!), shape(all[0]!));
  for (let n = 0; n < all[0]!.length; n++) {
    const order = all[0]![n]!.order;
    const prios = [...peers3.keys()].map((h, i) => [h, all[i]![n]!.priority] as const);
    for (const [h, p] of prios) assert.equal(p, BASE_PRIORITY - 10 * order.indexOf(h));
  }
});

test("the highest priority of each VIP's instance is the host vipOwners elects", () => {
  fc.assert(
    fc.property(
      fc.uniqueArray(fc.integer({ min: 0, max: 255 }), { minLength: 1, maxLength: 60 }),
      fc.integer({ min: 1, max: 7 }),
      (octets, n) => {
        const peers = new Map(Array.from({ length: n }, (_, i) => [`lb-${i}`, { IPv4: `192.0.2.${i + 2}` }]));
        const vips = octets.map((o) => `203.0.113.${o}`);
        const { instances } = keepalivedInstances(
          input({ self: "lb-0", peers, vips: vips.map((vip) => ({ vip, ready: true })) }),
        );
        const owners = vipOwners(peers.keys(), vips);
        const vrids = new Set<number>();
        for (const i of instances) {
          assert.ok(i.vrid >= 1 && i.vrid <= 255, `${i.name} VRID ${i.vrid}`);
          assert.ok(!vrids.has(i.vrid), `VRID ${i.vrid} twice`);
          vrids.add(i.vrid);
          for (const v of i.vips) assert.equal(i.order[0], owners.get(v), v);
          assert.equal(new Set(i.order).size, n);
        }
        assert.equal(instances.flatMap((i) => i.vips).length, vips.length);
      },
    ),
  );
});

test("instances are per owner order, not per VIP: 240 VIPs on 3 hosts make 6, spread 20–47 %", () => {
  const vips = Array.from({ length: 240 }, (_, i) => ({ vip: `203.0.113.${i}`, ready: true }));
  const { instances } = keepalivedInstances(input({ vips }));
  assert.equal(instances.length, 6);
  for (const h of peers3.keys()) {
    const share = instances.filter((i) => i.order[0] === h).reduce((n, i) => n + i.vips.length, 0) / 240;
    assert.ok(share > 0.2 && share < 0.47, `${h} is master for ${share}`);
  }
  // VRID count stays within a segment's 255 for any host count
  for (let n = 1; n <= 20; n++) {
    const k = prefixLength(n);
    let count = 1;
    for (let j = 0; j < k; j++) count *= n - j;
    assert.ok(count <= 255, `${n} hosts: ${count} VRIDs`);
  }
  assert.equal(vridOf(["a", "b", "c"], ["c", "b", "a"]), 6);
});

test("adding a VIP or changing readiness leaves the other instances' text unchanged", () => {
  const before = renderKeepalived(input());
  const more = renderKeepalived(input({ vips: [...input().vips, { vip: "203.0.113.9", ready: true }] }));
  const block = (conf: string, name: string) =>
    new RegExp(`^vrrp_instance ${name} \\{[\\s\\S]*?^\\}`, "m").exec(conf)?.[0];
  const touched = more.instances.find((i) => i.vips.includes("203.0.113.9"))!.name;
  for (const i of before.instances)
    if (i.name !== touched) assert.equal(block(more.config, i.name), block(before.config, i.name), i.name);
  // readiness lives in the track files only: the configuration does not change
  const allReady = renderKeepalived(input({ vips: input().vips.map((v) => ({ ...v, ready: true })) }));
  assert.equal(allReady.config, before.config);
  assert.notDeepEqual([...allReady.trackFiles], [...before.trackFiles]);
  assert.ok([...before.trackFiles.values()].includes(`${NOT_READY_PENALTY}\n`));
});

test("a host without an address of a family takes no part in that family's instances", () => {
  const peers = new Map([...peers3].map(([h, a]) => [h, h === "lb-3" ? { IPv4: a.IPv4 } : a]));
  const r = keepalivedInstances(input({ peers }));
  for (const i of r.instances.filter((x) => x.family === "IPv6"))
    assert.deepEqual([...i.order].sort(), ["lb-1", "lb-2"]);
  assert.ok(r.issues.some((i) => i.code === "no_address_for_family" && i.message.includes("lb-3")));
  const lonely = keepalivedInstances(input({ self: "lb-3", peers }));
  assert.ok(lonely.instances.every((i) => i.family === "IPv4"));
  assert.equal(keepalivedInstances(input({ self: "lb-9" })).issues[0]?.code, "self_not_a_peer");
});

test("notify FIFO lines, adopted state and the engine-neutral status", () => {
  assert.deepEqual(parseNotifyLine('INSTANCE "passlb_v4_3" MASTER 250'), {
    kind: "INSTANCE",
    name: "passlb_v4_3",
    state: "MASTER",
    priority: 250,
  });
  assert.equal(parseNotifyLine("garbage"), undefined);
  const { instances } = keepalivedInstances(input());
  const master = instances.find((i) => i.order[0] === "lb-1" && i.family === "IPv4")!;
  const states = stateFromAddresses(instances, new Set(master.vips));
  assert.equal(states.get(master.name)?.state, "MASTER");
  const readiness = input().vips.map((v) => vipReady(v.vip, v.ready ? "ok" : "no_healthy_backend"));
  const s = announcerStatus({ host: "lb-1", engine: "running", generation: 3, instances, states, readiness });
  const v3 = s.vips.find((v) => v.vip === "203.0.113.3")!;
  assert.equal(v3.reason.includes("not_ready:no_healthy_backend"), true);
  assert.ok(s.vips.filter((v) => master.vips.includes(v.vip)).every((v) => v.state === "held"));
  const down = announcerStatus({
    host: "lb-1",
    engine: "restarting",
    generation: 3,
    instances,
    states,
    readiness,
  });
  assert.ok(down.vips.every((v) => v.state === "withdrawn"));
});

test("--vrid-range: every VRID inside it, unique, the owner still first; too small a range is an issue", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 7 }),
      fc.integer({ min: 1, max: 200 }),
      fc.integer({ min: 0, max: 54 }),
      (n, first, extra) => {
        const size = n + extra;
        const last = Math.min(255, first + size - 1);
        fc.pre(last - first + 1 >= n);
        const peers = new Map(Array.from({ length: n }, (_, i) => [`lb-${i}`, { IPv4: `192.0.2.${i + 2}` }]));
        const vips = Array.from({ length: 40 }, (_, i) => ({ vip: `203.0.113.${i}`, ready: true }));
        const { instances, issues } = keepalivedInstances(
          input({ self: "lb-0", peers, vips, vridRange: { first, last } }),
        );
        assert.deepEqual(issues, []);
        const vrids = instances.map((i) => i.vrid);
        assert.equal(new Set(vrids).size, vrids.length);
        for (const v of vrids) assert.ok(v >= first && v <= last, `VRID ${v} outside ${first}-${last}`);
        const owners = vipOwners(
          peers.keys(),
          vips.map((v) => v.vip),
        );
        for (const i of instances) for (const v of i.vips) assert.equal(i.order[0], owners.get(v));
      },
    ),
  );
  const small = keepalivedInstances(input({ vridRange: { first: 10, last: 11 } }));
  assert.deepEqual(small.instances, []);
  assert.equal(small.issues[0]?.code, "vrid_range_too_small");
  assert.match(small.issues[0]?.message ?? "", /--vrid-range 10-11 has 2 VRIDs; 3 LB hosts need at least 3/);
  // the default range renders what it always did
  assert.deepEqual(
    keepalivedInstances(input({ vridRange: { first: 1, last: 255 } })).instances,
    keepalivedInstances(input()).instances,
  );
});
