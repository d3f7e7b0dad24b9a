// ProbeConnections against local servers on 127.0.0.1: kept connections are reused only
// while the exchange stays in step, a target closing an idle connection costs no failed
// probe, and nothing stays open after forget() or close().
import assert from "node:assert/strict";
import { createServer, type Server, type Socket } from "node:net";
import { after, describe, it } from "node:test";
import { type KeyedProbeRequest, ProbeConnections } from "./probe-connections.ts";

const HOST = "127.0.0.1";
const OK = "HTTP/1.1 200 OK\r\nX-Load-Balancing-Endpoint-Weight: 2\r\nContent-Length: 2\r\n\r\n{}";

interface TestServer {
  readonly port: number;
  readonly connections: () => number;
  readonly open: Set<Socket>;
}

const servers: Server[] = [];
const allOpen: Set<Socket>[] = [];

/** a server calling `onRequest(socket, n)` for the n-th request on each connection */
async function serve(onRequest: (s: Socket, n: number, conn: number) => void): Promise<TestServer> {
  let count = 0;
  const open = new Set<Socket>();
  const server = createServer((s) => {
    const conn = ++count;
    let n = 0;
    open.add(s);
    s.on("close", () => open.delete(s));
    s.on("error", () => {});
    s.on("data", () => onRequest(s, ++n, conn));
  });
  await new Promise<void>((r) => server.listen({ host: HOST, port: 0 }, r));
  servers.push(server);
  allOpen.push(open);
  return { port: (server.address() as { port: number }).port, connections: () => count, open };
}

const req = (port: number, over: Partial<KeyedProbeRequest> = {}): KeyedProbeRequest => ({
  key: `HTTP ${HOST}:${port}/healthz`,
  protocol: "HTTP",
  address: HOST,
  port,
  path: "/healthz",
  timeoutMs: 500,
  readsWeight: true,
  ...over,
});

const settle = () => new Promise((r) => setTimeout(r, 30));

describe("ProbeConnections", () => {
  const probes = new ProbeConnections();
  after(async () => {
    probes.close();
    for (const open of allOpen) for (const s of open) s.destroy();
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  it("reuses one connection for successive probes", async () => {
    const t = await serve((s) => s.write(OK));
    for (let i = 0; i < 3; i++)
      assert.deepEqual(await probes.probe(req(t.port)), { ok: true, reason: "HTTP 200", weight: 2 });
    assert.equal(t.connections(), 1);
  });

  it("waits for a body that arrives in pieces before reusing", async () => {
    const t = await serve((s) => {
      s.write("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345");
      setTimeout(() => s.write("67890"), 10);
    });
    assert.equal((await probes.probe(req(t.port))).ok, true);
    await settle();
    assert.equal((await probes.probe(req(t.port))).ok, true);
    assert.equal(t.connections(), 1);
  });

  it("does not reuse after Connection: close, chunked bodies or bytes out of step", async () => {
    const close = await serve((s) =>
      s.end("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n"),
    );
    const chunked = await serve((s) =>
      s.write("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
    );
    const extra = await serve((s) => s.write(`${OK}surplus`));
    for (const t of [close, chunked, extra]) {
      assert.equal((await probes.probe(req(t.port))).ok, true);
      await settle();
      assert.equal((await probes.probe(req(t.port))).ok, true);
      assert.equal(t.connections(), 2);
    }
  });

  it("a target that closes a kept connection costs no failed probe", async () => {
    // closes idle connections after each answer, a little later (an idle timeout)
    const idle = await serve((s) => {
      s.write(OK);
      setTimeout(() => s.destroy(), 5);
    });
    assert.equal((await probes.probe(req(idle.port))).ok, true);
    await settle();
    assert.equal((await probes.probe(req(idle.port))).ok, true);
    // closes the kept connection exactly when the next request arrives (the race): retried
    const racy = await serve((s, n) => (n === 1 ? s.write(OK) : s.destroy()));
    assert.equal((await probes.probe(req(racy.port))).ok, true);
    assert.deepEqual(await probes.probe(req(racy.port)), { ok: true, reason: "HTTP 200", weight: 2 });
    assert.equal(racy.connections(), 2);
  });

  it("a hung answer times out and drops the connection", async () => {
    const t = await serve((_s, _n, conn) => void conn);
    const start = performance.now();
    assert.deepEqual(await probes.probe(req(t.port, { timeoutMs: 100 })), {
      ok: false,
      reason: "timeout after 100 ms",
    });
    assert.ok(performance.now() - start < 400);
    await settle();
    assert.equal(t.open.size, 0, "the server saw the connection closed");
  });

  it("forget() and close() leave nothing open", async () => {
    const a = await serve((s) => s.write(OK));
    const b = await serve((s) => s.write(OK));
    const own = new ProbeConnections();
    await own.probe(req(a.port));
    await own.probe(req(b.port));
    assert.equal(own.open, 2);
    own.forget(req(a.port).key);
    await settle();
    assert.equal(a.open.size, 0);
    assert.equal(b.open.size, 1);
    own.close();
    await settle();
    assert.equal(b.open.size, 0);
    assert.equal(own.open, 0);
    assert.equal((await own.probe(req(b.port))).ok, true, "after close, probes still work, one-shot");
    await settle();
    assert.equal(b.open.size, 0);
  });

  it("TCP probes connect afresh each time", async () => {
    const t = await serve(() => {});
    assert.deepEqual(await probes.probe(req(t.port, { protocol: "TCP", path: null })), {
      ok: true,
      reason: "TCP connect",
    });
    assert.deepEqual(await probes.probe(req(t.port, { protocol: "TCP", path: null })), {
      ok: true,
      reason: "TCP connect",
    });
    assert.equal(t.connections(), 2);
  });
});
