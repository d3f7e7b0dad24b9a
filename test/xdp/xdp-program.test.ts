/**
 * The XDP program's every branch, with crafted packets through BPF_PROG_TEST_RUN and maps
 * written by the real control plane (xdp-harness.ts): not IP, not a VIP, a VIP hit (MACs
 * rewritten, TTL decremented with a valid checksum), SYN overwrite, established follow,
 * a flow whose node left, source ranges, IPv6, UDP, ClientIP affinity, zonal affinity, a
 * Service without nodes, and every hand-off to the stack (options, fragments, TTL 1, MTU,
 * a node XDP cannot reach, a redirect without a devmap entry). Also: the program's slot
 * for a tuple is the nftables path's (`jhash … mod M seed S` computed by the kernel's
 * nft_hash for the same tuples, in a namespace). Needs root, clang and bpftool.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { createBpfTool, type MapOp } from "../../src/drivers/bpftool.ts";
import {
  decodeFlow,
  encodeConfig,
  encodeFlow,
  encodeFlowKey,
  encodeNode,
  encodeRingRef,
  encodeU32,
  encodeVipKey,
  encodeVipValue,
} from "../../src/lb-host/xdp/xdp-layout.ts";
import { ACK, arp, frame, LB_MAC, readFrame, SYN } from "./packets.ts";
import { forwardingOf, loadProgram, nodeMac, type TestService, XDP, xdpUnavailable } from "./xdp-harness.ts";

const why = xdpUnavailable();
const VIP = "192.0.2.100";
const VIP6 = "fd00:192::100";
const CLIENT = "203.0.113.7";
const CLIENT6 = "fd00:203::7";
const nodes = [1, 2, 3].map((i) => ({
  name: `node-${i}`,
  v4: `198.51.100.${10 + i}`,
  v6: `fd00:198::${10 + i}`,
}));

test("XDP program: every branch with crafted packets", { timeout: 120_000 }, async (t) => {
  if (why) return t.skip(why);
  const p = await loadProgram(t);
  nodes.forEach((n, i) => {
    for (const a of [n.v4, n.v6])
      p.hops.set(a, { xdp: true, ifindex: 1, mtu: 1500, dmac: nodeMac(i + 1), smac: LB_MAC });
  });
  const services: TestService[] = [
    { name: "t/web", vips: [VIP, VIP6], port: 80, nodes },
    { name: "t/one", vips: [VIP], port: 81, nodes: [nodes[0]!] },
    { name: "t/dns", vips: [VIP, VIP6], port: 53, protocol: "UDP", nodes },
    {
      name: "t/guarded",
      vips: [VIP, VIP6],
      port: 82,
      nodes,
      sourceRanges: ["203.0.113.0/28", "fd00:203::/120"],
    },
    { name: "t/v4only", vips: [VIP, VIP6], port: 83, nodes, sourceRanges: ["203.0.113.0/24"] },
    { name: "t/sticky", vips: [VIP], port: 84, nodes, clientIp: true },
    { name: "t/empty", vips: [VIP], port: 85, nodes: [] },
    {
      name: "t/zonal",
      vips: [VIP],
      port: 86,
      nodes: nodes.map((n, i) => ({ ...n, zone: i === 0 ? "za" : "zb" })),
      zonal: true,
    },
    { name: "t/far", vips: [VIP], port: 87, nodes: [{ name: "node-9", v4: "198.51.100.99" }] },
  ];
  const forwarding = services.map((s) => forwardingOf(s, 7));
  const zones = [
    { name: "za", clientCIDRs: ["203.0.113.0/29"] },
    { name: "zb", clientCIDRs: [] },
  ];
  await p.dp.apply({ forwarding, zones });
  const macOf = (name: string) => nodeMac(Number(name.slice(5)));
  const tcp = (o: Partial<Parameters<typeof frame>[0]> = {}) =>
    frame({ src: CLIENT, dst: VIP, proto: "tcp", sport: 40000, dport: 80, ...o });

  await t.test("not IP, not a VIP, not TCP/UDP: passed to the stack untouched", () => {
    assert.equal(p.run(arp()).action, XDP.PASS);
    assert.equal(p.run(tcp({ dst: "192.0.2.101" })).action, XDP.PASS, "another address");
    assert.equal(p.run(tcp({ dport: 8080 })).action, XDP.PASS, "a port that is no listener");
    const r = p.run(tcp({ dst: "192.0.2.101" }));
    assert.deepEqual(r.out, tcp({ dst: "192.0.2.101" }), "not modified");
  });

  await t.test("a VIP hit is forwarded: node MAC, LB MAC, TTL − 1, valid checksum", () => {
    const r = p.run(tcp({ ttl: 64 }));
    assert.equal(r.action, XDP.TX);
    const f = readFrame(r.out);
    assert.ok(
      nodes.some((_, i) => f.dmac === nodeMac(i + 1)),
      f.dmac,
    );
    assert.equal(f.smac, LB_MAC);
    assert.equal(f.ttl, 63);
    assert.ok(f.checksumOk, "IPv4 header checksum after the TTL decrement");
  });

  await t.test("spread: 300 flows reach all three nodes", () => {
    const seen = new Map<string, number>();
    for (let port = 20000; port < 20300; port++) {
      const f = readFrame(p.run(tcp({ sport: port })).out);
      seen.set(f.dmac, (seen.get(f.dmac) ?? 0) + 1);
    }
    assert.equal(seen.size, 3, JSON.stringify([...seen]));
    for (const n of seen.values()) assert.ok(n > 60, JSON.stringify([...seen]));
  });

  const flowKey = (sport: number) =>
    encodeFlowKey({ family: 4, proto: 6, src: CLIENT, sport, dst: VIP, dport: 80 });
  const setFlow = (sport: number, node: string, genDelta = 0) => {
    const n = p.dp.nodeIndex(`${node}/4`)!;
    p.bpftool([
      "map",
      "update",
      "pinned",
      `${p.dp.pinDir}/maps/flows`,
      "key",
      "hex",
      ...flowKey(sport).split(" "),
      "value",
      "hex",
      ...encodeFlow(n.index, n.gen + genDelta).split(" "),
    ]);
  };
  const flowNode = (sport: number) => {
    const out = JSON.parse(
      p.bpftool([
        "-j",
        "map",
        "lookup",
        "pinned",
        `${p.dp.pinDir}/maps/flows`,
        "key",
        "hex",
        ...flowKey(sport).split(" "),
      ]),
    ) as { value: string[] };
    return decodeFlow(Uint8Array.from(out.value, (h) => Number.parseInt(h, 16))).node;
  };
  const ringChoice = (sport: number) => readFrame(p.run(tcp({ sport, flags: SYN })).out).dmac;

  await t.test("established: a non-SYN follows its flow entry, whatever the ring says", () => {
    const choice = ringChoice(41000);
    const other = nodes.map((n) => n.name).find((n) => macOf(n) !== choice)!;
    setFlow(41000, other);
    const r = p.run(tcp({ sport: 41000, flags: ACK }));
    assert.equal(r.action, XDP.TX);
    assert.equal(readFrame(r.out).dmac, macOf(other));
  });

  const flowReasons = async () => {
    const r = (await p.dp.counters()).reasons;
    return { added: r.get("flow_new")!.packets, replaced: r.get("flow_replaced")!.packets };
  };

  await t.test("SYN: takes the current ring choice and overwrites the flow entry", async () => {
    const first = await flowReasons();
    const choice = ringChoice(41001);
    const other = nodes.map((n) => n.name).find((n) => macOf(n) !== choice)!;
    assert.deepEqual(await flowReasons(), { ...first, added: first.added + 1 }, "a new tuple adds an entry");
    setFlow(41001, other);
    assert.equal(readFrame(p.run(tcp({ sport: 41001, flags: SYN })).out).dmac, choice);
    const chosen = nodes.find((n) => macOf(n.name) === choice)!;
    assert.equal(flowNode(41001), p.dp.nodeIndex(`${chosen.name}/4`)!.index, "entry overwritten");
    assert.deepEqual(
      await flowReasons(),
      { added: first.added + 1, replaced: first.replaced + 1 },
      "a SYN on a tuple with an entry replaces it: flow_replaced, not flow_new (evictions are derived from flow_new)",
    );
    assert.equal(readFrame(p.run(tcp({ sport: 41001, flags: ACK })).out).dmac, choice, "then followed");
  });

  await t.test("a flow whose node generation changed takes the current choice (and is rewritten)", () => {
    const choice = ringChoice(41002);
    const other = nodes.map((n) => n.name).find((n) => macOf(n) !== choice)!;
    setFlow(41002, other, 1);
    assert.equal(readFrame(p.run(tcp({ sport: 41002, flags: ACK })).out).dmac, choice);
  });

  await t.test("a mid-flow packet without an entry (LB restart, eviction) takes the ring choice", () => {
    const choice = ringChoice(41003);
    p.bpftool([
      "map",
      "delete",
      "pinned",
      `${p.dp.pinDir}/maps/flows`,
      "key",
      "hex",
      ...flowKey(41003).split(" "),
    ]);
    assert.equal(readFrame(p.run(tcp({ sport: 41003, flags: ACK })).out).dmac, choice);
  });

  await t.test("source ranges: inside forwarded, outside dropped, a family without ranges dropped", () => {
    assert.equal(p.run(tcp({ dport: 82, src: "203.0.113.9" })).action, XDP.TX);
    assert.equal(p.run(tcp({ dport: 82, src: "203.0.113.17" })).action, XDP.DROP);
    const six = (src: string, dport: number) => frame({ src, dst: VIP6, proto: "tcp", sport: 1000, dport });
    assert.equal(p.run(six("fd00:203::ff", 82)).action, XDP.TX);
    assert.equal(p.run(six("fd00:203::1:0", 82)).action, XDP.DROP);
    assert.equal(p.run(six("fd00:203::ff", 83)).action, XDP.DROP, "IPv4-only ranges drop IPv6 clients");
  });

  await t.test("IPv6: forwarded with the hop limit decremented", () => {
    const r = p.run(frame({ src: CLIENT6, dst: VIP6, proto: "tcp", sport: 5555, dport: 80, ttl: 9 }));
    assert.equal(r.action, XDP.TX);
    assert.equal(readFrame(r.out).ttl, 8);
    assert.equal(readFrame(r.out).smac, LB_MAC);
  });

  await t.test("UDP: forwarded; a datagram of a flow follows its entry", () => {
    const udp = (sport: number) =>
      frame({ src: CLIENT, dst: VIP, proto: "udp", sport, dport: 53, payload: 12 });
    const a = readFrame(p.run(udp(7000)).out).dmac;
    for (let i = 0; i < 5; i++) assert.equal(readFrame(p.run(udp(7000)).out).dmac, a);
    assert.equal(
      p.run(frame({ src: CLIENT6, dst: VIP6, proto: "udp", sport: 7000, dport: 53 })).action,
      XDP.TX,
    );
  });

  await t.test("ClientIP affinity: every source port of a client reaches one node", () => {
    const seen = new Set<string>();
    for (let port = 30000; port < 30040; port++)
      seen.add(readFrame(p.run(tcp({ dport: 84, sport: port })).out).dmac);
    assert.equal(seen.size, 1);
  });

  await t.test("zonal affinity: a client in zone za's CIDR reaches za's node; others all nodes", () => {
    const seen = new Set<string>();
    for (let port = 30000; port < 30040; port++)
      seen.add(readFrame(p.run(tcp({ dport: 86, sport: port, src: "203.0.113.3" })).out).dmac);
    assert.deepEqual([...seen], [nodeMac(1)]);
    const all = new Set<string>();
    for (let port = 30000; port < 30100; port++)
      all.add(readFrame(p.run(tcp({ dport: 86, sport: port, src: "203.0.113.33" })).out).dmac);
    assert.equal(all.size, 3);
  });

  await t.test("a Service without nodes drops (as the nft chain does)", () => {
    assert.equal(p.run(tcp({ dport: 85 })).action, XDP.DROP);
  });

  await t.test(
    "a changed ring is swapped, then an RCU barrier the kernel accepts frees the old block",
    async () => {
      const barrier = `${p.dp.pinDir}/maps/rcu_barrier`;
      const shown = JSON.parse(p.bpftool(["-j", "map", "show", "pinned", barrier])) as { type: string };
      assert.equal(shown.type, "array_of_maps");
      // t/one moves from node-1 to node-2 and t/far from node-9 to node-8: t/far's old ring
      // (no other Service's) is retired, and the barrier (an update of the array-of-maps:
      // synchronize_rcu in the kernel) ends the batch
      const moved = services.map((s) =>
        s.name === "t/one"
          ? { ...s, nodes: [nodes[1]!] }
          : s.name === "t/far"
            ? { ...s, nodes: [{ name: "node-8", v4: "198.51.100.98" }] }
            : s,
      );
      await p.dp.apply({ forwarding: moved.map((s) => forwardingOf(s, 7)), zones });
      await p.dp.settled(); // the barrier runs after the commit
      const element = JSON.parse(p.bpftool(["-j", "map", "dump", "pinned", barrier])) as {
        value: string[];
      }[];
      const config = JSON.parse(p.bpftool(["-j", "map", "show", "pinned", `${p.dp.pinDir}/maps/config`])) as {
        id: number;
      };
      assert.equal(element.length, 1, "the barrier set its one element (an array-of-maps starts empty)");
      assert.equal(
        Buffer.from(element[0]!.value.map((h) => Number(h))).readUInt32LE(),
        config.id,
        "to the config map",
      );
      assert.equal(
        readFrame(p.run(tcp({ dport: 81 })).out).dmac,
        nodeMac(2),
        "t/one now reaches node-2 (a SYN)",
      );
      await p.dp.apply({ forwarding, zones });
      assert.equal(readFrame(p.run(tcp({ dport: 81 })).out).dmac, nodeMac(1), "and back");
    },
  );

  await t.test("handed to the stack: IP options, fragments, TTL 1, a node XDP cannot reach; redirect", () => {
    assert.equal(p.run(tcp({ options: true })).action, XDP.PASS);
    assert.equal(p.run(tcp({ fragment: true })).action, XDP.PASS);
    assert.equal(p.run(tcp({ ttl: 1 })).action, XDP.PASS, "the kernel sends time exceeded");
    assert.equal(p.run(tcp({ dport: 87 })).action, XDP.PASS, "no next hop for node-9: nftables forwards");
    assert.equal(
      p.run(tcp({ dport: 81, sport: 1 }), 2).action,
      XDP.REDIRECT,
      "egress (1) ≠ ingress (2): redirected through the devmap",
    );
  });

  await t.test("frames above the node's MTU go to the stack", async () => {
    p.hops.set(nodes[0]!.v4, { xdp: true, ifindex: 1, mtu: 60, dmac: nodeMac(1), smac: LB_MAC });
    await p.dp.apply({ forwarding, zones: [] });
    assert.equal(p.run(tcp({ dport: 81, payload: 100 })).action, XDP.PASS);
    assert.equal(p.run(tcp({ dport: 81 })).action, XDP.TX, "40-byte packet fits");
  });

  await t.test("counters: per Service, per node and per reason", async () => {
    const c = await p.dp.counters();
    assert.ok((c.services.get("t/web")?.packets ?? 0) > 300);
    assert.equal(c.services.get("t/guarded")?.packets, 2, "counted after the source-range check");
    assert.ok((c.nodes.get("node-1")?.packets ?? 0) > 0);
    assert.ok((c.reasons.get("drop_source")?.packets ?? 0) >= 3);
    assert.ok((c.reasons.get("pass_not_vip")?.packets ?? 0) >= 3);
    assert.ok((c.flows?.entries.get("IPv4") ?? 0) > 300);
    assert.ok((c.flows?.entries.get("IPv6") ?? 0) >= 1);
    // far below capacity the LRU evicts nothing; the one key this test deleted by hand (the
    // mid-flow case) left the table without an insert, which is what an eviction looks like
    assert.equal(c.flows?.evictions, 1, "evictions: the hand-deleted key only");
  });
});

test("XDP and nftables choose the same Maglev slot for a tuple (jhash mod M seed S)", {
  timeout: 60_000,
}, async (t) => {
  if (why) return t.skip(why);
  for (const cmd of ["nft", "conntrack"])
    if (spawnSync(cmd, ["--version"]).error) return t.skip(`needs ${cmd}`);
  const seed = 0x5eed;
  const M = 251;
  const p = await loadProgram(t, seed);
  // slot k → node index k, whose MAC encodes k: the output frame tells the program's slot
  const pin = (m: string) => `${p.dp.pinDir}/maps/${m}`;
  const ops: MapOp[] = [];
  for (let k = 0; k < M; k++) {
    const dmac = `02:00:00:00:${(k >> 8).toString(16).padStart(2, "0")}:${(k & 0xff).toString(16).padStart(2, "0")}`;
    ops.push({
      op: "update",
      map: pin("nodes"),
      key: encodeU32(k),
      value: encodeNode({ ifindex: 1, flags: 3, gen: 1, mtu: 1500, dmac, smac: LB_MAC }),
    });
    ops.push({ op: "update", map: pin("rings"), key: encodeU32(k), value: encodeU32(k) });
  }
  ops.push({
    op: "update",
    map: pin("config"),
    key: encodeU32(0),
    value: encodeConfig({ seed, udpTimeoutS: 30, maxSynPerCpu: 0 }),
  });
  const SRC = "192.0.2.1";
  const DST = "192.0.2.2";
  const SRC6 = "fd00:192::1";
  const DST6 = "fd00:192::2";
  for (const [family, address] of [
    [4, DST],
    [6, DST6],
  ] as const)
    ops.push({
      op: "update",
      map: pin("vips"),
      key: encodeVipKey({ family, proto: 17, port: 53, address }),
      value: encodeVipValue({ listener: family, service: 0, ringId: 1, flags: 0 }),
    });
  ops.push({ op: "update", map: pin("ring_ids"), key: encodeU32(1), value: encodeRingRef(0, M) });
  await createBpfTool().batch(ops);
  const ports = Array.from({ length: 40 }, (_, i) => 40000 + i * 97);
  const xdpSlot = (src: string, dst: string, sport: number) => {
    const out = p.run(frame({ src, dst, proto: "udp", sport, dport: 53 })).out;
    return out.readUInt16BE(4);
  };
  // the kernel's nft_hash over the same tuples: ct mark = jhash(…) mod M, read back with conntrack
  const ns = `plbxdpj${process.pid % 100000}`;
  t.after(() => {
    spawnSync("ip", ["netns", "del", ns]);
  });
  assert.equal(spawnSync("ip", ["netns", "add", ns]).status, 0);
  const sh = (cmd: string, input?: string) => {
    const r = spawnSync("ip", ["netns", "exec", ns, "sh", "-c", cmd], { input, encoding: "utf8" });
    assert.equal(r.status, 0, `${cmd}: ${r.stderr}`);
    return r.stdout;
  };
  sh(
    `ip link set lo up && ip addr add ${SRC}/24 dev lo && ip addr add ${DST}/32 dev lo && ip addr add ${SRC6}/64 dev lo nodad && ip addr add ${DST6}/128 dev lo nodad`,
  );
  const hash = (ip: string) => `jhash ${ip} saddr . th sport . ${ip} daddr . th dport mod ${M} seed ${seed}`;
  sh(
    "nft -f -",
    [
      "table inet t {",
      "  chain out {",
      "    type filter hook output priority 0",
      `    meta nfproto ipv4 meta l4proto udp ct mark set ${hash("ip")}`,
      `    meta nfproto ipv6 meta l4proto udp ct mark set ${hash("ip6")}`,
      "  }",
      "}",
      "",
    ].join("\n"),
  );
  const send = `const d=require("node:dgram");(async()=>{for(const [f,s,t] of [["udp4","${SRC}","${DST}"],["udp6","${SRC6}","${DST6}"]])for(const p of ${JSON.stringify(ports)}){const k=d.createSocket(f);await new Promise(r=>k.bind(p,s,r));await new Promise(r=>k.send("x",53,t,r));k.close();}})()`;
  sh(`${process.execPath} -e '${send}'`);
  const marks = new Map<string, number>();
  for (const line of sh("conntrack -L -p udp 2>/dev/null").split("\n")) {
    const m = /src=(\S+) dst=\S+ sport=(\d+) dport=53 .*mark=(\d+)/.exec(line);
    if (m) marks.set(`${m[1]} ${m[2]}`, Number(m[3]));
  }
  let compared = 0;
  for (const [src, dst] of [
    [SRC, DST],
    [SRC6, DST6],
  ] as const)
    for (const port of ports) {
      const want = marks.get(`${src} ${port}`);
      assert.notEqual(want, undefined, `nft saw ${src}:${port}`);
      assert.equal(xdpSlot(src, dst, port), want, `slot of ${src}:${port}`);
      compared++;
    }
  assert.equal(compared, 80);
});
