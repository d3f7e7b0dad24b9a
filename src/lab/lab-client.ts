/**
 * The lab's client: makes bounded numbers of connections to a target from inside a
 * client namespace and prints what the echo servers said, as one JSON object on stdout.
 *
 *   count   N connections (TCP) or requests (UDP, each from a new socket, so a new source
 *           port), C at a time: per pod and per node tallies, the client addresses the
 *           pods saw, failures by error code;
 *   stream  one new TCP connection every --interval ms for --duration ms: each one's
 *           start time, pod and outcome (for "stops getting new connections within…");
 *           `started` is the wall-clock start (ms since the epoch), to place a fault;
 *           with --bind0 each socket is bound to port 0 first, as many clients do;
 *   hold    --connections long-lived TCP connections, each sending a line every
 *           --interval ms for --duration ms and checking the echo: which pod each one
 *           was on, whether it failed (reset, an echo 2 s late, a wrong echo) and when
 *           it ended (`at`, wall-clock ms);
 *   udp-pin one UDP socket bound to --source-port, a datagram every --interval ms for
 *           --duration ms (a resolver's or syslog client's fixed 5-tuple): when each answer
 *           came (wall-clock ms, to compare with the test's own clock) and from which pod.
 *   bulk    one TCP connection that sends --bytes bytes and reads them all back (the echo):
 *           that many bytes each way, the pod, the time taken;
 *   udp-size --count datagrams of --size bytes from one socket, one at a time, each echoed
 *           whole by the pod (`ECHO…`): how many came back, and their sizes.
 *   reuse   --count TCP connections, the i-th bound to local port --source-port + i
 *           (SO_REUSEADDR, as libuv sets on every TCP bind): a client behind NAT or a busy
 *           proxy that opens a new connection on a 5-tuple it used moments ago; per port
 *           the pod and node, or the error.
 *
 * A lab process (run with `passlb lab exec CLIENT -- node --import tsx …` or by the e2e
 * tests); every loop is bounded in count and time.
 */
import { createSocket } from "node:dgram";
import { connect, type Socket } from "node:net";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    mode: { type: "string", default: "count" },
    target: { type: "string" },
    proto: { type: "string", default: "tcp" },
    count: { type: "string", default: "100" },
    concurrency: { type: "string", default: "8" },
    timeout: { type: "string", default: "2000" },
    duration: { type: "string", default: "5000" },
    interval: { type: "string", default: "50" },
    connections: { type: "string", default: "4" },
    "source-port": { type: "string", default: "54321" },
    bytes: { type: "string", default: "1048576" },
    size: { type: "string", default: "1400" },
    /** stream: bind each socket to port 0 before connecting (the kernel's bind allocator,
     * which may hand out a port whose last connection to the target is in TIME_WAIT) */
    bind0: { type: "boolean", default: false },
  },
});

const MAX_COUNT = 100_000;
const MAX_DURATION_MS = 120_000;
/** hold: a ping unanswered this long is a stalled connection */
const STALL_MS = 2000;
const timeoutMs = Math.min(Number(values.timeout), 10_000);

function splitTarget(text: string | undefined): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(text ?? "");
  if (!m) throw new Error(`--target ${text}: expected ip:port or [ip6]:port`);
  return { host: m[1] ?? m[2] ?? "", port: Number(m[3]) };
}

interface Greeting {
  readonly pod: string;
  readonly node: string;
  readonly client: string;
}

function parseGreeting(line: string): Greeting | undefined {
  const m = /^pod=(\S+) node=(\S*) client=(\S+)$/.exec(line.trim());
  return m ? { pod: m[1]!, node: m[2]!, client: m[3]! } : undefined;
}

/** One TCP connection: the greeting, then close (from `localPort` when given). */
function tcpOnce(host: string, port: number, localPort?: number): Promise<Greeting> {
  return new Promise((resolve, reject) => {
    const sock = connect({
      host,
      port,
      ...(localPort !== undefined && { localPort, localAddress: host.includes(":") ? "::" : "0.0.0.0" }),
    });
    let buf = "";
    // the timeout is declared after the I/O that has already arrived is read (timers run
    // before the poll phase, setImmediate after it): a client starved of CPU for a moment
    // must not report a connection that did answer as timed out
    const timer = setTimeout(
      () => setImmediate(() => sock.destroy(Object.assign(new Error("timeout"), { code: "ETIMEDOUT" }))),
      timeoutMs,
    );
    sock.setEncoding("utf8");
    sock.on("data", (d: string) => {
      buf += d;
      const nl = buf.indexOf("\n");
      if (nl < 0) return;
      clearTimeout(timer);
      const g = parseGreeting(buf.slice(0, nl));
      sock.destroy();
      if (g) resolve(g);
      else reject(Object.assign(new Error("bad greeting"), { code: "EBADMSG" }));
    });
    sock.on("error", (e) => {
      clearTimeout(timer);
      reject(e);
    });
    sock.on("close", () => {
      clearTimeout(timer);
      reject(Object.assign(new Error("closed"), { code: "ECLOSED" }));
    });
  });
}

/** One UDP request from a fresh socket. */
function udpOnce(host: string, port: number): Promise<Greeting> {
  return new Promise((resolve, reject) => {
    const sock = createSocket(host.includes(":") ? "udp6" : "udp4");
    const done = (f: () => void) => {
      clearTimeout(timer);
      sock.close();
      f();
    };
    const timer = setTimeout(
      () => done(() => reject(Object.assign(new Error("timeout"), { code: "ETIMEDOUT" }))),
      timeoutMs,
    );
    sock.on("message", (msg) => {
      const g = parseGreeting(msg.toString("utf8"));
      done(() => (g ? resolve(g) : reject(Object.assign(new Error("bad"), { code: "EBADMSG" }))));
    });
    sock.on("error", (e) => done(() => reject(e)));
    sock.send("hello\n", port, host);
  });
}

const bump = (m: Record<string, number>, k: string) => {
  m[k] = (m[k] ?? 0) + 1;
};
const code = (e: unknown) => (e as { code?: string }).code ?? "ERROR";
const clientIp = (hostPort: string) => hostPort.replace(/^\[?(.*?)\]?:\d+$/, "$1");

async function count(host: string, port: number): Promise<object> {
  const n = Math.min(Number(values.count), MAX_COUNT);
  const c = Math.max(1, Math.min(Number(values.concurrency), 256));
  const once = values.proto === "udp" ? udpOnce : tcpOnce;
  const byPod: Record<string, number> = {};
  const byNode: Record<string, number> = {};
  const clients: Record<string, number> = {};
  const errors: Record<string, number> = {};
  let ok = 0;
  let next = 0;
  const deadline = Date.now() + MAX_DURATION_MS;
  const worker = async () => {
    while (next < n && Date.now() < deadline) {
      next++;
      try {
        const g = await once(host, port);
        ok++;
        bump(byPod, g.pod);
        bump(byNode, g.node);
        bump(clients, clientIp(g.client));
      } catch (e) {
        bump(errors, code(e));
      }
    }
  };
  const started = Date.now();
  await Promise.all(Array.from({ length: c }, worker));
  return { ok, failed: n - ok, ms: Date.now() - started, byPod, byNode, clients, errors };
}

/** reuse: connection i from local port base + i, C at a time. */
async function reuse(host: string, port: number): Promise<object> {
  const n = Math.min(Number(values.count), 1000);
  const base = Number(values["source-port"]);
  const c = Math.max(1, Math.min(Number(values.concurrency), 64));
  const out: { port: number; ok: boolean; pod?: string; node?: string; error?: string }[] = [];
  let next = 0;
  const worker = async () => {
    while (next < n) {
      const p = base + next++;
      try {
        const g = await tcpOnce(host, port, p);
        out.push({ port: p, ok: true, pod: g.pod, node: g.node });
      } catch (e) {
        out.push({ port: p, ok: false, error: code(e) });
      }
    }
  };
  await Promise.all(Array.from({ length: c }, worker));
  out.sort((a, b) => a.port - b.port);
  return { connections: out };
}

async function stream(host: string, port: number): Promise<object> {
  const duration = Math.min(Number(values.duration), MAX_DURATION_MS);
  const interval = Math.max(1, Number(values.interval));
  const started = Date.now();
  const pending: Promise<object>[] = [];
  while (Date.now() - started < duration) {
    const t = Date.now() - started;
    pending.push(
      tcpOnce(host, port, values.bind0 ? 0 : undefined).then(
        (g) => ({ t, ok: true, pod: g.pod, node: g.node, client: clientIp(g.client) }),
        (e) => ({ t, ok: false, error: code(e) }),
      ),
    );
    await new Promise((r) => setTimeout(r, interval));
  }
  return { started, events: await Promise.all(pending) };
}

async function hold(host: string, port: number): Promise<object> {
  const k = Math.min(Number(values.connections), 256);
  const duration = Math.min(Number(values.duration), MAX_DURATION_MS);
  const interval = Math.max(10, Number(values.interval));
  const one = () =>
    new Promise<object>((resolve) => {
      const sock: Socket = connect({ host, port });
      sock.setEncoding("utf8");
      let buf = "";
      let greeting: Greeting | undefined;
      let pings = 0;
      let expected = "";
      let finished = false;
      let sentAt = 0;
      let ticker: ReturnType<typeof setInterval> | undefined;
      const finish = (error: string | undefined) => {
        if (finished) return;
        finished = true;
        if (ticker) clearInterval(ticker);
        clearTimeout(stopper);
        sock.destroy();
        resolve({
          pod: greeting?.pod,
          node: greeting?.node,
          ok: error === undefined,
          error,
          pings,
          at: Date.now(),
        });
      };
      // At the end, stop pinging and give the last ping its interval to come back.
      let stopping = false;
      const stopper = setTimeout(() => {
        stopping = true;
        if (ticker) clearInterval(ticker);
        if (expected === "") return finish(undefined);
        setTimeout(() => finish(expected === "" ? undefined : "ETIMEDOUT"), STALL_MS);
      }, duration);
      sock.on("data", (d: string) => {
        buf += d;
        if (!greeting) {
          const nl = buf.indexOf("\n");
          if (nl < 0) return;
          greeting = parseGreeting(buf.slice(0, nl));
          buf = buf.slice(nl + 1);
          ticker = setInterval(() => {
            if (expected !== "") {
              // the last ping has no echo yet: a stall once it is 2 s old
              if (Date.now() - sentAt > STALL_MS) finish("ETIMEDOUT");
              return;
            }
            expected = `ping ${++pings}\n`;
            sentAt = Date.now();
            sock.write(expected);
          }, interval);
        }
        if (expected !== "" && buf.length >= expected.length) {
          if (buf.slice(0, expected.length) !== expected) return finish("EBADMSG");
          buf = buf.slice(expected.length);
          expected = "";
          if (stopping) finish(undefined);
        }
      });
      sock.on("error", (e) => finish(code(e)));
      sock.on("close", () => finish("ECLOSED"));
    });
  const started = Date.now();
  return { started, connections: await Promise.all(Array.from({ length: k }, one)) };
}

async function udpPin(host: string, port: number): Promise<object> {
  const duration = Math.min(Number(values.duration), MAX_DURATION_MS);
  const interval = Math.max(10, Number(values.interval));
  const sock = createSocket(host.includes(":") ? "udp6" : "udp4");
  const answers: { at: number; pod: string }[] = [];
  const errors: Record<string, number> = {};
  let sent = 0;
  sock.on("message", (msg) => {
    const g = parseGreeting(msg.toString("utf8"));
    answers.push({ at: Date.now(), pod: g?.pod ?? "?" });
  });
  // ICMP errors (port unreachable) arrive as errors on a connected-less socket only on Linux
  // with IP_RECVERR; they are counted when they do
  sock.on("error", (e) => bump(errors, code(e)));
  await new Promise<void>((resolve, reject) => {
    sock.once("listening", () => resolve());
    sock.once("error", reject);
    sock.bind(Number(values["source-port"]));
  });
  const started = Date.now();
  while (Date.now() - started < duration) {
    sock.send(`ping ${++sent}\n`, port, host);
    await new Promise((r) => setTimeout(r, interval));
  }
  await new Promise((r) => setTimeout(r, 300)); // the last answer's way back
  sock.close();
  return { started, sent, answers, errors };
}

const MAX_BYTES = 256 * 1024 * 1024;

async function bulk(host: string, port: number): Promise<object> {
  const total = Math.min(Number(values.bytes), MAX_BYTES);
  return new Promise((resolve) => {
    const sock = connect({ host, port });
    const started = Date.now();
    let greeting: Greeting | undefined;
    let head = "";
    let received = 0;
    let finished = false;
    const finish = (error: string | undefined) => {
      if (finished) return;
      finished = true;
      clearTimeout(deadline);
      sock.destroy();
      resolve({
        ...greeting,
        ok: error === undefined,
        error,
        sent: total,
        received,
        ms: Date.now() - started,
      });
    };
    const deadline = setTimeout(() => finish("ETIMEDOUT"), MAX_DURATION_MS);
    const chunk = Buffer.alloc(64 * 1024, 0x61);
    let sent = 0;
    const pump = () => {
      while (sent < total) {
        const n = Math.min(chunk.length, total - sent);
        sent += n;
        if (!sock.write(n === chunk.length ? chunk : chunk.subarray(0, n))) return sock.once("drain", pump);
      }
    };
    sock.on("data", (d: Buffer) => {
      if (!greeting) {
        head += d.toString("latin1");
        const nl = head.indexOf("\n");
        if (nl < 0) return;
        greeting = parseGreeting(head.slice(0, nl));
        received += head.length - nl - 1;
        pump();
      } else received += d.length;
      if (received >= total) finish(received === total ? undefined : "EBADMSG");
    });
    sock.on("error", (e) => finish(code(e)));
    sock.on("close", () => finish("ECLOSED"));
  });
}

async function udpSize(host: string, port: number): Promise<object> {
  const n = Math.min(Number(values.count), 10_000);
  const size = Math.max(4, Math.min(Number(values.size), 65_000));
  const sock = createSocket(host.includes(":") ? "udp6" : "udp4");
  const payload = Buffer.alloc(size, 0x62);
  payload.write("ECHO", 0, "latin1");
  const sizes: Record<string, number> = {};
  let received = 0;
  for (let i = 0; i < n; i++) {
    const got = await new Promise<number | undefined>((resolve) => {
      const timer = setTimeout(() => done(undefined), timeoutMs);
      const onMessage = (msg: Buffer) => done(msg.length);
      const done = (v: number | undefined) => {
        clearTimeout(timer);
        sock.off("message", onMessage);
        resolve(v);
      };
      sock.on("message", onMessage);
      sock.send(payload, port, host, (e) => e && done(undefined));
    });
    if (got !== undefined) {
      received++;
      bump(sizes, String(got));
    }
  }
  sock.close();
  return { sent: n, received, size, sizes };
}

const { host, port } = splitTarget(values.target);
const modes: Record<string, (h: string, p: number) => Promise<object>> = {
  count,
  stream,
  hold,
  "udp-pin": udpPin,
  bulk,
  "udp-size": udpSize,
  reuse,
};
const run = modes[values.mode ?? ""];
if (!run)
  throw new Error(`--mode ${values.mode}: expected count, stream, hold, udp-pin, bulk, udp-size or reuse`);
process.stdout.write(`${JSON.stringify(await run(host, port))}\n`);
