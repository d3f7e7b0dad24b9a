// A minimal Node TCP proxy (createServer + connect + pipe, nothing else) for
// bench/userspace-proxy.bench.ts --naive: tells Node's own per-connection cost from passlb's.
import net from "node:net";

const srv = net.createServer({ noDelay: true }, (c) => {
  const u = net.connect({ host: "127.0.5.2", port: 18000, noDelay: true });
  c.pipe(u);
  u.pipe(c);
  c.on("error", () => u.destroy());
  u.on("error", () => c.destroy());
});
srv.listen({ host: "127.0.5.4", port: 18080 });
