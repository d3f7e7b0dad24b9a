/**
 * spliceTcp on its own, on loopback (127.0.8.0/24): the connect deadline (one shared sweep,
 * gone once nothing is pending), the byte tallies, and `done` called exactly once.
 */
import assert from "node:assert/strict";
import { fork } from "node:child_process";
import { connect, createServer, type Server, type Socket } from "node:net";
import { after, test } from "node:test";
import { spliceTcp } from "./tcp-proxy.ts";

const cleanup: Array<() => void> = [];
after(() => {
  for (const c of cleanup.reverse()) c();
});

/** a client socket accepted by a throwaway listener: what a proxy would splice */
async function acceptedPair(host: string): Promise<{ accepted: Socket; client: Socket }> {
  const srv: Server = createServer({ allowHalfOpen: true });
  await new Promise<void>((r) => srv.listen({ host, port: 0 }, r));
  const port = (srv.address() as { port: number }).port;
  const accepted = new Promise<Socket>((r) => srv.once("connection", r));
  const client = connect({ host, port, allowHalfOpen: true });
  client.on("error", () => {});
  const a = await accepted;
  a.on("error", () => {});
  cleanup.push(() => {
    client.destroy();
    a.destroy();
    srv.close();
  });
  return { accepted: a, client };
}

test("a target that never accepts: done(false) after the deadline, client untouched, nothing left pending", async () => {
  // a listener whose process never runs its event loop: its two-slot accept queue fills and
  // further connects hang in SYN retries — a dead backend, without root
  const stuck = fork(
    "-e",
    [
      [
        `const s = require("node:net").createServer();`,
        `s.listen({ host: "127.0.8.2", port: 0, backlog: 1 }, () => {`,
        `  process.send(s.address().port);`,
        `  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 10000);`,
        `});`,
      ].join("\n"),
    ],
    { execArgv: [], stdio: ["ignore", "ignore", "ignore", "ipc"] },
  );
  cleanup.push(() => stuck.kill("SIGKILL"));
  const stuckPort = await new Promise<number>((r) => stuck.once("message", (m) => r(Number(m))));
  const fillers = [0, 1, 2, 3, 4].map(() =>
    connect({ host: "127.0.8.2", port: stuckPort }).on("error", () => {}),
  );
  cleanup.push(() => {
    for (const f of fillers) f.destroy();
  });
  await new Promise((r) => setTimeout(r, 100));

  const { accepted } = await acceptedPair("127.0.8.1");
  const sockets = new Set<Socket>();
  const t0 = Date.now();
  const results: boolean[] = [];
  const timers = () => process.getActiveResourcesInfo().filter((r) => r === "Timeout").length;
  const before = timers();
  const settled = new Promise<void>((resolve) =>
    spliceTcp(accepted, { host: "127.0.8.2", port: stuckPort }, { connectTimeoutMs: 300 }, sockets, (ok) => {
      results.push(ok);
      resolve();
    }),
  );
  assert.equal(timers(), before + 1, "one sweep timer while the connect is pending");
  await settled;
  const took = Date.now() - t0;
  assert.deepEqual(results, [false]);
  assert.ok(took >= 290 && took < 1500, `gave up after ${took} ms`);
  assert.equal(accepted.destroyed, false, "the client is the caller's to retry or reset");
  await new Promise((r) => setTimeout(r, 150));
  assert.equal(sockets.size, 0, "the abandoned upstream socket is closed and untracked");
  assert.deepEqual(results, [false], "done is called once");
  assert.equal(timers(), before, "the deadline sweep stops when nothing is pending");
});

test("bytes are tallied per direction; the connection closes on both sides", async () => {
  const echo = createServer({ allowHalfOpen: true }, (s) => {
    s.on("data", (d) => s.write(Buffer.concat([d, d])));
    s.on("end", () => s.end());
  });
  await new Promise<void>((r) => echo.listen({ host: "127.0.8.3", port: 0 }, r));
  const echoPort = (echo.address() as { port: number }).port;
  cleanup.push(() => echo.close());
  const { accepted, client } = await acceptedPair("127.0.8.1");
  const fromClient = { bytes: 0 };
  const fromTarget = { bytes: 0 };
  const sockets = new Set<Socket>();
  const ok = await new Promise<boolean>((r) =>
    spliceTcp(
      accepted,
      { host: "127.0.8.3", port: echoPort },
      { connectTimeoutMs: 1000, fromClient, fromTarget },
      sockets,
      r,
    ),
  );
  assert.equal(ok, true);
  let got = "";
  client.setEncoding("utf8");
  client.on("data", (d: string) => (got += d));
  const ended = new Promise((r) => client.once("end", r));
  client.end("abcde");
  await ended;
  client.end();
  assert.equal(got, "abcdeabcde");
  await new Promise((r) => setTimeout(r, 100));
  assert.deepEqual([fromClient.bytes, fromTarget.bytes], [5, 10]);
  assert.equal(sockets.size, 0, "upstream closed");
  assert.equal(accepted.destroyed, true, "client side closed");
});
