/**
 * Routed networks: the per-node path, the LB host's tunnel devices and node tables, the
 * node's decapsulation devices and rp_filter settings, and the flags. The `ip` text of
 * every kind is pinned in golden files (test/fixtures/encap/*.golden.txt); the VXLAN-GPE
 * one is what the lab runs (test/e2e/encap-path.test.ts), the others are what this kernel
 * cannot create (no IPIP, GRE or FOU; docs/dataplane-nftables.md "Routed networks").
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { assertGolden } from "../../../test/golden.ts";
import { decapCommands, decapDevices, rpFilterPlan } from "../../node-agent/decap.ts";
import type { NftSet, NftState } from "../nftables/render/nft-state.ts";
import {
  clampedMss,
  deviceCommands,
  ENCAP_KINDS,
  type Forward,
  forwardFromFlags,
  lbDeviceList,
  nodePath,
} from "./encap.ts";
import {
  kernelRoutesOf,
  type PolicyRoute,
  parseRoutes,
  policyRoutesOf,
  routeCommands,
  sameRoutes,
  unionRoutes,
  wantedRules,
} from "./policy-routes.ts";

const M1 = 0x5a000001;
const M2 = 0x5a000002;
const M3 = 0x5a000003;
const M6 = 0x5a800001;

function map(name: string, entries: [string, string][]): NftSet {
  return { name, decl: "", isMap: true, elements: new Map(entries) };
}

/** two routed nodes and one on the LB's segment, two VIPs per family */
const STATE: NftState = {
  table: "passlb",
  chains: new Map(),
  sets: new Map([
    [
      "nexthops4",
      map("nexthops4", [
        [String(M1), "198.51.100.65"],
        [String(M2), "198.51.100.81"],
        [String(M3), "198.51.100.11"],
      ]),
    ],
    ["nexthops6", map("nexthops6", [[String(M6), "fd00:198:51:101::1"]])],
    [
      "dispatch4",
      map("dispatch4", [
        ["203.0.113.2 . tcp . 80", "goto a"],
        ["203.0.113.1 . tcp . 80", "goto b"],
        ["203.0.113.1 . udp . 53", "goto c"],
      ]),
    ],
    ["dispatch6", map("dispatch6", [["fd00:10::1 . tcp . 80", "goto d"]])],
  ]),
};

const forward = (kind: string, direct: string[] = ["198.51.100.0/26"]): Forward => {
  const f = forwardFromFlags({ forward: "encap", encap: kind, direct });
  assert.notEqual(typeof f, "string", String(f));
  return f as Forward;
};

test("path per node: encap unless the mode is route or the node is a listed neighbour", () => {
  const f = forward("vxlan-gpe");
  assert.equal(nodePath(f, "198.51.100.11"), "route");
  assert.equal(nodePath(f, "198.51.100.65"), "encap");
  assert.equal(nodePath(f, "fd00:198:51:101::1"), "encap");
  assert.equal(nodePath({ mode: "route" }, "198.51.100.65"), "route");
});

test("node tables: only VIP host routes through the tunnel; a neighbour keeps its default", () => {
  const routes = policyRoutesOf(STATE, forward("vxlan-gpe"));
  const rows = kernelRoutesOf(routes);
  assert.deepEqual(rows, [
    { family: 4, table: M1, dst: "203.0.113.1", spec: "encap ip id 0 dst 198.51.100.65 dev plbvg0 mtu 1464" },
    { family: 4, table: M1, dst: "203.0.113.2", spec: "encap ip id 0 dst 198.51.100.65 dev plbvg0 mtu 1464" },
    { family: 4, table: M2, dst: "203.0.113.1", spec: "encap ip id 0 dst 198.51.100.81 dev plbvg0 mtu 1464" },
    { family: 4, table: M2, dst: "203.0.113.2", spec: "encap ip id 0 dst 198.51.100.81 dev plbvg0 mtu 1464" },
    { family: 4, table: M3, dst: "default", spec: "via 198.51.100.11" },
    {
      family: 6,
      table: M6,
      dst: "fd00:10::1",
      spec: "encap ip6 id 0 dst fd00:198:51:101::1 dev plbvg0 mtu 1444",
    },
  ]);
  // the pitfall as a property: no encapsulated node's table has a default route
  for (const r of rows) if (r.spec.includes("encap")) assert.notEqual(r.dst, "default");
  // route mode: the same state gives today's routes
  assert.deepEqual(
    kernelRoutesOf(policyRoutesOf(STATE)).map((r) => `${r.table} ${r.dst} ${r.spec}`),
    [
      `${M1} default via 198.51.100.65`,
      `${M2} default via 198.51.100.81`,
      `${M3} default via 198.51.100.11`,
      `${M6} default via fd00:198:51:101::1`,
    ],
  );
});

test("ip commands of every kind (golden): LB devices and batches, node decap", () => {
  for (const kind of ENCAP_KINDS) {
    const f = forward(kind) as Extract<Forward, { mode: "encap" }>;
    const routes = policyRoutesOf(STATE, f);
    const lines = [
      "# LB host: devices",
      ...lbDeviceList(f.encap).flatMap((d) => deviceCommands(d).map((c) => `ip ${c.join(" ")}`)),
      "# LB host: ip -4 -batch (from nothing)",
      ...routeCommands(4, [], routes),
      "# LB host: ip -6 -batch (from nothing)",
      ...routeCommands(6, [], routes),
      "# node: all.rp_filter=2 (Debian's default)",
      ...decapCommands(f.encap, rpFilterPlan(decapDevices(f.encap), 2)).map((c) => `ip ${c.join(" ")}`),
      ...rpFilterPlan(decapDevices(f.encap), 2).sysctls.map((s) => `sysctl -w ${s}`),
      `# node: MSS clamp IPv4 ${clampedMss(f.encap, 4)}, IPv6 ${clampedMss(f.encap, 6)}`,
    ];
    assertGolden(`test/fixtures/encap/${kind}.golden.txt`, `${lines.join("\n")}\n`);
  }
});

test("moving between paths and VIPs: stale routes in our tables go, other tables stay", () => {
  const f = forward("vxlan-gpe");
  const routes = policyRoutesOf(STATE, f);
  // `ip -4 route show table all` as iproute2 6.x prints it (from the lab)
  const existing = parseRoutes(
    [
      `default via 198.51.100.65 dev plbnodes table ${M1} `, // was routed directly
      `203.0.113.9  encap ip id 0 src 0.0.0.0 dst 198.51.100.81 ttl 0 tos 0 dev plbvg0 table ${M2} scope link mtu 1464 `, // a VIP gone
      `203.0.113.1  encap ip id 0 src 0.0.0.0 dst 198.51.100.81 ttl 0 tos 0 dev plbvg0 table ${M2} scope link mtu 1464 `,
      "default via 198.51.100.254 dev eth0 ",
      "10.0.0.0/8 via 192.0.2.1 dev eth0 table 4242 ",
      "local 127.0.0.1 dev lo table local proto kernel scope host src 127.0.0.1 ",
    ].join("\n"),
  );
  // with what the drift check compares: the next hop, else the device (route-drift.ts)
  assert.deepEqual(existing, [
    { table: M1, dst: "default", gateway: "198.51.100.65", dev: "plbnodes" },
    { table: M2, dst: "203.0.113.9", dev: "plbvg0" },
    { table: M2, dst: "203.0.113.1", dev: "plbvg0" },
  ]);
  const rules = wantedRules(4, routes);
  const lines = routeCommands(4, rules, routes, 3100, existing);
  assert.deepEqual(lines.slice(0, 2), [`route del default table ${M1}`, `route del 203.0.113.9 table ${M2}`]);
  assert.ok(!lines.some((l) => l.startsWith("rule ")), "rules stay");
  assert.equal(lines.filter((l) => l.startsWith("route replace")).length, 5);
});

test("a pass adds VIPs before it removes them (union) and compares encap routes", () => {
  const f = forward("vxlan-gpe");
  const a = policyRoutesOf(STATE, f);
  const fewer: NftState = {
    ...STATE,
    sets: new Map([...STATE.sets, ["dispatch4", map("dispatch4", [["203.0.113.3 . tcp . 80", "goto a"]])]]),
  };
  const b = policyRoutesOf(fewer, f);
  assert.ok(!sameRoutes(a, b));
  assert.ok(sameRoutes(a, policyRoutesOf(STATE, f)));
  const u = unionRoutes(a, b);
  const m1 = u.find((r) => r.mark === M1) as PolicyRoute;
  assert.deepEqual(m1.encap?.vips, ["203.0.113.1", "203.0.113.2", "203.0.113.3"]);
});

test("rp_filter: the device 0; loose needs an address; strict is loosened and said", () => {
  const devs = decapDevices({ kind: "vxlan-gpe", port: 4790, mtu: 1500 });
  assert.deepEqual(rpFilterPlan(devs, 0), {
    sysctls: ["net.ipv4.conf.plbvg0.rp_filter=0"],
    address: false,
    note: undefined,
  });
  assert.equal(rpFilterPlan(devs, 2).address, true);
  const strict = rpFilterPlan(devs, 1);
  assert.deepEqual(strict.sysctls, ["net.ipv4.conf.all.rp_filter=2", "net.ipv4.conf.plbvg0.rp_filter=0"]);
  assert.equal(strict.address, true);
  assert.match(strict.note ?? "", /strict/);
});

test("MSS: underlay MTU minus outer, inner IP and TCP headers", () => {
  assert.equal(clampedMss({ kind: "vxlan-gpe", port: 4790, mtu: 1500 }, 4), 1424); // spec §C measured 1424
  assert.equal(clampedMss({ kind: "vxlan-gpe", port: 4790, mtu: 1500 }, 6), 1384);
  assert.equal(clampedMss({ kind: "ipip", port: undefined, mtu: 1500 }, 4), 1440);
  assert.equal(clampedMss({ kind: "ipip", port: undefined, mtu: 9000 }, 4), 8940);
});

test("flags: defaults, ports and clear problems", () => {
  assert.deepEqual(forwardFromFlags({}), { mode: "route" });
  const f = forwardFromFlags({ forward: "encap" });
  assert.deepEqual(f, { mode: "encap", encap: { kind: "vxlan-gpe", port: 4790, mtu: 1500 }, direct: [] });
  assert.deepEqual((forwardFromFlags({ forward: "encap", encap: "gue" }) as { encap: unknown }).encap, {
    kind: "gue",
    port: 6080,
    mtu: 1500,
  });
  assert.equal(forwardFromFlags({ forward: "tunnel" }), "--forward tunnel: expected route or encap");
  assert.equal(forwardFromFlags({ encap: "ipip" }), "--encap needs --forward encap");
  assert.equal(
    forwardFromFlags({ forward: "encap", encap: "geneve" }),
    "--encap geneve: expected one of vxlan-gpe, ipip, gre, gue",
  );
  assert.equal(
    forwardFromFlags({ forward: "encap", encap: "ipip", encapPort: "1" }),
    "--encap-port: ipip has no port",
  );
  assert.equal(
    forwardFromFlags({ forward: "encap", direct: ["198.51.100.1/26"] }),
    "--direct 198.51.100.1/26: expected a CIDR such as 198.51.100.0/26",
  );
});
