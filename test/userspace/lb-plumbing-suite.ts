/**
 * The userspace LB's socket behaviour on loopback (127.0.6.0/24 for backends and VIPs,
 * 127.0.7.0/24 for clients): half-close (also a bare FIN sent before the node answered),
 * backpressure isolation, a large answer to a slow client and a large upload to a node that
 * reads late arriving intact (also when a garbage collection runs while bytes wait in the
 * proxy's queues), a refusing node, source ranges for TCP, the PROXY v2 header, the
 * traffic tallies (TCP and UDP), and nothing left open after close(). One suite, run on each TCP plumbing (tcp-plumbing.ts) by
 * lb-plumbing-libuv.test.ts and lb-plumbing-net.test.ts, each on its own port.
 */
import assert from "node:assert/strict";
import { createSocket } from "node:dgram";
import { connect, createServer, type Server, type Socket } from "node:net";
import { after, before, test } from "node:test";
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { ALL_UNKNOWN, serviceForwarding } from "../../src/forwarding/forwarding-state.ts";
import { decodeProxyV2 } from "../../src/lb-host/userspace/proxy-protocol.ts";
import { UserspaceLb } from "../../src/lb-host/userspace/userspace-lb.ts";
import { testPlan } from "./plans.ts";

/** the byte at position `i` of a test stream */
const patternAt = (i: number) => (i * 7 + (i >>> 11)) & 0xff;

/** writes `total` pattern bytes in writes of uneven sizes (3 B … 90 KB), then ends */
function sendPattern(s: Socket, total: number): void {
  let sent = 0;
  let size = 1;
  const pump = () => {
    while (sent < total) {
      size = (size * 5 + 3) % 90001;
      const n = Math.min(size + 1, total - sent);
      const chunk = Buffer.allocUnsafe(n);
      for (let k = 0; k < n; k++) chunk[k] = patternAt(sent + k);
      sent += n;
      if (!s.write(chunk)) return void s.once("drain", pump);
    }
    s.end();
  };
  pump();
}

export function lbPlumbingSuite(tcp: "libuv" | "net", PORT: number): void {
  const kind = tcp === "net" ? "net" : "experimental-libuv";
  const STREAM = 12 * 1024 * 1024;
  setFlagsFromString("--expose-gc");
  const gc = runInNewContext("gc") as () => void;
  /** memory freed by a collection, taken again and overwritten (0xee) */
  const reuseFreedMemory = (garbage: Buffer[]) => {
    gc();
    for (let i = 0; i < 400; i++) garbage.push(Buffer.alloc(65536 - (i % 64) * 512, 0xee));
  };
  /** connections to the "sink" node, paused until a test resumes them */
  const sinks: Socket[] = [];
  const servers: Server[] = [];
  const sockets = new Set<Socket>();
  let lb: UserspaceLb;
  let headers: Buffer[] = [];

  function serve(host: string, handler: (s: Socket) => void): Promise<void> {
    const srv = createServer({ allowHalfOpen: true }, (s) => {
      sockets.add(s);
      s.once("close", () => sockets.delete(s));
      s.on("error", () => {});
      handler(s);
    });
    servers.push(srv);
    return new Promise((resolve) => srv.listen({ host, port: PORT }, resolve));
  }

  before(async () => {
    // node "echo": echoes, and on the client's FIN writes "done" and ends
    await serve("127.0.6.2", (s) => {
      s.on("data", (d) => s.write(d));
      s.on("end", () => s.end("done"));
    });
    // node "stuck": accepts and never reads
    await serve("127.0.6.3", (s) => s.pause());
    // node "pp": records the first bytes (a PROXY header) and answers "ok"
    await serve("127.0.6.4", (s) =>
      s.once("data", (d) => {
        headers.push(d);
        s.end("ok");
      }),
    );
    // node "stream": on any byte, sends STREAM bytes (each a function of its position) in
    // writes of uneven sizes, then ends
    await serve("127.0.6.6", (s) => s.once("data", () => sendPattern(s, STREAM)));
    // node "sink": reads nothing until the test resumes it, then checks every byte against
    // patternAt and, on the client's FIN, answers "<bytes> <first bad byte or -1>"
    await serve("127.0.6.7", (s) => {
      s.pause();
      sinks.push(s);
      let received = 0;
      let firstBad = -1;
      s.on("data", (d: Buffer) => {
        for (let k = 0; k < d.length && firstBad < 0; k++)
          if (d[k] !== patternAt(received + k)) firstBad = received + k;
        received += d.length;
      });
      s.on("end", () => s.end(`${received} ${firstBad}`));
    });
    lb = new UserspaceLb({ seed: 7, proxyProtocol: false, connectTimeoutMs: 1000, tcp: kind });
    assert.equal(lb.tcpPlumbing, tcp, "the plumbing under test is the one that runs");
    const fw = (p: ReturnType<typeof testPlan>) => serviceForwarding(p, ALL_UNKNOWN, { seed: 7 });
    const findings = await lb.update([
      fw(testPlan("127.0.6.10", PORT, PORT, { echo: "127.0.6.2" })),
      fw(testPlan("127.0.6.11", PORT, PORT, { stuck: "127.0.6.3" })),
      // "gone" has no listener: every connection it gets is retried on "echo"
      fw(testPlan("127.0.6.12", PORT, PORT, { echo: "127.0.6.2", gone: "127.0.6.9" })),
      fw(testPlan("127.0.6.16", PORT, PORT, { stream: "127.0.6.6" })),
      fw(testPlan("127.0.6.17", PORT, PORT, { sink: "127.0.6.7" })),
      fw(
        testPlan("127.0.6.13", PORT, PORT, { echo: "127.0.6.2" }, (p) => {
          p.sourceRanges = ["127.0.7.0/24"];
        }),
      ),
    ]);
    assert.deepEqual(findings, []);
  });

  after(async () => {
    await lb.close();
    for (const s of sockets) s.destroy();
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  });

  function exchange(host: string, payload: string, localAddress = "127.0.0.1"): Promise<string> {
    return new Promise((resolve, reject) => {
      const s = connect({ host, port: PORT, localAddress, allowHalfOpen: true });
      let got = "";
      const t = setTimeout(() => {
        s.destroy();
        reject(new Error(`timeout; got ${JSON.stringify(got)}`));
      }, 3000);
      s.setEncoding("utf8");
      s.on("data", (d: string) => (got += d));
      s.on("error", (e) => {
        clearTimeout(t);
        reject(e);
      });
      s.on("end", () => {
        clearTimeout(t);
        s.end();
        resolve(got);
      });
      s.on("connect", () => s.end(payload)); // write, then half-close
    });
  }

  test(`${tcp}: half-close: the client's FIN reaches the node, whose answer still comes back`, async () => {
    assert.equal(await exchange("127.0.6.10", "abc"), "abcdone");
    // both FINs passed on: the proxy closes both of its sockets by itself
    for (let i = 0; i < 100 && lb.openSockets > 0; i++) await new Promise((r) => setTimeout(r, 10));
    assert.equal(lb.openSockets, 0);
  });

  test(`${tcp}: a FIN with no data, sent before the node answered, still reaches the node`, async () => {
    // 127.0.6.12 first tries the refusing node for some clients: the client's FIN is in by then
    for (let i = 0; i < 20; i++) assert.equal(await exchange("127.0.6.12", ""), "done");
  });

  test(`${tcp}: a stuck node holds only its own connection; others flow meanwhile`, async () => {
    const stuck = connect({ host: "127.0.6.11", port: PORT });
    stuck.on("error", () => {});
    const big = Buffer.alloc(1 << 20);
    await new Promise<void>((resolve) => stuck.once("connect", resolve));
    let writes = 0;
    while (stuck.write(big) && writes < 64) writes++; // fill until backpressure
    const t0 = Date.now();
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => exchange("127.0.6.10", `x${i}`)));
    assert.ok(answers.every((a, i) => a === `x${i}done`));
    assert.ok(Date.now() - t0 < 2000, `${Date.now() - t0} ms`);
    stuck.destroy();
  });

  test(`${tcp}: a large answer to a slow client arrives intact and in order, also across garbage collections`, async () => {
    const s = connect({ host: "127.0.6.16", port: PORT });
    const garbage: Buffer[] = [];
    let received = 0;
    let firstBad = -1;
    let chunks = 0;
    await new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`timeout after ${received} bytes`)), 10_000);
      s.on("data", (d: Buffer) => {
        for (let k = 0; k < d.length && firstBad < 0; k++)
          if (d[k] !== patternAt(received + k)) firstBad = received + k;
        received += d.length;
        // a slow reader: the proxy's writes to it queue up, its reads of the node pause
        if (++chunks % 16 === 0 && received < STREAM / 2) {
          s.pause();
          setTimeout(() => s.resume(), 2);
        }
      });
      s.once("end", () => {
        clearTimeout(t);
        resolve();
      });
      s.once("error", reject);
      s.write("go");
      // not read at first: what the proxy queues for this client sits in its read buffers,
      // which must survive a collection and the reuse of the memory it frees
      s.pause();
      setTimeout(() => {
        for (let round = 0; round < 3; round++) reuseFreedMemory(garbage);
        s.resume();
      }, 300);
    });
    s.destroy();
    assert.equal(firstBad, -1, `byte ${firstBad} differs from what the node sent`);
    assert.equal(received, STREAM);
  });

  test(`${tcp}: a large upload to a node that reads late arrives intact, also across a garbage collection`, async () => {
    // what the proxy has queued towards the node must stay alive until it is written
    const s = connect({ host: "127.0.6.17", port: PORT, allowHalfOpen: true });
    s.on("error", () => {});
    await new Promise<void>((resolve) => s.once("connect", resolve));
    sendPattern(s, STREAM);
    for (let i = 0; i < 100 && sinks.length === 0; i++) await new Promise((r) => setTimeout(r, 10));
    await new Promise((r) => setTimeout(r, 300)); // every buffer on the way fills up
    // collect, then reuse the freed memory for something else before the node reads
    const garbage: Buffer[] = [];
    for (let round = 0; round < 3; round++) reuseFreedMemory(garbage);
    let answer = "";
    s.setEncoding("utf8");
    s.on("data", (d: string) => (answer += d));
    const ended = new Promise<void>((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`timeout; ${s.bytesWritten} bytes sent`)), 10_000);
      s.once("end", () => {
        clearTimeout(t);
        resolve();
      });
    });
    for (const sink of sinks) sink.resume();
    await ended;
    s.destroy();
    assert.equal(garbage.length, 1200);
    assert.equal(answer, `${STREAM} -1`, "bytes the node got, and the first that differs from what was sent");
  });

  test(`${tcp}: a node that refuses: the connection is retried on another member; the tallies count what reached a node`, async () => {
    for (let i = 0; i < 20; i++) assert.equal(await exchange("127.0.6.12", "r"), "rdone");
    const mine = lb
      .trafficTotals()
      .filter((t) => t.service === "t/127.0.6.12")
      .sort((a, b) => a.node.localeCompare(b.node));
    assert.deepEqual(mine, [
      // 20 here and 20 in the empty-FIN test above (which got "done" each)
      {
        service: "t/127.0.6.12",
        node: "echo",
        connections: 40,
        bytesToBackend: 20,
        bytesToClient: 20 * 5 + 20 * 4,
      },
      { service: "t/127.0.6.12", node: "gone", connections: 0, bytesToBackend: 0, bytesToClient: 0 },
    ]);
  });

  test(`${tcp}: TCP source ranges: outside is reset, inside is served`, async () => {
    await assert.rejects(exchange("127.0.6.13", "no", "127.0.0.1"), /ECONNRESET|EPIPE/);
    assert.equal(await exchange("127.0.6.13", "yes", "127.0.7.5"), "yesdone");
  });

  test(`${tcp}: PROXY v2: the node reads the client address and the VIP first`, async () => {
    const pp = new UserspaceLb({ seed: 7, proxyProtocol: true, tcp: kind });
    try {
      await pp.update([
        serviceForwarding(testPlan("127.0.6.14", PORT, PORT, { pp: "127.0.6.4" }), ALL_UNKNOWN, { seed: 7 }),
      ]);
      headers = [];
      assert.equal(await exchange("127.0.6.14", "hi", "127.0.7.9"), "ok");
      const d = decodeProxyV2(headers[0]!);
      assert.equal(d.kind, "header");
      if (d.kind === "header") {
        assert.equal(d.addresses?.srcAddr, "127.0.7.9");
        assert.equal(d.addresses?.dstAddr, "127.0.6.14");
        assert.equal(d.addresses?.dstPort, PORT);
      }
    } finally {
      await pp.close();
    }
  });

  test(`${tcp}: UDP: flows and datagram bytes are tallied per node`, async () => {
    const udp = new UserspaceLb({ seed: 7, udpIdleMs: 5000, tcp: kind });
    const node = createSocket("udp4");
    node.on("message", (m, r) => node.send(Buffer.concat([m, m]), r.port, r.address));
    await new Promise<void>((r) => node.bind(PORT, "127.0.6.5", r));
    const client = createSocket("udp4");
    try {
      const plan = testPlan("127.0.6.15", PORT, PORT, { u: "127.0.6.5" }, (p) => {
        p.listeners = [{ name: "", protocol: "UDP", port: PORT, nodePort: PORT, targetPort: PORT }];
      });
      assert.deepEqual(await udp.update([serviceForwarding(plan, ALL_UNKNOWN, { seed: 7 })]), []);
      const answers: string[] = [];
      client.on("message", (m) => answers.push(m.toString()));
      for (const text of ["ab", "cde"]) {
        client.send(text, PORT, "127.0.6.15");
        const want = answers.length + 1;
        for (let i = 0; i < 100 && answers.length < want; i++) await new Promise((r) => setTimeout(r, 10));
      }
      assert.deepEqual(answers, ["abab", "cdecde"]);
      assert.deepEqual(udp.trafficTotals(), [
        { service: "t/127.0.6.15", node: "u", connections: 1, bytesToBackend: 5, bytesToClient: 10 },
      ]);
    } finally {
      client.close();
      node.close();
      await udp.close();
    }
  });

  test(`${tcp}: close() leaves no socket and no listener`, async () => {
    const open = connect({ host: "127.0.6.10", port: PORT });
    open.on("error", () => {});
    await new Promise<void>((resolve) => open.once("connect", resolve));
    await new Promise((r) => setTimeout(r, 50));
    assert.ok(lb.openSockets >= 1);
    await lb.close();
    assert.equal(lb.openSockets, 0);
    assert.deepEqual(lb.listening(), []);
    await assert.rejects(exchange("127.0.6.10", "z"), /ECONNREFUSED/);
    open.destroy();
  });
}
