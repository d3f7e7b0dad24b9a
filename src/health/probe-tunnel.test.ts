/**
 * The tunnel check's probe (probe-tunnel.ts): the port pool, and over loopback a bound local
 * port, closed with a reset, free again at once.
 */
import assert from "node:assert/strict";
import { createServer } from "node:net";
import { test } from "node:test";
import { TunnelPorts, tunnelProbe } from "./probe-tunnel.ts";
import type { ProbeTarget } from "./state-probe-targets.ts";

const target = (over: Partial<ProbeTarget> & Pick<ProbeTarget, "key" | "address" | "port">): ProbeTarget => ({
  protocol: "TCP",
  family: "IPv4",
  path: null,
  intervalMs: 1000,
  timeoutMs: 1000,
  healthyThreshold: 1,
  unhealthyThreshold: 1,
  readsWeight: false,
  users: [],
  ...over,
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
