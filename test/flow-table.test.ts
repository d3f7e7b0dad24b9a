/**
 * The TCP flow table (issue 25; docs/dataplane-nftables.md "Flow pinning"): its sizing
 * findings, the flags, the streaming entry count, what drift means for a map the packet
 * path writes, and — as root, against the real kernel in a throwaway namespace — that the
 * rendered table loads, that a SYN replaces its tuple's entry while the other packets follow
 * it (IPv4 and IPv6), and that the listing the metrics read is counted right. `passlb lb`
 * with a fake applier prints the warnings at start.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { test } from "node:test";
import { flowSettingsFromFlags } from "../src/cli/lb-flow-flags.ts";
import { type NftLbFlags, runNftablesLb } from "../src/cli/lb-nftables.ts";
import type { ConntrackSysctl } from "../src/drivers/conntrack-sysctl.ts";
import { FakeNft } from "../src/drivers/fake-nft.ts";
import { type NftOp, nftScript, transaction } from "../src/drivers/nft-transaction.ts";
import { FlowTableKeeper } from "../src/lb-host/nftables/flow-table-keeper.ts";
import { flowTableSizing } from "../src/lb-host/nftables/flow-table-sizing.ts";
import { createEntryCounter, FlowUsagePacer } from "../src/lb-host/nftables/flow-table-usage.ts";
import { driftBetween } from "../src/lb-host/nftables/nft-drift.ts";
import { tableOf } from "../src/lb-host/nftables/nft-generation.ts";
import {
  DEFAULT_FLOW_TABLE,
  flowKey,
  flowMap,
  flowTableState,
  flowTableTransaction,
} from "../src/lb-host/nftables/render/flow-map.ts";
import type { NftState } from "../src/lb-host/nftables/render/nft-state.ts";
import { stateFromNftJson } from "../src/lb-host/nftables/render/parse-nft-json.ts";
import { fakeLbHostDrivers } from "../src/lb-host/nftables-host/fake-drivers.ts";
import { assertGolden } from "./golden.ts";
import { kernelSkipReason, withNetns } from "./netns.ts";

const table = { size: 1000, timeoutSeconds: 300 };

const FLOWS = (...ops: NftOp[]) => transaction("passlb-flows", ops);
const chainOf = (verb: NftOp["verb"], name: string): NftOp => ({ verb, object: { kind: "chain", name } });

test("sizing: silent when the flow table holds what conntrack can; warnings name the flag to raise", () => {
  assert.deepEqual(
    flowTableSizing({ flowTable: DEFAULT_FLOW_TABLE, conntrackMax: 262144, expectedFlows: undefined }),
    [],
  );
  assert.deepEqual(
    flowTableSizing({ flowTable: table, conntrackMax: undefined, expectedFlows: undefined }),
    [],
  );
  const small = flowTableSizing({ flowTable: table, conntrackMax: 262144, expectedFlows: undefined });
  assert.deepEqual(
    small.map((f) => f.code),
    ["flow_table_below_conntrack"],
  );
  assert.match(
    small[0]!.message,
    /holds 1000 flows .* fewer than nf_conntrack_max 262144: .*--flow-table-size to 262144/,
  );
  const expected = flowTableSizing({ flowTable: table, conntrackMax: 5000, expectedFlows: 10_000 });
  assert.deepEqual(
    expected.map((f) => f.code),
    ["flow_table_below_expected", "conntrack_below_expected"],
  );
  assert.match(expected[1]!.message, /--conntrack-max 10000/);
  assert.deepEqual(
    flowTableSizing({ flowTable: { ...table, size: 10_000 }, conntrackMax: 10_000, expectedFlows: 10_000 }),
    [],
  );
});

test("flags: defaults, values and clear errors", () => {
  assert.deepEqual(flowSettingsFromFlags({}), { flowTable: DEFAULT_FLOW_TABLE, expectedFlows: undefined });
  assert.deepEqual(
    flowSettingsFromFlags({ flowTableSize: "2000", flowTimeout: "60", expectedFlows: "1500" }),
    {
      flowTable: { size: 2000, timeoutSeconds: 60 },
      expectedFlows: 1500,
    },
  );
  assert.equal(
    flowSettingsFromFlags({ flowTableSize: "0" }),
    "--flow-table-size must be an integer 1..4294967295, got 0",
  );
  assert.match(String(flowSettingsFromFlags({ flowTimeout: "1.5" })), /--flow-timeout must be an integer/);
  assert.match(
    String(flowSettingsFromFlags({ expectedFlows: "many" })),
    /--expected-flows must be an integer/,
  );
});

test("entry counter: counts every element, also when a chunk boundary cuts the word", () => {
  const text =
    "elements = { 1 . 2 . 3 . 4 expires 4m59s : 0x1, 5 . 6 . 7 . 8 expires 1s : 0x2,\n 9 expires 3s : 0x3 }";
  for (const size of [1, 2, 3, 5, 8, 13, 1000]) {
    const c = createEntryCounter();
    for (let i = 0; i < text.length; i += size) c.push(text.slice(i, i + size));
    assert.equal(c.count, 3, `chunks of ${size}`);
  }
  const none = createEntryCounter();
  none.push("table inet passlb {\n map flows4 {\n size 1048576\n }\n}\n");
  assert.equal(none.count, 0);
});

test("pacer: one read at a time, and after a read that took d none for 20 × d", async () => {
  let now = 0;
  const pacer = new FlowUsagePacer(() => now);
  let release: () => void = () => {};
  const slow = pacer.maybe(
    () =>
      new Promise<number>((r) => {
        release = () => r(1);
      }),
  );
  assert.equal(await pacer.maybe(async () => 2), undefined, "one at a time");
  now = 100;
  release();
  assert.equal(await slow, 1);
  now = 2000;
  assert.equal(await pacer.maybe(async () => 3), undefined, "100 ms read: nothing before 2,100 ms");
  now = 2100;
  assert.equal(await pacer.maybe(async () => 4), 4);
});

test("drift: a flow map's elements are the kernel's; a missing flow map is drift", () => {
  const m = flowMap(4, table);
  const expected: NftState = { table: "passlb", sets: new Map([[m.name, m]]), chains: new Map() };
  const busy = {
    ...m,
    decl: "?",
    elements: new Map([["192.0.2.1 . 40000 . 203.0.113.1 . 80", "0x5a000001"]]),
  };
  assert.equal(driftBetween(expected, { ...expected, sets: new Map([[m.name, busy]]) }, true), undefined);
  assert.equal(driftBetween(expected, { ...expected, sets: new Map() }, true), "set flows4 missing");
  // the parser does not read the elements back (a million of them would be listed for nothing)
  const parsed = stateFromNftJson(
    {
      nftables: [
        {
          map: {
            family: "inet",
            name: "flows4",
            table: "passlb",
            type: ["ipv4_addr"],
            map: "mark",
            elem: [[{ elem: { val: "192.0.2.1" } }, 1]],
          },
        },
      ],
    },
    "passlb",
  );
  assert.equal(parsed.sets.get("flows4")?.elements.size, 0);
  assert.equal(parsed.sets.get("flows4")?.dynamic, true);
});

test("the flow table's script (golden): created once, chains refilled, maps never emptied", () => {
  const state = flowTableState("passlb", 42, DEFAULT_FLOW_TABLE);
  assertGolden("test/fixtures/flow-table/ensure.nft", nftScript(flowTableTransaction(state)));
  const replace = nftScript(flowTableTransaction(state, true));
  assert.match(
    replace,
    /^add table inet passlb-flows\ndelete table inet passlb-flows\nadd table inet passlb-flows\n/,
  );
  assert.doesNotMatch(nftScript(flowTableTransaction(state)), /^delete |^flush (map|set|table)/m);
});

test("keeper: applies once, finds a flushed chain or a deleted map, restores on the next ensure", async () => {
  const nft = new FakeNft();
  const keeper = new FlowTableKeeper(nft, "passlb", 1, table);
  await keeper.ensure();
  await keeper.ensure();
  assert.equal(nft.scripts.length, 1, "the second ensure has nothing to do");
  assert.equal(await keeper.check(), undefined);
  await nft.run(FLOWS(chainOf("flush", "write")));
  assert.equal(await keeper.check(), "chain write rules changed");
  await keeper.ensure();
  assert.equal(await keeper.check(), undefined);
  await nft.run(
    FLOWS(
      chainOf("flush", "follow"),
      chainOf("flush", "write"),
      chainOf("delete", "follow"),
      chainOf("delete", "write"),
      { verb: "delete", object: { kind: "map", name: "flows6" } },
    ),
  );
  assert.equal(await keeper.check(), "set flows6 missing");
  await keeper.ensure();
  assert.equal(await keeper.check(), undefined);
  await nft.run(FLOWS({ verb: "delete", object: { kind: "table" } }));
  assert.equal(await keeper.check(), "table missing");
  await keeper.ensure();
  assert.equal(await keeper.check(), undefined);
});

test("the flow table is listed only after a commit named it (monitor lines), not after every passlb commit", async () => {
  assert.equal(tableOf("delete rule inet passlb-flows write handle 3"), "passlb-flows");
  assert.equal(tableOf("delete table inet passlb-flows"), "passlb-flows");
  assert.equal(tableOf("add element inet passlb m1 { 3 : 0x5a000001 }"), "passlb");
  assert.equal(tableOf("# new generation 12 by process 4567 (nft)"), undefined);
  const nft = new FakeNft();
  const keeper = new FlowTableKeeper(nft, "passlb", 1, table);
  await keeper.ensure();
  let dumps = 0;
  const dump = nft.dump.bind(nft);
  nft.dump = async (...a) => {
    dumps++;
    return dump(...a);
  };
  assert.equal(await keeper.check("1:4"), undefined);
  assert.equal(await keeper.check("1:4"), undefined);
  assert.equal(dumps, 1, "the same token: no second listing");
  await nft.run(FLOWS(chainOf("flush", "follow")));
  assert.equal(await keeper.check("1:5"), "chain follow rules changed");
  assert.equal(await keeper.check(undefined), undefined, "marked for repair: nothing to list until then");
  await keeper.ensure();
  assert.equal(await keeper.check(undefined), undefined, "unknown token: listed, clean");
  assert.equal(dumps, 4, "ensure lists once (the limits), the unknown-token check once");
});

const FLAGS: NftLbFlags = {
  filename: ["test/fixtures/nft/_base", "test/fixtures/nft/cluster-ranges/input.yaml"],
  manifests: [],
  table: "passlb",
  seed: "1",
  maxTableSize: "4093",
  routes: false,
  probe: false,
  once: true,
  pollMs: "1000",
  driftCheckMs: "0",
  announce: "none",
  peers: [],
  handoverMs: "1000",
};

class FixedConntrack implements ConntrackSysctl {
  constructor(readonly sizes: { max: number; buckets: number }) {}
  async read() {
    return this.sizes;
  }
  async writeMax() {}
}

test("passlb lb: warns at start when the flow table cannot hold the expected flows", async () => {
  const run = async (flags: Partial<NftLbFlags>) => {
    let stderr = "";
    const io = {
      stdout: () => {},
      stderr: (s: string) => {
        stderr += s;
      },
      readStdin: async () => "",
    };
    const stop = new AbortController();
    const code = await runNftablesLb({ ...FLAGS, ...flags }, io, () => stop.signal, undefined, undefined, {
      drivers: fakeLbHostDrivers({
        nft: new FakeNft(),
        conntrackSysctl: new FixedConntrack({ max: 262144, buckets: 262144 }),
      }),
    });
    return { code, stderr };
  };
  const quiet = await run({});
  assert.equal(quiet.code, 0, quiet.stderr);
  assert.doesNotMatch(quiet.stderr, /flow_table|expected/);
  const warned = await run({ flowTableSize: "100000", expectedFlows: "500000" } as Partial<NftLbFlags>);
  assert.equal(warned.code, 0, warned.stderr);
  assert.match(
    warned.stderr,
    /passlb lb: warning flow_table_below_expected: the flow table holds 100000 flows/,
  );
  assert.match(
    warned.stderr,
    /passlb lb: warning conntrack_below_expected: nf_conntrack_max 262144 is below --expected-flows 500000/,
  );
  const bad = await run({ flowTableSize: "-1" } as Partial<NftLbFlags>);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr, /--flow-table-size must be an integer/);
});

const why = kernelSkipReason();

/** connect from a fixed source port to a closed port: one SYN (answered by a reset) */
function syn(ns: string, host: string, from: number): void {
  spawnSync("ip", [
    "netns",
    "exec",
    ns,
    process.execPath,
    "-e",
    `const s=require("net").connect({host:${JSON.stringify(host)},port:9,localPort:${from},localAddress:${JSON.stringify(host.includes(":") ? "::1" : "127.0.0.1")}});s.on("error",()=>{});`,
  ]);
}

test("kernel: a SYN replaces its tuple's entry by the current choice, IPv4 and IPv6 (nft 1.0.6 keys)", {
  timeout: 30_000,
}, async (t) => {
  if (why) return t.skip(why);
  await withNetns("flowmap", async (ns) => {
    const nft = (script: string) => {
      const r = spawnSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], { input: script, encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
    };
    spawnSync("ip", ["-n", ns, "link", "set", "lo", "up"]);
    // the maps and the flow chains exactly as rendered; the choice is a counter standing in
    // for a changing Maglev table (output hook: locally made SYNs to a closed port)
    const [m4, m6] = [flowMap(4, table), flowMap(6, table)];
    const chain = (fam: 4 | 6) =>
      `delete @flows${fam} { ${flowKey(fam, 42)} : meta mark } add @flows${fam} { ${flowKey(fam, 42)} : meta mark }`;
    nft(`table inet plbt {
      map ${m4.name} { ${m4.decl} }
      map ${m6.name} { ${m6.decl} }
      chain flow4 {
        ${chain(4)}
      }
      chain flow6 {
        ${chain(6)}
      }
      chain out { type filter hook output priority mangle; policy accept;
        tcp dport 9 tcp flags & (syn | ack) == syn meta mark set numgen inc mod 1000 meta l4proto tcp ip daddr 127.0.0.1 goto flow4
        tcp dport 9 tcp flags & (syn | ack) == syn meta mark set numgen inc mod 1000 meta l4proto tcp ip6 daddr ::1 goto flow6
      }
    }`);
    const values = (map: string) => {
      const r = spawnSync("ip", ["netns", "exec", ns, "nft", "list", "map", "inet", "plbt", map], {
        encoding: "utf8",
      });
      return [...r.stdout.matchAll(/expires \S+ : (0x[0-9a-f]+)/g)].map((m) => Number(m[1]));
    };
    for (const host of ["127.0.0.1", "::1"]) {
      const map = host.includes(":") ? "flows6" : "flows4";
      syn(ns, host, 41000);
      const first = values(map);
      syn(ns, host, 41000);
      const second = values(map);
      syn(ns, host, 41001);
      const third = values(map);
      assert.equal(first.length, 1, `${map}: one entry after the first SYN`);
      assert.equal(second.length, 1, `${map}: the same tuple keeps one entry`);
      assert.notEqual(second[0], first[0], `${map}: the second SYN replaced the first SYN's choice`);
      assert.equal(third.length, 2, `${map}: another source port is another entry`);
      const c = createEntryCounter();
      c.push(
        spawnSync("ip", ["netns", "exec", ns, "nft", "list", "map", "inet", "plbt", map], {
          encoding: "utf8",
        }).stdout,
      );
      assert.equal(c.count, 2);
    }
  });
});

/** In `ns`: a server on port 7 and one connection to it from `from`, sending `lines` lines
 * 5 ms apart (each its own packet), then closing. */
function talk(ns: string, host: string, from: number, lines: number): void {
  const local = JSON.stringify(host.includes(":") ? "::1" : "127.0.0.1");
  const js = `const net=require("net");const srv=net.createServer((c)=>c.on("data",()=>{}).on("error",()=>{})).listen(7,${JSON.stringify(host)},()=>{const s=net.connect({host:${JSON.stringify(host)},port:7,localPort:${from},localAddress:${local}},()=>{s.setNoDelay(true);let n=0;const t=setInterval(()=>{s.write("x\\n");if(++n>=${lines}){clearInterval(t);s.end();setTimeout(()=>srv.close(),50);}},5);});s.on("error",()=>srv.close());});`;
  const r = spawnSync("ip", ["netns", "exec", ns, process.execPath, "-e", js], {
    encoding: "utf8",
    timeout: 10_000,
  });
  assert.equal(r.status, 0, r.stderr);
}

test("kernel: other packets renew their flow's entry, keep its value and leave no dead elements behind (the rendered write chain)", {
  timeout: 30_000,
}, async (t) => {
  if (why) return t.skip(why);
  await withNetns("flowupd", async (ns) => {
    const nft = (script: string) => {
      const r = spawnSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], { input: script, encoding: "utf8" });
      assert.equal(r.status, 0, r.stderr);
    };
    spawnSync("ip", ["-n", ns, "link", "set", "lo", "up"]);
    // maps of 4 elements and the write chain as rendered; every packet to port 7 or 9 gets a
    // new mark in the family's node range (a counter standing in for a changing choice):
    // were a packet's entry replaced, or a dead element left per packet (a packet-path
    // delete, nft_set_hash.c), the entry would change or the 4th flow find no room
    const small = { size: 4, timeoutSeconds: 300 };
    const state = flowTableState("plbt", 42, small);
    const [m4, m6] = [flowMap(4, small), flowMap(6, small)];
    nft(`table inet plbt {
      map ${m4.name} { ${m4.decl} }
      map ${m6.name} { ${m6.decl} }
      chain write {
        ${state.chains.get("write")!.rules!.join("\n        ")}
      }
      chain out { type filter hook output priority mangle; policy accept;
        meta l4proto tcp th dport { 7, 9 } ip daddr 127.0.0.1 meta mark set numgen inc mod 1000 offset 0x5a000000 goto write
        meta l4proto tcp th dport { 7, 9 } ip6 daddr ::1 meta mark set numgen inc mod 1000 offset 0x5a800000 goto write
      }
    }`);
    const values = (map: string) => {
      const r = spawnSync("ip", ["netns", "exec", ns, "nft", "list", "map", "inet", "plbt", map], {
        encoding: "utf8",
      });
      return [...r.stdout.matchAll(/expires \S+ : (0x[0-9a-f]+)/g)].map((m) => Number(m[1]));
    };
    for (const host of ["127.0.0.1", "::1"]) {
      const map = host.includes(":") ? "flows6" : "flows4";
      syn(ns, host, 42000);
      const first = values(map);
      talk(ns, host, 42001, 40);
      const talked = values(map);
      assert.equal(talked.length, 2, `${map}: one entry per flow after 40 lines`);
      assert.ok(talked.includes(first[0]!), `${map}: the SYN-only flow kept its entry`);
      const [flowValue] = talked.filter((v) => v !== first[0]);
      // the counter's next value went to that flow's SYN; its 40+ later packets took more
      assert.equal(flowValue, first[0]! + 1, `${map}: the talking flow's entry is its SYN's choice`);
      syn(ns, host, 42002);
      syn(ns, host, 42003);
      const full = values(map);
      assert.equal(full.length, 4, `${map}: the 3rd and 4th flows found room in a map of 4`);
      assert.ok(full.includes(flowValue!), `${map}: and still is`);
    }
  });
});

test("kernel: the flow table loads, a second load keeps its entries, new limits apply in place", {
  timeout: 30_000,
}, async (t) => {
  if (why) return t.skip(why);
  await withNetns("flowtab", async (ns) => {
    const run = (script: string) =>
      spawnSync("ip", ["netns", "exec", ns, "nft", "-f", "-"], { input: script, encoding: "utf8" });
    const entries = () => {
      const c = createEntryCounter();
      c.push(
        spawnSync("ip", ["netns", "exec", ns, "nft", "list", "map", "inet", "passlb-flows", "flows4"], {
          encoding: "utf8",
        }).stdout,
      );
      return c.count;
    };
    const state = flowTableState("passlb", 1, table);
    assert.equal(run(nftScript(flowTableTransaction(state))).status, 0);
    assert.equal(
      run("add element inet passlb-flows flows4 { 192.0.2.1 . 40000 . 203.0.113.1 . 80 : 0x5a000001 }\n")
        .status,
      0,
    );
    assert.equal(entries(), 1);
    const again = run(nftScript(flowTableTransaction(state)));
    assert.equal(again.status, 0, again.stderr);
    assert.equal(entries(), 1, "loading it again keeps the entries");
    const bigger = flowTableState("passlb", 1, { ...table, size: 2000 });
    const listed = () =>
      stateFromNftJson(
        JSON.parse(
          spawnSync("ip", ["netns", "exec", ns, "nft", "-j", "-t", "list", "table", "inet", "passlb-flows"], {
            encoding: "utf8",
          }).stdout,
        ),
        "passlb-flows",
      );
    // this kernel (6.18) updates a map's size and timeout in place and keeps its elements;
    // where a kernel kept the old limits, the keeper sees them in the listing and replaces
    assert.equal(run(nftScript(flowTableTransaction(bigger))).status, 0);
    assert.equal(listed().sets.get("flows4")?.decl, "size 2000; timeout 300s;");
    assert.equal(entries(), 1, "new limits keep the entries");
    assert.equal(run(nftScript(flowTableTransaction(bigger, true))).status, 0);
    assert.equal(entries(), 0, "a replaced table starts empty");
    assert.equal(driftBetween(bigger, listed(), false), undefined, "the terse listing compares clean");
  });
});
