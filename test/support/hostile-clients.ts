/**
 * A child process for test/health/hostile-clients.test.ts: hostile HTTP clients against
 * loopback ports, bounded in count (--count connections, --bytes per connection) and time
 * (connections opened within 30 s, then held --duration ms; then every socket is destroyed
 * and the report printed).
 *
 *   idle   connect, send nothing
 *   slow   slowloris: a request line and headers, one byte every --interval ms, never ending
 *   big-headers  a request whose headers run to --bytes, sent as fast as the socket takes it
 *   big-body     a POST announcing 1 GiB, then up to --bytes of body as fast as it goes
 *
 * Connections are opened round-robin over --ports, at most 256 handshakes in flight (a
 * listen backlog is 511). Prints `{"ready":…}` once every connection is open or failed,
 * and at the end one JSON report: how many were open at the end, how many the server
 * closed (and how long after opening, at most), how many bytes were sent, errors by code.
 * Only 127.0.0.1.
 */
import { connect, type Socket } from "node:net";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    mode: { type: "string", default: "idle" },
    ports: { type: "string" },
    count: { type: "string", default: "100" },
    duration: { type: "string", default: "5000" },
    interval: { type: "string", default: "500" },
    bytes: { type: "string", default: "1048576" },
  },
});
const ports = (values.ports ?? "").split(",").map(Number);
if (ports.length === 0 || ports.some((p) => !(p > 0 && p < 65536))) throw new Error("--ports p1,p2,…");
const count = Math.min(Number(values.count), 20_000);
const duration = Math.min(Number(values.duration), 60_000);
const interval = Math.max(10, Number(values.interval));
const maxBytes = Math.min(Number(values.bytes), 64 * 1024 * 1024);
const mode = values.mode ?? "idle";
if (!["idle", "slow", "big-headers", "big-body"].includes(mode)) throw new Error(`--mode ${mode}`);

const sockets = new Set<Socket>();
const errors: Record<string, number> = {};
let opened = 0;
let closedByServer = 0;
let longestLife = 0;
let bytesSent = 0;
let ending = false;

function feed(sock: Socket): void {
  if (mode === "slow") {
    const text = "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    let i = 0;
    const timer = setInterval(() => {
      if (sock.destroyed) return clearInterval(timer);
      sock.write(i < text.length ? text[i++]! : "a");
      bytesSent++;
    }, interval);
    sock.once("close", () => clearInterval(timer));
    return;
  }
  if (mode === "idle") return;
  const head =
    mode === "big-body"
      ? "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1073741824\r\n\r\n"
      : "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  const chunk = Buffer.from(mode === "big-body" ? "x".repeat(16384) : `X-Big: ${"y".repeat(16370)}\r\n`);
  let sent = 0;
  sock.write(head);
  const pump = () => {
    while (!sock.destroyed && sent < maxBytes) {
      sent += chunk.length;
      bytesSent += chunk.length;
      if (!sock.write(chunk)) return void sock.once("drain", pump);
    }
  };
  pump();
}

function open(port: number): Promise<void> {
  return new Promise((resolve) => {
    const sock = connect({ host: "127.0.0.1", port });
    const started = Date.now();
    let up = false;
    sock.once("connect", () => {
      up = true;
      opened++;
      sockets.add(sock);
      feed(sock);
      resolve();
    });
    sock.on("data", () => {});
    sock.on("error", (e: NodeJS.ErrnoException) => {
      errors[e.code ?? "ERROR"] = (errors[e.code ?? "ERROR"] ?? 0) + 1;
    });
    sock.once("close", () => {
      sockets.delete(sock);
      if (!up) return resolve();
      if (!ending) {
        closedByServer++;
        longestLife = Math.max(longestLife, Date.now() - started);
      }
    });
  });
}

const OPEN_MS = 30_000;
const started = Date.now();
let next = 0;
await Promise.all(
  Array.from({ length: Math.min(256, count) }, async () => {
    while (next < count && Date.now() - started < OPEN_MS) await open(ports[next++ % ports.length]!);
  }),
);
process.stdout.write(`${JSON.stringify({ ready: opened, open: sockets.size, ms: Date.now() - started })}\n`);
await new Promise((r) => setTimeout(r, duration));
const openAtEnd = sockets.size;
ending = true;
for (const s of sockets) s.destroy();
process.stdout.write(
  `${JSON.stringify({ mode, count, opened, openAtEnd, closedByServer, longestLifeMs: longestLife, bytesWritten: bytesSent, errors })}\n`,
);
process.exit(0);
