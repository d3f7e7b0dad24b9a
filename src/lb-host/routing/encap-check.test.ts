/**
 * The tunnel check's kernel side (encap-check.ts): the rule, the check table's routes and
 * the `ip -batch` lines from what the kernel holds. What the kernel does with them is
 * test/e2e/encap-check.test.ts.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type Forward, forwardFromFlags } from "./encap.ts";
import {
  DEFAULT_ENCAP_CHECK_PORTS,
  ENCAP_CHECK_TABLE,
  encapCheckCommands,
  encapCheckPortsFromFlag,
  encapCheckRoutes,
  encapCheckRule,
  parseCheckRules,
} from "./encap-check.ts";

const forward = (kind = "vxlan-gpe"): Forward => {
  const f = forwardFromFlags({
    forward: "encap",
    encap: kind,
    direct: ["198.51.100.0/26"],
    encapCheck: true,
  });
  assert.notEqual(typeof f, "string", String(f));
  return f as Forward;
};
const PORTS = DEFAULT_ENCAP_CHECK_PORTS;
const ADDRESSES = [
  { address: "198.51.100.81", src: "198.51.100.129" },
  { address: "198.51.100.65", src: "198.51.100.129" },
  { address: "198.51.100.11", src: "198.51.100.1" }, // on the segment: routed directly
  { address: "fd00:198:51:101::1" },
];

test("the rule matches only locally generated TCP from the check's ports, per family table", () => {
  assert.equal(ENCAP_CHECK_TABLE[4], 0x5a000000);
  assert.equal(ENCAP_CHECK_TABLE[6], 0x5a800000);
  assert.equal(encapCheckRule(4, PORTS), "pref 3090 iif lo ipproto tcp sport 61000-61255 lookup 1509949440");
  assert.equal(encapCheckRule(6, PORTS), "pref 3090 iif lo ipproto tcp sport 61000-61255 lookup 1518338048");
});

test("check routes: routed addresses only, the VIP routes' text plus the main table's source", () => {
  assert.deepEqual(encapCheckRoutes(forward(), ADDRESSES), [
    {
      family: 4,
      dst: "198.51.100.65",
      spec: "encap ip id 0 dst 198.51.100.65 dev plbvg0 mtu 1464 src 198.51.100.129",
    },
    {
      family: 4,
      dst: "198.51.100.81",
      spec: "encap ip id 0 dst 198.51.100.81 dev plbvg0 mtu 1464 src 198.51.100.129",
    },
    {
      family: 6,
      dst: "fd00:198:51:101::1",
      spec: "encap ip6 id 0 dst fd00:198:51:101::1 dev plbvg0 mtu 1444",
    },
  ]);
  // GUE: the NBMA device's next-hop form, as its VIP routes
  assert.equal(
    encapCheckRoutes(forward("gue"), [ADDRESSES[0]!])[0]?.spec,
    "via 198.51.100.81 dev plbgue4 onlink mtu 1468 src 198.51.100.129",
  );
  assert.deepEqual(encapCheckRoutes({ mode: "route" }, ADDRESSES), []);
});

test("from an empty kernel: routes, the fail-closed default, then the rule (so no probe passes outside)", () => {
  const wanted = encapCheckRoutes(forward(), ADDRESSES);
  assert.deepEqual(encapCheckCommands(4, { rules: [], routes: [] }, wanted, PORTS), [
    "route replace 198.51.100.65 encap ip id 0 dst 198.51.100.65 dev plbvg0 mtu 1464 src 198.51.100.129 table 1509949440",
    "route replace 198.51.100.81 encap ip id 0 dst 198.51.100.81 dev plbvg0 mtu 1464 src 198.51.100.129 table 1509949440",
    "route replace unreachable default table 1509949440",
    "rule add pref 3090 iif lo ipproto tcp sport 61000-61255 lookup 1509949440",
  ]);
});

test("in step: nothing to do; a route gone, moved or extra and a changed rule are repaired", () => {
  const wanted = encapCheckRoutes(forward(), ADDRESSES);
  // as `ip route show table 1509949440` and `ip -j rule show` print them (kernel 6.x, iproute2 6.1)
  const rulesJson = JSON.stringify([
    { priority: 0, src: "all", table: "local" },
    {
      priority: 3090,
      src: "all",
      iif: "lo",
      ipproto: "tcp",
      sport_start: 61000,
      sport_end: 61255,
      table: "1509949440",
    },
    { priority: 32766, src: "all", table: "main" },
  ]);
  const rules = parseCheckRules(rulesJson);
  assert.deepEqual(rules, ["iif lo ipproto tcp sport 61000-61255 lookup 1509949440"]);
  const routes = [
    "unreachable default ",
    "198.51.100.65  encap ip id 0 src 0.0.0.0 dst 198.51.100.65 ttl 0 tos 0 dev plbvg0 scope link src 198.51.100.129 mtu 1464 ",
    "198.51.100.81  encap ip id 0 src 0.0.0.0 dst 198.51.100.81 ttl 0 tos 0 dev plbvg0 scope link src 198.51.100.129 mtu 1464 ",
  ];
  assert.deepEqual(encapCheckCommands(4, { rules, routes }, wanted, PORTS), []);
  assert.deepEqual(
    encapCheckCommands(6, { rules: [], routes: [] }, wanted, PORTS).at(-1),
    encapCheckRule(6, PORTS).replace(/^/, "rule add "),
  );
  const drifted = [
    routes[0]!,
    // a stale node and one whose encap destination is wrong
    "198.51.100.70  encap ip id 0 src 0.0.0.0 dst 198.51.100.70 ttl 0 tos 0 dev plbvg0 scope link src 198.51.100.129 mtu 1464 ",
    "198.51.100.81  encap ip id 0 src 0.0.0.0 dst 198.51.100.99 ttl 0 tos 0 dev plbvg0 scope link src 198.51.100.129 mtu 1464 ",
  ];
  const otherPorts = { first: 62000, last: 62255 };
  assert.deepEqual(encapCheckCommands(4, { rules, routes: drifted }, wanted, otherPorts), [
    "rule del pref 3090",
    "route del 198.51.100.70 table 1509949440",
    "route replace 198.51.100.65 encap ip id 0 dst 198.51.100.65 dev plbvg0 mtu 1464 src 198.51.100.129 table 1509949440",
    "route replace 198.51.100.81 encap ip id 0 dst 198.51.100.81 dev plbvg0 mtu 1464 src 198.51.100.129 table 1509949440",
    "rule add pref 3090 iif lo ipproto tcp sport 62000-62255 lookup 1509949440",
  ]);
  // a rule someone else put at our preference (no iif lo) is not ours to keep
  const foreign = parseCheckRules(
    JSON.stringify([
      { priority: 3090, ipproto: "tcp", sport_start: 61000, sport_end: 61255, table: "1509949440" },
    ]),
  );
  assert.deepEqual(encapCheckCommands(4, { rules: foreign, routes }, wanted, PORTS), [
    "rule del pref 3090",
    "rule add pref 3090 iif lo ipproto tcp sport 61000-61255 lookup 1509949440",
  ]);
});

test("switched off (or no routed node left): rule and routes removed", () => {
  const routes = [
    "unreachable default ",
    "198.51.100.65  encap ip id 0 src 0.0.0.0 dst 198.51.100.65 ttl 0 tos 0 dev plbvg0 scope link src 198.51.100.129 mtu 1464 ",
  ];
  const rules = ["iif lo ipproto tcp sport 61000-61255 lookup 1509949440"];
  const removed = [
    "rule del pref 3090",
    "route del unreachable default table 1509949440",
    "route del 198.51.100.65 table 1509949440",
  ];
  assert.deepEqual(
    encapCheckCommands(4, { rules, routes }, encapCheckRoutes(forward(), ADDRESSES), PORTS, false),
    removed,
  );
  assert.deepEqual(encapCheckCommands(4, { rules, routes }, [], PORTS), removed);
  assert.deepEqual(encapCheckCommands(4, { rules: [], routes: [] }, [], PORTS, false), []);
});

test("--encap-check-ports: a range of ≥ 16 unprivileged ports; --encap-check only with --forward encap", () => {
  assert.deepEqual(encapCheckPortsFromFlag(undefined), { first: 61000, last: 61255 });
  assert.deepEqual(encapCheckPortsFromFlag("62000-62015"), { first: 62000, last: 62015 });
  for (const bad of ["61000", "80-200", "62000-61000", "61000-70000", "61000-61010"])
    assert.equal(typeof encapCheckPortsFromFlag(bad), "string", bad);
  assert.equal(forwardFromFlags({ encapCheck: true }), "--encap-check needs --forward encap");
  assert.equal((forward() as { check?: boolean }).check, true);
});
