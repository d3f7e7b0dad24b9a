/**
 * Hostile input to the health prober (issue 16 §3): a real loopback server plays generated
 * answers (test/prober-fuzz.ts) — malformed status lines, garbage and huge headers, broken
 * chunked bodies, endless bodies, slow trickles, early closes and resets, TLS bytes on a
 * plain port, silence — to passlb's real probes, `probeOnce` and the kept-alive
 * `ProbeConnections` (two probes in a row on one connection). Per case: no exception, the
 * probe ends within its timeout + 250 ms, and the verdict is the oracle's (healthy only for
 * a 200 head in time, docs/health.md). At the end no socket is left on either side.
 * 300 cases with a fixed seed (more, with figures: bench/prober-fuzz.bench.ts); plus the
 * regression test of the bug the fuzzing found.
 */
import assert from "node:assert/strict";
import { createServer, type Socket } from "node:net";
import { test } from "node:test";
import fc from "fast-check";
import { ProbeConnections } from "../src/health/probe-connections.ts";
import { MAX_HEAD_BYTES, probeOnce } from "../src/health/probe-once.ts";
import { AnswerServer, answerArb, expectation, probeCase } from "./prober-fuzz.ts";

const RUNS = 300;
const TIMEOUT_MS = 300;
const SLACK_MS = 250;

const sockets = () =>
  process.getActiveResourcesInfo().filter((r) => r === "TCPSocketWrap" || r === "TLSWrap").length;

test("fuzz: 300 generated answers to the prober, no crash, no hang, the documented verdict", {
  timeout: 300_000,
}, async (t) => {
  const before = sockets();
  const server = new AnswerServer();
  await server.start();
  t.after(() => server.close());
  const conns = new ProbeConnections({ reuse: true });
  const families: Record<string, number> = {};
  const verdicts = { healthy: 0, unhealthy: 0, either: 0 };
  let slowest = 0;
  let i = 0;
  await fc.assert(
    fc.asyncProperty(answerArb(TIMEOUT_MS), async (a) => {
      families[a.family] = (families[a.family] ?? 0) + 1;
      const want = expectation(a, TIMEOUT_MS);
      verdicts[want.verdict]++;
      const results = await probeCase(server, conns, a, `k${i++}`, TIMEOUT_MS);
      server.cut();
      for (const r of results) {
        slowest = Math.max(slowest, r.ms - TIMEOUT_MS);
        assert.ok(r.ms <= TIMEOUT_MS + SLACK_MS, `${r.via}: ${r.ms.toFixed(0)} ms (${r.reason})`);
        if (want.verdict !== "either")
          assert.equal(
            r.ok ? "healthy" : "unhealthy",
            want.verdict,
            `${r.via}: ${r.reason}; expected ${want.verdict} (${want.why})`,
          );
      }
    }),
    { numRuns: RUNS, seed: 16, endOnFailure: true },
  );
  conns.close();
  assert.equal(conns.open, 0);
  // every connection gone on both sides (the server's close events may lag a little)
  for (let w = 0; w < 50 && (server.open > 0 || sockets() > before + 1); w++)
    await new Promise((r) => setTimeout(r, 20));
  assert.equal(server.open, 0, "connections left open on the server's side");
  assert.ok(
    sockets() <= before + 1,
    `sockets left in the process: ${sockets()} (before: ${before}, +1 listener)`,
  );
  t.diagnostic(
    `${RUNS} answers (${JSON.stringify(families)}), oracle ${JSON.stringify(verdicts)}; latest end ${slowest.toFixed(0)} ms past the ${TIMEOUT_MS} ms timeout`,
  );
  assert.ok(
    verdicts.healthy > RUNS / 20,
    `too few healthy cases (${verdicts.healthy}): the generator is off`,
  );
});

test("a head longer than MAX_HEAD_BYTES is unhealthy also when it arrives in one read", async (t) => {
  // found by the fuzzer: a 200 head of 20 KB arriving in one segment was parsed (healthy),
  // the same bytes in two segments were "response head too large": the verdict depended on
  // how TCP cut the stream
  const head = `HTTP/1.1 200 OK\r\nX-Huge: ${"h".repeat(MAX_HEAD_BYTES * 2)}\r\nContent-Length: 0\r\n\r\n`;
  const server = createServer((s: Socket) => {
    s.on("error", () => {});
    s.once("data", () => s.write(head));
  });
  await new Promise<void>((r) => server.listen({ host: "127.0.0.1", port: 0 }, r));
  t.after(() => new Promise((r) => server.close(r)));
  const port = (server.address() as { port: number }).port;
  const req = {
    protocol: "HTTP",
    address: "127.0.0.1",
    port,
    path: "/",
    timeoutMs: 1000,
    readsWeight: false,
  } as const;
  assert.deepEqual(await probeOnce(req), { ok: false, reason: "response head too large" });
  const conns = new ProbeConnections({ reuse: true });
  t.after(() => conns.close());
  assert.deepEqual(await conns.probe({ ...req, key: "k" }), { ok: false, reason: "response head too large" });
  assert.equal(conns.open, 0, "the connection of a too-large head is not kept");
  // just under the bound is still read
  const fits = `HTTP/1.1 200 OK\r\nX-Fits: ${"f".repeat(MAX_HEAD_BYTES - 40)}\r\n\r\n`;
  assert.ok(fits.length <= MAX_HEAD_BYTES);
  server.removeAllListeners("connection");
  server.on("connection", (s: Socket) => {
    s.on("error", () => {});
    s.once("data", () => s.end(fits));
  });
  assert.deepEqual(await probeOnce(req), { ok: true, reason: "HTTP 200" });
});
