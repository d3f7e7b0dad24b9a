/**
 * The lab's pod: a small TCP and UDP echo server. Every TCP connection is greeted with
 * one line, `pod=<name> node=<node> client=<ip:port>` (the address the pod saw, so tests
 * can check whether the client address survived), then every byte received is echoed
 * back, so long-lived connections can be exercised. Every UDP datagram is answered with
 * the same line, except one that starts with `ECHO`, which comes back as it is (the lab
 * client's `udp-size` mode: large datagrams both ways). Listens on all addresses of the
 * pod's namespace, both families.
 *
 *   node --import tsx src/lab/echo-server.ts --name web-1 --node node-a1 --tcp 8080,9000 --udp 5353
 *
 * A lab process, not part of passlb's data path; it exits on SIGTERM or SIGINT.
 */
import { createSocket } from "node:dgram";
import { createServer, type Server } from "node:net";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: {
    name: { type: "string", default: "pod" },
    node: { type: "string", default: "" },
    tcp: { type: "string", default: "" },
    udp: { type: "string", default: "" },
  },
});

const ports = (list: string) =>
  list
    .split(",")
    .filter((p) => p !== "")
    .map(Number);
const hostPort = (address: string, port: number) => {
  const plain = address.startsWith("::ffff:") ? address.slice(7) : address;
  return plain.includes(":") ? `[${plain}]:${port}` : `${plain}:${port}`;
};
const greeting = (address: string | undefined, port: number | undefined) =>
  `pod=${values.name} node=${values.node} client=${hostPort(address ?? "?", port ?? 0)}\n`;

const servers: Server[] = [];
const listening: Promise<void>[] = [];
const sockets: ReturnType<typeof createSocket>[] = [];
for (const port of ports(values.tcp)) {
  const server = createServer((conn) => {
    conn.setNoDelay(true);
    conn.on("error", () => {});
    conn.write(greeting(conn.remoteAddress, conn.remotePort));
    conn.pipe(conn);
  });
  servers.push(server);
  listening.push(
    new Promise((resolve) => server.listen({ port, host: "::", backlog: 4096 }, () => resolve())),
  );
}
for (const port of ports(values.udp)) {
  const socket = createSocket({ type: "udp6" });
  socket.on("message", (msg, from) =>
    socket.send(
      msg.subarray(0, 4).toString("latin1") === "ECHO" ? msg : greeting(from.address, from.port),
      from.port,
      from.address,
    ),
  );
  socket.on("error", (e) => process.stderr.write(`echo-server: udp ${port}: ${e.message}\n`));
  sockets.push(socket);
  listening.push(new Promise((resolve) => socket.bind(port, "::", () => resolve())));
}

const stop = () => {
  for (const s of servers) s.close();
  for (const s of sockets) s.close();
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
await Promise.all(listening);
// the lab waits for this line before it reports the pod up
process.stderr.write(
  `echo-server ${values.name}: ready, tcp ${values.tcp || "-"} udp ${values.udp || "-"}\n`,
);
