/**
 * spliceTcp on its own, on loopback (127.0.8.0/24): the connect deadline (one shared sweep,
 * gone once nothing is pending), the byte tallies, and `done` called exactly once.
 */
import assert from "node:assert/strict";
import { connect, createServer, type Server, type Socket } from "node:net";
import { after, test } from "node:test";
import { stuckListener } from "../../../test/support/stuck-listener.ts";
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
  const stuck = await stuckListener("127.0.8.2");
  cleanup.push(stuck.close);
  const stuckPort = stuck.port;

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

test("a slow client gets every byte of a large answer intact, in order (the target's read buffers are never overwritten while a write holds them)", async () => {
  // Each byte is a function of its position. The target first trickles small pieces one
  // event-loop turn apart while the proxy's writes to the client are held back (corked: they
  // queue in Node, which keeps the read buffer they came from rather than copying it, as it
  // does when the kernel's buffer is full) and the proxy goes on reading small pieces. Then
  // the writes are let go and the target sends 6 MiB in writes of uneven sizes (the big read
  // buffers), which the client reads slowly.
  const trickle = 300;
  const bulk = 6 * 1024 * 1024;
  const patternAt = (i: number) => (i * 7 + (i >>> 11)) & 0xff;
  let total = 0;
  const source = createServer({ allowHalfOpen: true }, (s) => {
    s.on("error", () => {});
    let size = 1;
    let pieces = 0;
    const piece = (n: number) => {
      const chunk = Buffer.allocUnsafe(n);
      for (let k = 0; k < n; k++) chunk[k] = patternAt(total + k);
      total += n;
      return s.write(chunk);
    };
    const pump = () => {
      if (pieces++ < trickle) {
        size = (size * 5 + 3) % 1500;
        piece(size + 1);
        setImmediate(pump);
        return;
      }
      while (total < bulk) {
        size = (size * 5 + 3) % 70001; // 3 B … 70 KB, below and above one read buffer
        if (!piece(Math.min(size + 1, bulk - total))) return void s.once("drain", pump);
      }
      s.end();
    };
    pump();
  });
  await new Promise<void>((r) => source.listen({ host: "127.0.8.4", port: 0 }, r));
  cleanup.push(() => source.close());
  const { accepted, client } = await acceptedPair("127.0.8.1");
  accepted.cork();
  const fromTarget = { bytes: 0 };
  const ok = await new Promise<boolean>((r) =>
    spliceTcp(
      accepted,
      { host: "127.0.8.4", port: (source.address() as { port: number }).port },
      { connectTimeoutMs: 1000, fromTarget },
      undefined,
      r,
    ),
  );
  assert.equal(ok, true);
  setTimeout(() => accepted.uncork(), 300);
  let received = 0;
  let firstBad = -1;
  let chunks = 0;
  await new Promise<void>((resolve, reject) => {
    client.on("data", (d: Buffer) => {
      for (let k = 0; k < d.length && firstBad < 0; k++)
        if (d[k] !== patternAt(received + k)) firstBad = received + k;
      received += d.length;
      if (++chunks % 8 === 0) {
        client.pause();
        setTimeout(() => client.resume(), 1);
      }
    });
    client.once("end", resolve);
    client.once("error", reject);
  });
  assert.equal(firstBad, -1, `byte ${firstBad} differs from what the target sent`);
  assert.equal(received, total);
  assert.equal(fromTarget.bytes, total);
});
