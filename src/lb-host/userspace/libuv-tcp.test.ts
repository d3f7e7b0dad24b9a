/**
 * The libuv TCP plumbing on its own, on loopback (127.0.8.0/24): it runs only when asked for
 * as experimental-libuv (node:net is the LB's default); it is refused when the
 * binding lacks anything it uses; a target that never answers fails the splice after the
 * deadline and leaves the client to the caller; a client that goes away while its target
 * is being reached gets done(false); nothing stays open, also after a reset requested while
 * a FIN waits behind queued bytes. The LB-level behaviour (half-close, backpressure,
 * PROXY, tallies, integrity) is test/userspace/lb-plumbing-suite.ts.
 */
import assert from "node:assert/strict";
import { connect, createServer, type Socket } from "node:net";
import { after, test } from "node:test";
import { stuckListener } from "../../../test/support/stuck-listener.ts";
import { libuvTcpPlumbing } from "./libuv-tcp.ts";
import {
  type ClientConnection,
  describeTcpPlumbing,
  parseTcpPlumbing,
  type TcpPlumbing,
} from "./tcp-plumbing.ts";
import { UserspaceLb } from "./userspace-lb.ts";

const cleanup: Array<() => void> = [];
after(() => {
  for (const c of cleanup.reverse()) c();
});

const realBinding = (name: string) =>
  (process as unknown as { binding: (n: string) => unknown }).binding(name);

test("refused, not half-used, when the binding lacks a constructor, a method or a constant", () => {
  assert.ok(libuvTcpPlumbing(realBinding), "this Node exposes everything it needs");
  assert.equal(
    libuvTcpPlumbing(() => ({})),
    undefined,
  );
  assert.equal(
    libuvTcpPlumbing(() => {
      throw new Error("No such module");
    }),
    undefined,
  );
  const withoutReset = (name: string) => {
    const b = realBinding(name) as Record<string, unknown>;
    if (name !== "tcp_wrap") return b;
    class TCP extends (b.TCP as new (t: number) => object) {}
    Object.defineProperty(TCP.prototype, "reset", { value: undefined });
    return { ...b, TCP };
  };
  assert.equal(libuvTcpPlumbing(withoutReset), undefined);
});

test("the libuv plumbing runs only when asked for by its experimental name; a refused one says why", () => {
  assert.equal(parseTcpPlumbing("net"), "net");
  assert.equal(parseTcpPlumbing("experimental-libuv"), "experimental-libuv");
  assert.equal(parseTcpPlumbing("libuv"), undefined, "the old name is not an alias");
  assert.equal(parseTcpPlumbing("auto"), undefined);
  assert.equal(describeTcpPlumbing("net"), "TCP on node:net sockets");
  assert.match(describeTcpPlumbing("libuv", "experimental-libuv"), /libuv handles \(experimental/);
  // asked for, but this Node lacks the handles: the start-up line names the fallback
  assert.match(describeTcpPlumbing("net", "experimental-libuv"), /node:net.*does not expose/);
});

test("the LB's default TCP plumbing is node:net; the experimental one runs when named", async () => {
  const byDefault = new UserspaceLb({ seed: 1 });
  const asked = new UserspaceLb({ seed: 1, tcp: "experimental-libuv" });
  assert.equal(byDefault.tcpPlumbing, "net");
  assert.equal(asked.tcpPlumbing, "libuv", "this Node exposes the handles (see the first test)");
  await Promise.all([byDefault.close(), asked.close()]);
});

/** a plumbing listening on `host`, and one client connected to it: its accepted side */
async function accepted(host: string): Promise<{ tcp: TcpPlumbing; conn: ClientConnection; client: Socket }> {
  const tcp = libuvTcpPlumbing(realBinding)!;
  let got: (c: ClientConnection) => void = () => {};
  const conn = new Promise<ClientConnection>((r) => (got = r));
  const port = 18620;
  const listener = await tcp.listen({ host, port, closing: () => false, onConnection: (c) => got(c) });
  const client = connect({ host, port }).on("error", () => {});
  cleanup.push(() => {
    client.destroy();
    listener.close(() => {});
  });
  return { tcp, conn: await conn, client };
}

test("a target that never answers: done(false) after the deadline, the client untouched, then closed on request", async () => {
  const stuck = await stuckListener("127.0.8.12");
  cleanup.push(stuck.close);
  const { tcp, conn } = await accepted("127.0.8.11");
  assert.equal(conn.remoteAddress, "127.0.0.1");
  const t0 = Date.now();
  const results: boolean[] = [];
  await new Promise<void>((resolve) =>
    tcp.splice(conn, { host: "127.0.8.12", port: stuck.port }, { connectTimeoutMs: 300 }, (ok) => {
      results.push(ok);
      resolve();
    }),
  );
  const took = Date.now() - t0;
  assert.deepEqual(results, [false]);
  assert.ok(took >= 290 && took < 1500, `gave up after ${took} ms`);
  assert.equal(conn.destroyed, false, "the client is the caller's to retry or reset");
  await new Promise((r) => setTimeout(r, 100));
  assert.equal(tcp.open, 1, "the abandoned target handle is closed; the client's is open");
  conn.resetAndDestroy();
  await tcp.destroyAll();
  assert.equal(tcp.open, 0);
  assert.deepEqual(results, [false], "done is called once");
});

test("a client destroyed while its target is being reached: done(false), both handles closed", async () => {
  const stuck = await stuckListener("127.0.8.14");
  cleanup.push(stuck.close);
  const { tcp, conn, client } = await accepted("127.0.8.13");
  const result = new Promise<boolean>((r) =>
    tcp.splice(conn, { host: "127.0.8.14", port: stuck.port }, { connectTimeoutMs: 5000 }, r),
  );
  conn.destroy();
  assert.equal(await result, false);
  assert.equal(conn.destroyed, true);
  await tcp.destroyAll();
  assert.equal(tcp.open, 0);
  await new Promise<void>((r) => (client.closed ? r() : client.once("close", () => r())));
});

test("joined: bytes flow both ways and are tallied; both FINs close both handles", async () => {
  const echo = createServer({ allowHalfOpen: true }, (s) => {
    s.on("data", (d) => s.write(d));
    s.on("end", () => s.end("!"));
  });
  await new Promise<void>((r) => echo.listen({ host: "127.0.8.16", port: 0 }, r));
  cleanup.push(() => echo.close());
  const { tcp, conn, client } = await accepted("127.0.8.15");
  const fromClient = { bytes: 0 };
  const fromTarget = { bytes: 0 };
  const ok = await new Promise<boolean>((r) =>
    tcp.splice(
      conn,
      { host: "127.0.8.16", port: (echo.address() as { port: number }).port },
      { connectTimeoutMs: 1000, fromClient, fromTarget, header: Buffer.from("H:") },
      r,
    ),
  );
  assert.equal(ok, true);
  let got = "";
  client.setEncoding("utf8");
  client.on("data", (d: string) => (got += d));
  const ended = new Promise((r) => client.once("end", r));
  client.end("hello");
  await ended;
  assert.equal(got, "H:hello!", "the header goes first; the FIN passes on and the answer comes back");
  for (let i = 0; i < 50 && tcp.open > 0; i++) await new Promise((r) => setTimeout(r, 10));
  assert.equal(tcp.open, 0, "both handles closed once both FINs passed");
  assert.deepEqual([fromClient.bytes, fromTarget.bytes], [5, 8]);
});

test("resetAndDestroy while a FIN waits behind bytes queued to the client: both handles still close", async () => {
  // The node sends `size` bytes and its FIN to a client that reads nothing. A first
  // connection with far too much to fit measures how much the kernel takes on the way to the
  // client (the proxy then holds 64–128 KiB queued and stops reading the node); the second
  // sends a little less than that plus 64 KiB, so the proxy reads the node's FIN while a few
  // KiB are still queued to the client: the FIN waits behind them (a pending shutdown).
  const sizes = [64 * 1024 * 1024];
  const node = createServer((s) => {
    s.on("error", () => {});
    s.end(Buffer.alloc(sizes.shift() ?? 0));
  });
  await new Promise<void>((r) => node.listen({ host: "127.0.8.18", port: 0 }, r));
  cleanup.push(() => node.close());
  const target = { host: "127.0.8.18", port: (node.address() as { port: number }).port };
  const { tcp, conn, client } = await accepted("127.0.8.17");
  client.pause();
  const first = { bytes: 0 };
  assert.equal(
    await new Promise((r) => tcp.splice(conn, target, { connectTimeoutMs: 1000, fromTarget: first }, r)),
    true,
  );
  await new Promise((r) => setTimeout(r, 300));
  conn.destroy();
  sizes.push(first.bytes - 63 * 1024);

  const second = await accepted("127.0.8.19");
  second.client.pause();
  const fromTarget = { bytes: 0 };
  assert.equal(
    await new Promise((r) =>
      second.tcp.splice(second.conn, target, { connectTimeoutMs: 1000, fromTarget }, r),
    ),
    true,
  );
  await new Promise((r) => setTimeout(r, 300));
  assert.equal(fromTarget.bytes, first.bytes - 63 * 1024, "the node's bytes and FIN were all read");
  second.conn.resetAndDestroy();
  const closed = await Promise.race([
    second.tcp.destroyAll().then(() => true),
    new Promise((r) => setTimeout(() => r(false), 2000)),
  ]);
  assert.equal(closed, true, `destroyAll resolved (open: ${second.tcp.open})`);
  assert.equal(second.tcp.open, 0);
  await tcp.destroyAll();
});
