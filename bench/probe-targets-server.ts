// Child process of prober.bench.ts: N tiny kube-proxy-like health servers, one per
// loopback address (127.10.a.b:10256), in their own process so their CPU is not the
// prober's. Answers each request (one per read: probes send one small request at a time)
// with a fixed 200, a weight header and a Content-Length, keeping the connection open as
// Go's net/http does; `--close` answers with Connection: close and closes instead. Over
// IPC the parent can make one target fail: `503` (answers 503), `hang` (reads, never
// answers) or `refuse` (closes the listener and its connections, as a dead process does).
// Prints nothing; reports readiness and acks over IPC.
import { createServer, type Server, type Socket } from "node:net";
import { benchAddress } from "./bench-addresses.ts";

const count = Number(process.argv[2] ?? 5000);
const port = Number(process.argv[3] ?? 10256);
const closeEach = process.argv.includes("--close");
const tail = closeEach ? "Connection: close\r\n\r\n{}" : "\r\n{}";
const OK =
  "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Content-Type-Options: nosniff\r\n" +
  `X-Load-Balancing-Endpoint-Weight: 1\r\nContent-Length: 2\r\n${tail}`;
const DOWN =
  "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n" +
  `X-Load-Balancing-Endpoint-Weight: 0\r\nContent-Length: 2\r\n${tail}`;

type Mode = "ok" | "503" | "hang" | "refuse";
const modes: Mode[] = new Array(count).fill("ok");
const servers: Server[] = [];
const sockets: Set<Socket>[] = [];

function serve(i: number): Promise<void> {
  const open = new Set<Socket>();
  const server = createServer({ noDelay: true }, (s: Socket) => {
    open.add(s);
    s.on("close", () => open.delete(s));
    s.on("error", () => {});
    s.on("data", () => {
      const mode = modes[i];
      if (mode === "hang") return;
      const answer = mode === "503" ? DOWN : OK;
      if (closeEach) s.end(answer);
      else s.write(answer);
    });
  });
  servers[i] = server;
  sockets[i] = open;
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: benchAddress(i), port, backlog: 511 }, () => resolve());
  });
}

if (process.send) {
  for (let i = 0; i < count; i += 500)
    await Promise.all(Array.from({ length: Math.min(500, count - i) }, (_, k) => serve(i + k)));
  process.on("message", (m: { index: number; mode: Mode } | { cpu: true }) => {
    if ("cpu" in m) {
      const c = process.cpuUsage();
      return void process.send?.({ cpu: c.user + c.system });
    }
    modes[m.index] = m.mode;
    if (m.mode === "refuse") {
      servers[m.index]?.close();
      for (const s of sockets[m.index] ?? []) s.destroy();
    }
    process.send?.({ ack: m.index });
  });
  process.on("disconnect", () => process.exit(0));
  process.send({ ready: count });
}
