/**
 * A child process for test/health/hostile-clients.test.ts: the real node health servers
 * (HealthServers: `/healthz` and one Service's healthCheckNodePort) and the real
 * DashboardServer on 127.0.0.1, ephemeral ports. Prints `{"healthz":…,"service":…,
 * "dashboard":…}` on one line once all listen, and exits when its stdin ends. The test
 * starts it under `prlimit --nofile=N` so the servers live with a given descriptor limit,
 * as an agent under systemd's default soft limit (1024) does.
 */
import { realClock } from "../../src/health/clock.ts";
import { HealthServers } from "../../src/health/health-servers.ts";
import { agentHealthModel } from "../../src/health/state-agent-model.ts";
import { DashboardServer } from "../../src/web/dashboard-server.ts";
import { loadFixture } from "../health/load-fixture.ts";

const model = agentHealthModel(loadFixture("agent-cluster.yaml"), "node-a");
const service = model.services[0];
if (!service) throw new Error("agent-cluster.yaml has no Service with a health check for node-a");
const servers = new HealthServers({
  clock: realClock(),
  healthz: { host: "127.0.0.1", port: 0 },
  serviceHost: "127.0.0.1",
  healthTimeoutMs: 60_000,
  onFinding: (f) => process.stderr.write(`${JSON.stringify(f)}\n`),
});
await servers.update({ ...model, services: [{ ...service, port: 0 }] });
servers.markUpdated("IPv4");
const dashboard = new DashboardServer({
  host: "127.0.0.1",
  port: 0,
  state: () => ({}) as never,
});
await dashboard.start();
const a = servers.addresses();
process.stdout.write(
  `${JSON.stringify({
    healthz: a.healthz?.port,
    service: [...a.services.values()][0]?.port,
    dashboard: new URL(dashboard.url).port,
  })}\n`,
);
process.stdin.resume();
process.stdin.on("end", async () => {
  await Promise.all([servers.close(), dashboard.close()]);
  process.exit(0);
});
