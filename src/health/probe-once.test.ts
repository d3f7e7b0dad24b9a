// probeOnce against misbehaving local servers on 127.0.0.1: it resolves once with a clear
// reason whatever the target does, and leaves no socket or timer behind.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createServer as createHttpsServer } from "node:https";
import { createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, it } from "node:test";
import { freePort } from "../../test/health/net-helpers.ts";
import { FakeClock } from "./clock.ts";
import { HealthServers } from "./health-servers.ts";
import { MAX_HEAD_BYTES, type ProbeRequest, parseHead, probeOnce } from "./probe-once.ts";

const HOST = "127.0.0.1";

/** a raw TCP server whose behaviour per connection is given */
async function rawServer(
  onSocket: (s: Socket) => void,
): Promise<{ server: Server; port: number; sockets: Set<Socket> }> {
  const sockets = new Set<Socket>();
  const server = createServer((s) => {
    sockets.add(s);
    s.on("close", () => sockets.delete(s));
    s.on("error", () => {});
    onSocket(s);
  });
  await new Promise<void>((r) => server.listen({ host: HOST, port: 0 }, r));
  return { server, port: (server.address() as { port: number }).port, sockets };
}

const http = (port: number, over: Partial<ProbeRequest> = {}): ProbeRequest => ({
  protocol: "HTTP",
  address: HOST,
  port,
  path: "/healthz",
  timeoutMs: 1000,
  readsWeight: true,
  ...over,
});

const replyOnRequest =
  (text: string, delayMs = 0) =>
  (s: Socket) => {
    s.once("data", () => setTimeout(() => s.end(text), delayMs));
  };

const resources = () =>
  process.getActiveResourcesInfo().filter((r) => r === "TCPSocketWrap" || r === "Timeout" || r === "TLSWrap")
    .length;

describe("probeOnce", () => {
  const servers: Server[] = [];
  const all: { server: Server; sockets: Set<Socket> }[] = [];
  const serve = async (onSocket: (s: Socket) => void) => {
    const s = await rawServer(onSocket);
    servers.push(s.server);
    all.push(s);
    return s.port;
  };
  after(async () => {
    for (const { sockets } of all) for (const s of sockets) s.destroy();
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  it("reads status and weight from a well-formed answer", async () => {
    const ok = await serve(
      replyOnRequest("HTTP/1.1 200 OK\r\nX-Load-Balancing-Endpoint-Weight: 4\r\n\r\n{}"),
    );
    assert.deepEqual(await probeOnce(http(ok)), { ok: true, reason: "HTTP 200", weight: 4 });
    assert.deepEqual(await probeOnce(http(ok, { readsWeight: false })), { ok: true, reason: "HTTP 200" });
    const down = await serve(
      replyOnRequest("HTTP/1.0 503 Service Unavailable\r\nx-load-balancing-endpoint-weight:0\r\n\r\n"),
    );
    assert.deepEqual(await probeOnce(http(down)), { ok: false, reason: "HTTP 503", weight: 0 });
    const redirect = await serve(replyOnRequest("HTTP/1.1 301 Moved\r\nLocation: /x\r\n\r\n"));
    assert.deepEqual(await probeOnce(http(redirect)), { ok: false, reason: "HTTP 301" });
  });

  it("sends a GET for the path with a Host header and Connection: close", async () => {
    let seen = "";
    const port = await serve((s) =>
      s.once("data", (d) => {
        seen = d.toString();
        s.end("HTTP/1.1 200 OK\r\n\r\n");
      }),
    );
    await probeOnce(http(port, { path: "/livez" }));
    assert.match(seen, /^GET \/livez HTTP\/1\.1\r\n/);
    assert.match(seen, new RegExp(`\\r\\nHost: 127\\.0\\.0\\.1:${port}\\r\\n`));
    assert.match(seen, /\r\nConnection: close\r\n\r\n$/);
  });

  it("ignores a weight that is not a plain decimal integer", () => {
    assert.equal(
      parseHead("HTTP/1.1 200 OK\r\nX-Load-Balancing-Endpoint-Weight: -1\r\n", true).weight,
      undefined,
    );
    assert.equal(
      parseHead("HTTP/1.1 200 OK\r\nX-Load-Balancing-Endpoint-Weight: 2.5\r\n", true).weight,
      undefined,
    );
    assert.equal(
      parseHead("HTTP/1.1 200 OK\r\nX-Load-Balancing-Endpoint-Weight: \r\n", true).weight,
      undefined,
    );
    assert.equal(parseHead("HTTP/1.1 200 OK\r\nX-Other: 1\r\n", true).weight, undefined);
  });

  it("refused", async () => {
    const port = await freePort(HOST);
    assert.deepEqual(await probeOnce(http(port)), { ok: false, reason: "connection refused" });
    assert.deepEqual(await probeOnce(http(port, { protocol: "TCP" })), {
      ok: false,
      reason: "connection refused",
    });
  });

  it("hangs: times out on time", async () => {
    const port = await serve(() => {});
    const start = performance.now();
    assert.deepEqual(await probeOnce(http(port, { timeoutMs: 150 })), {
      ok: false,
      reason: "timeout after 150 ms",
    });
    const took = performance.now() - start;
    assert.ok(took >= 140 && took < 600, `took ${took} ms`);
  });

  it("answers slowly: fine within the timeout, a timeout beyond it", async () => {
    const port = await serve(replyOnRequest("HTTP/1.1 200 OK\r\n\r\n", 150));
    assert.equal((await probeOnce(http(port, { timeoutMs: 1000 }))).ok, true);
    assert.deepEqual(await probeOnce(http(port, { timeoutMs: 50 })), {
      ok: false,
      reason: "timeout after 50 ms",
    });
  });

  it("answers garbage, or closes mid-response, or sends an endless head", async () => {
    const garbage = await serve(replyOnRequest("SSH-2.0-OpenSSH_9.6\r\n\r\n"));
    assert.deepEqual(await probeOnce(http(garbage)), { ok: false, reason: "not an HTTP response" });
    const early = await serve((s) => s.write("SSH-2.0-")); // garbage without a blank line: caught early
    assert.deepEqual(await probeOnce(http(early)), { ok: false, reason: "not an HTTP response" });
    const cut = await serve(replyOnRequest("HTTP/1.1 200 OK\r\nContent-Ty"));
    assert.deepEqual(await probeOnce(http(cut)), {
      ok: false,
      reason: "connection closed before the response head ended",
    });
    const reset = await serve((s) => s.once("data", () => s.resetAndDestroy()));
    assert.equal((await probeOnce(http(reset))).ok, false);
    const endless = await serve((s) =>
      s.once("data", () => {
        s.write("HTTP/1.1 200 OK\r\n");
        const line = `X-Filler: ${"a".repeat(1000)}\r\n`;
        const pump = () => {
          while (!s.destroyed && s.write(line)) {}
          if (!s.destroyed) s.once("drain", pump);
        };
        pump();
      }),
    );
    assert.deepEqual(await probeOnce(http(endless)), { ok: false, reason: "response head too large" });
    assert.ok(MAX_HEAD_BYTES <= 65536);
  });

  it("TCP: a completed connect is success", async () => {
    const port = await serve(() => {});
    assert.deepEqual(await probeOnce(http(port, { protocol: "TCP", path: null })), {
      ok: true,
      reason: "TCP connect",
    });
  });

  it("HTTPS: probes over TLS without verifying the certificate", async (t) => {
    const dir = mkdtempSync(join(tmpdir(), "passlb-tls-"));
    t.after(() => rmSync(dir, { recursive: true, force: true }));
    try {
      execFileSync(
        "openssl",
        [
          "req",
          "-x509",
          "-newkey",
          "ec",
          "-pkeyopt",
          "ec_paramgen_curve:P-256",
          "-nodes",
          "-days",
          "1",
        ].concat([
          "-subj",
          "/CN=passlb-test",
          "-keyout",
          join(dir, "key.pem"),
          "-out",
          join(dir, "cert.pem"),
        ]),
        { stdio: "ignore" },
      );
    } catch {
      t.skip("openssl is not available to make a throwaway certificate");
      return;
    }
    const server = createHttpsServer(
      { key: readFileSync(join(dir, "key.pem")), cert: readFileSync(join(dir, "cert.pem")) },
      (_req, res) => {
        res.writeHead(200, { "X-Load-Balancing-Endpoint-Weight": "7" });
        res.end("ok");
      },
    );
    await new Promise<void>((r) => server.listen({ host: HOST, port: 0 }, r));
    t.after(() => {
      server.closeAllConnections();
      server.close();
    });
    const port = (server.address() as { port: number }).port;
    assert.deepEqual(await probeOnce(http(port, { protocol: "HTTPS" })), {
      ok: true,
      reason: "HTTP 200",
      weight: 7,
    });
  });

  it("reads the weight of passlb's own per-Service health server", async (t) => {
    const servers = new HealthServers({
      clock: new FakeClock(),
      healthz: { host: HOST, port: 0 },
      serviceHost: HOST,
      healthTimeoutMs: 60_000,
      onFinding: () => {},
    });
    t.after(() => servers.close());
    const port = await freePort(HOST);
    const svc = { namespace: "shop", name: "web", port, localEndpoints: 3 };
    await servers.update({
      nodeEligible: true,
      ineligibleReason: undefined,
      families: ["IPv4"],
      services: [svc],
      findings: [],
    });
    assert.deepEqual(await probeOnce(http(port)), { ok: true, reason: "HTTP 200", weight: 3 });
    await servers.update({
      nodeEligible: true,
      ineligibleReason: undefined,
      families: ["IPv4"],
      services: [{ ...svc, localEndpoints: 0 }],
      findings: [],
    });
    assert.deepEqual(await probeOnce(http(port)), { ok: false, reason: "HTTP 503", weight: 0 });
    const healthz = servers.addresses().healthz?.port ?? 0;
    assert.equal((await probeOnce(http(healthz))).ok, true);
  });

  it("leaves no socket or timer behind, whatever the target did", async () => {
    const targets = [
      await serve((s) => s.resume()), // reads the request, never answers
      await serve(replyOnRequest("garbage\r\n\r\n")),
      await serve(replyOnRequest("HTTP/1.1 200 OK\r\nX-")), // closes mid-head
      await serve((s) => s.once("data", () => s.write("HTTP/1.1 200 OK\r\n\r\n"))), // answers, keeps open
      await freePort(HOST), // refuses
    ];
    const before = resources();
    await Promise.all(targets.map((port) => probeOnce(http(port, { timeoutMs: 100 }))));
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(resources() <= before, "client sockets and probe timers are gone");
    const serverSides = all.slice(-4).map((s) => s.sockets.size);
    assert.deepEqual(serverSides, [0, 0, 0, 0], "every server saw its connection closed by the prober");
  });
});
