/** The tunnel check's targets (state-tunnel-targets.ts); the probe: probe-tunnel.test.ts. */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { ProbeTarget } from "./state-probe-targets.ts";
import { TUNNEL_CHECK_FAILED, tunnelTargets } from "./state-tunnel-targets.ts";

const target = (over: Partial<ProbeTarget> & Pick<ProbeTarget, "key" | "address" | "port">): ProbeTarget => ({
  protocol: "HTTP",
  family: over.address.includes(":") ? "IPv6" : "IPv4",
  path: "/healthz",
  intervalMs: 8000,
  timeoutMs: 1000,
  healthyThreshold: 1,
  unhealthyThreshold: 3,
  readsWeight: false,
  users: [],
  ...over,
});

const routed = (a: string) => a !== "198.51.100.11";
const TARGETS: ProbeTarget[] = [
  target({
    key: "HTTP 198.51.100.65:10256/healthz",
    address: "198.51.100.65",
    port: 10256,
    users: [{ service: "encap/any", check: "cluster", node: "node-a1" }],
  }),
  target({
    key: "HTTP 198.51.100.65:32110/healthz",
    address: "198.51.100.65",
    port: 32110,
    intervalMs: 3000,
    unhealthyThreshold: 2,
    readsWeight: true,
    users: [{ service: "encap/web", check: "local", node: "node-a1" }],
  }),
  // a TCP check on the same port shares the tunnel target
  target({
    key: "TCP 198.51.100.65:32110",
    address: "198.51.100.65",
    port: 32110,
    protocol: "TCP",
    path: null,
    timeoutMs: 500,
    healthyThreshold: 2,
    users: [{ service: "encap/tcp", check: "tcp", node: "node-a1" }],
  }),
  target({
    key: "HTTP [fd00:198:51:101::1]:10256/healthz",
    address: "fd00:198:51:101::1",
    port: 10256,
    users: [{ service: "encap/any", check: "cluster", node: "node-a1" }],
  }),
  // on the LB host's segment: no tunnel, no check
  target({
    key: "HTTP 198.51.100.11:10256/healthz",
    address: "198.51.100.11",
    port: 10256,
    users: [{ service: "encap/any", check: "cluster", node: "node-c1" }],
  }),
];

test("one TCP target per routed (address, port), gating that port's users, with the strictest timing", () => {
  const out = tunnelTargets(TARGETS, routed);
  assert.deepEqual(
    out.map((t) => t.key),
    [
      "TCP 198.51.100.65:10256 via tunnel",
      "TCP 198.51.100.65:32110 via tunnel",
      "TCP [fd00:198:51:101::1]:10256 via tunnel",
    ],
  );
  const web = out[1]!;
  assert.deepEqual(
    { ...web, users: web.users.map((u) => u.service) },
    {
      key: "TCP 198.51.100.65:32110 via tunnel",
      protocol: "TCP",
      family: "IPv4",
      address: "198.51.100.65",
      port: 32110,
      path: null,
      intervalMs: 3000,
      timeoutMs: 500,
      healthyThreshold: 2,
      unhealthyThreshold: 2,
      readsWeight: false,
      users: ["encap/tcp", "encap/web"],
      via: "tunnel",
    },
  );
  assert.equal(out[2]!.family, "IPv6");
  // a tunnel target is never the source of another; nothing routed, nothing checked
  assert.deepEqual(
    tunnelTargets(out, () => true),
    [],
  );
  assert.deepEqual(
    tunnelTargets(TARGETS, () => false),
    [],
  );
  assert.equal(TUNNEL_CHECK_FAILED, "tunnel_check_failed");
});
