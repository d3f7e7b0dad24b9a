// The leanest node:net TCP proxy we know how to write, for bench/userspace-proxy.bench.ts
// --lean: what node:net itself costs per connection, with nothing of passlb's (no node
// choice, no tallies, no deadlines, no tracking), so the gap between it and passlb is
// passlb's own cost and the gap between it and HAProxy is node:net's. Documented APIs only:
// net.Server options (allowHalfOpen, noDelay, pauseOnConnect), the target socket's `onread`
// into one reused buffer, handlers shared by every connection, no pipe() or closures.
// Usage: node lean-node-proxy.mjs LISTEN_HOST [--pause-on-connect]
import { connect, createServer } from "node:net";

const host = process.argv[2] ?? "127.0.5.6";
const pause = process.argv.includes("--pause-on-connect");
const PEER = Symbol("peer");
// one buffer for every target socket's reads; each read is copied out (as Node's default
// read path allocates), since a write left queued keeps its bytes without copying them
const ONREAD = { buffer: Buffer.allocUnsafe(64 * 1024), callback: onTargetRead };

function onTargetRead(n, buf) {
  const to = this[PEER];
  to.write(Buffer.from(buf.subarray(0, n)));
  if (to.writableLength < to.writableHighWaterMark) return true;
  to.once("drain", onDrain);
  return false;
}
function onClientData(d) {
  const to = this[PEER];
  if (to.write(d)) return;
  this.pause();
  to.once("drain", onDrain);
}
function onDrain() {
  this[PEER].resume();
}
function onEnd() {
  const to = this[PEER];
  if (to.readableEnded && to.writableLength === 0) to.destroy();
  else to.end();
  if (this.writableEnded && this.writableLength === 0) this.destroy();
}
function onClose() {
  const to = this[PEER];
  if (!to.destroyed) to.destroy();
}
function onConnect() {
  const c = this[PEER];
  c.on("data", onClientData);
  c.on("end", onEnd);
  this.on("end", onEnd);
  if (pause) c.resume();
}
function ignore() {}

const server = createServer({ allowHalfOpen: true, noDelay: true, pauseOnConnect: pause }, (c) => {
  void c.remoteAddress; // a load balancer hashes the client address: getpeername, as passlb
  const u = connect({ host: "127.0.5.2", port: 18000, allowHalfOpen: true, noDelay: true, onread: ONREAD });
  u[PEER] = c;
  c[PEER] = u;
  c.on("error", ignore);
  u.on("error", ignore);
  c.on("close", onClose);
  u.on("close", onClose);
  u.on("connect", onConnect);
});
server.listen({ host, port: 18080 });
