/**
 * The userspace proxy as an LbDataplane (lb-host/lb-dataplane.ts), on loopback (127.0.9.0/24:
 * VIPs .10-.11, node .2, clients .50-.51): apply opens and closes listeners (its ops count
 * them) and reports a port it could not bind; check() opens it once the port is free; the
 * counters carry each Service's and node's bytes; zonal affinity takes the client's zone
 * from the applied zones' clientCIDRs (client-zones.ts); stop() closes every socket.
 */
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { test } from "node:test";
import { ALL_UNKNOWN, serviceForwarding } from "../../src/forwarding/forwarding-state.ts";
import { UserspaceLb } from "../../src/lb-host/userspace/userspace-lb.ts";
import { exchange } from "./clients.ts";
import { testPlan } from "./plans.ts";

const PORT = 18_300 + (process.pid % 50);

function listen(server: Server, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host, port: PORT }, resolve);
  });
}
const closed = (server: Server) => new Promise((r) => server.close(r));

/** one request through the proxy; the node answers with its own name */
const ask = (vip: string, localAddress: string): Promise<string> =>
  exchange({ host: vip, port: PORT, localAddress }, "x");

test("UserspaceLb as an LbDataplane: apply, check restores a failed bind, counters, zones, stop", async (t) => {
  const nodes: Server[] = [];
  for (const [name, host] of [
    ["node-a", "127.0.9.2"],
    ["node-b", "127.0.9.3"],
  ] as const) {
    const s = createServer((c) => c.once("data", () => c.end(name)));
    await listen(s, host);
    nodes.push(s);
  }
  const squatter = createServer();
  await listen(squatter, "127.0.9.11"); // another process holds VIP .11's port
  const lb = new UserspaceLb({ seed: 7, connectTimeoutMs: 1000 });
  t.after(async () => {
    await lb.stop();
    if (squatter.listening) await closed(squatter);
    await Promise.all(nodes.map(closed));
  });
  assert.deepEqual(await lb.start(), { adopted: false, replaced: false });
  const members = { "node-a": "127.0.9.2", "node-b": "127.0.9.3" };
  const zonal = testPlan("127.0.9.10", PORT, PORT, members, (p) => {
    p.zonalAffinity = true;
    p.members = p.members.map((m) => ({ ...m, zone: m.node === "node-a" ? "zone-a" : "zone-b" }));
    p.backends = p.members;
  });
  const other = testPlan("127.0.9.11", PORT, PORT, { "node-a": "127.0.9.2" });
  const forwarding = [zonal, other].map((p) => serviceForwarding(p, ALL_UNKNOWN, { seed: 7 }));
  const zones = [
    { name: "zone-a", clientCIDRs: ["127.0.9.50/32"] },
    { name: "zone-b", clientCIDRs: ["127.0.9.51/32"] },
  ];

  const first = await lb.apply({ forwarding, zones });
  assert.equal(first.ops, 1, "one listener opened");
  assert.deepEqual(
    first.findings?.map((f) => f.code),
    ["listener_bind_failed"],
  );
  assert.deepEqual(await lb.check(), [], "the port is still taken: nothing to open");
  assert.equal((await lb.apply({ forwarding, zones })).ops, 0, "the same state again changes nothing");

  // zonal affinity: each client stays in its zone, whatever the 5-tuple
  for (let i = 0; i < 6; i++) {
    assert.equal(await ask("127.0.9.10", "127.0.9.50"), "node-a");
    assert.equal(await ask("127.0.9.10", "127.0.9.51"), "node-b");
  }

  await closed(squatter);
  assert.deepEqual(await lb.check(), [`listener TCP 127.0.9.11:${PORT} opened`]);
  assert.equal(await ask("127.0.9.11", "127.0.9.50"), "node-a");

  const c = await lb.counters();
  assert.ok((c.services.get("t/127.0.9.10")?.bytes ?? 0) >= 12 * 7, "12 requests and answers counted");
  assert.ok((c.nodes.get("node-b")?.bytes ?? 0) >= 6 * 7);
  assert.equal(c.reasons.size, 0);

  assert.equal((await lb.apply({ forwarding: forwarding.slice(1), zones })).ops, 1, "one listener closed");
  await lb.stop();
  assert.deepEqual(lb.listening(), []);
});
