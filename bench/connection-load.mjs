// A load generator for profiling one proxy of bench/userspace-proxy.bench.ts by hand (strace,
// perf, --cpu-prof on the proxy's process): the bench's connection-rate pattern — connect,
// 1-byte request ("C": the backend answers one byte and closes), wait for the answer,
// close — `total` times, `concurrency` at once. Prints connections/s, failures by error
// code and its own CPU µs per connection. Loopback addresses only (the bench's).
// Usage: node bench/connection-load.mjs HOST PORT [total=3000] [concurrency=32]
import { connect } from "node:net";

const [host = "127.0.5.1", port = "18080", totalArg = "3000", concArg = "32"] = process.argv.slice(2);
if (!host.startsWith("127.")) throw new Error(`${host}: loopback addresses only`);
const total = Number(totalArg);
const errors = {};
let started = 0;
let ok = 0;
let failed = 0;
const t0 = process.hrtime.bigint();
const cpu0 = process.cpuUsage();

function one() {
  if (started >= total) return;
  started++;
  const s = connect({ host, port: Number(port), noDelay: true });
  let over = false;
  const finish = (good) => {
    if (over) return;
    over = true;
    s.destroy();
    if (good) ok++;
    else failed++;
    if (ok + failed >= total) report();
    else one();
  };
  s.once("connect", () => s.write("C"));
  s.once("data", () => finish(true));
  s.once("error", (e) => {
    errors[e.code] = (errors[e.code] ?? 0) + 1;
    finish(false);
  });
  s.once("close", () => finish(false));
}

function report() {
  const secs = Number(process.hrtime.bigint() - t0) / 1e9;
  const c = process.cpuUsage(cpu0);
  console.log(
    `${(ok / secs).toFixed(0)} connections/s, ${ok} ok, ${failed} failed ${JSON.stringify(errors)}, load generator ${((c.user + c.system) / ok).toFixed(0)} µs/conn`,
  );
}

for (let i = 0; i < Number(concArg); i++) one();
