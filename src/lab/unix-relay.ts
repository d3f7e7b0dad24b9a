/**
 * A lab process: relays connections from a Unix socket (a file, reachable from any network
 * namespace) to a TCP address inside the namespace it runs in. `passlb up --dataplane
 * nftables` runs one in the LB host so that the LB's dashboard and `/api/v1/state`, which
 * listen on the LB namespace's loopback, can be read from the caller's namespace without a
 * link into it. Every connection is a plain byte pipe; it exits on SIGTERM or SIGINT.
 *
 *   node --import tsx src/lab/unix-relay.ts --listen /run/passlb-lab/up/lb.sock --to 127.0.0.1:9797
 */
import { rmSync } from "node:fs";
import { connect, createServer, type Socket } from "node:net";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { listen: { type: "string" }, to: { type: "string" } } });
const m = /^(.+):(\d+)$/.exec(values.to ?? "");
if (!values.listen || !m) throw new Error("usage: unix-relay --listen PATH --to HOST:PORT");
const host = m[1]!;
const port = Number(m[2]);
const open = new Set<Socket>();

const server = createServer((inbound) => {
  const outbound = connect({ host, port });
  open.add(inbound);
  open.add(outbound);
  const done = () => {
    inbound.destroy();
    outbound.destroy();
    open.delete(inbound);
    open.delete(outbound);
  };
  inbound.on("error", done).on("close", done);
  outbound.on("error", done).on("close", done);
  inbound.pipe(outbound);
  outbound.pipe(inbound);
});
rmSync(values.listen, { force: true });
server.listen(values.listen, () =>
  process.stderr.write(`unix-relay: ready, ${values.listen} → ${values.to}\n`),
);

const stop = () => {
  for (const s of open) s.destroy();
  server.close();
  rmSync(values.listen!, { force: true });
  process.exit(0);
};
process.on("SIGTERM", stop);
process.on("SIGINT", stop);
