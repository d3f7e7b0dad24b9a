/**
 * The tunnel check's targets (state-tunnel-targets.ts) and its probe's port pool and
 * sockets (probe-tunnel.ts, over loopback: a bound local port, closed with a reset, is free
 * again at once).
 */
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";
import { TunnelPorts, tunnelProbe } from "./probe-tunnel.ts";
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

test("the port pool: round robin, never a port in flight twice, exhausted → none", () => {
  const ports = new TunnelPorts({ first: 61000, last: 61002 });
  assert.deepEqual(
    [ports.take(), ports.take(), ports.take(), ports.take()],
    [61000, 61001, 61002, undefined],
  );
  ports.give(61001);
  assert.equal(ports.take(), 61001);
  ports.give(61000);
  ports.give(61002);
  assert.equal(ports.take(), 61002);
  assert.equal(ports.inUse, 2);
});

test("the probe binds a port of the range, resets the connection and can reuse the port at once", async (t) => {
  const peers: number[] = [];
  const server = createServer((s) => {
    peers.push(s.remotePort ?? 0);
    s.on("error", () => {});
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  t.after(() => server.close());
  const port = (server.address() as { port: number }).port;
  const base = 40000 + (process.pid % 20000);
  const pool = new TunnelPorts({ first: base, last: base }); // one port: reuse is forced
  const probe = tunnelProbe(pool);
  const t0 = target({
    key: "k",
    address: "127.0.0.1",
    port,
    protocol: "TCP",
    timeoutMs: 2000,
    via: "tunnel",
  });
  for (let i = 0; i < 3; i++)
    assert.deepEqual(await probe(t0), { ok: true, reason: "TCP connect through the tunnel" });
  assert.equal(pool.inUse, 0);
  await new Promise((r) => setTimeout(r, 50));
  assert.deepEqual(peers, [base, base, base], "every probe came from the one port (no TIME_WAIT blocked it)");
  server.close();
  const refused = await probe(t0);
  assert.equal(refused.ok, false);
  assert.equal(refused.reason, "through the tunnel: connection refused");
});
