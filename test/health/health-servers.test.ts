// Contract tests of the node health servers against kubernetes
// pkg/proxy/healthcheck/service_health.go and proxy_health.go: status codes, bodies, headers, node
// eligibility, weight counting, servers opening and closing with the model, and a busy port as a finding.
import assert from "node:assert/strict";
import { createServer, type Server } from "node:net";
import { after, before, describe, it } from "node:test";
import { FakeClock } from "../../src/health/clock.ts";
import { HealthServers } from "../../src/health/health-servers.ts";
import { type AgentHealthModel, agentHealthModel } from "../../src/health/state-agent-model.ts";
import type { Finding } from "../../src/plan/load-balancer-plan.ts";
import { loadFixture } from "./load-fixture.ts";
import { freePort, httpGet } from "./net-helpers.ts";

const HOST = "127.0.0.1";
const TIMEOUT = 60_000;
const snapshot = loadFixture("agent-cluster.yaml");

/** the fixture's model with its healthCheckNodePorts moved to free ephemeral ports */
async function modelFor(node: string): Promise<AgentHealthModel> {
  const m = agentHealthModel(snapshot, node);
  const services = [];
  for (const s of m.services) services.push({ ...s, port: await freePort(HOST) });
  return { ...m, services };
}

describe("health servers", () => {
  const clock = new FakeClock(Date.UTC(2026, 10, 30, 12, 0, 0));
  const findings: Finding[] = [];
  const servers = new HealthServers({
    clock,
    healthz: { host: HOST, port: 0 },
    serviceHost: HOST,
    healthTimeoutMs: TIMEOUT,
    onFinding: (f) => findings.push(f),
  });
  let model: AgentHealthModel;
  let healthzPort = 0;
  const port = (name: string) => model.services.find((s) => s.name === name)?.port ?? -1;

  before(async () => {
    model = await modelFor("node-a");
    await servers.update(model);
    servers.markUpdated("IPv4");
    healthzPort = servers.addresses().healthz?.port ?? 0;
  });
  after(() => servers.close());

  it("/healthz answers 200 with kube-proxy's JSON and headers", async () => {
    clock.advance(2000);
    const a = await httpGet(HOST, healthzPort, "/healthz");
    assert.equal(a.status, 200);
    assert.equal(a.headers["content-type"], "application/json");
    assert.equal(a.headers["x-content-type-options"], "nosniff");
    assert.equal(a.headers["x-load-balancing-endpoint-weight"], undefined);
    assert.deepEqual(JSON.parse(a.body), {
      lastUpdated: "2026-11-30T12:00:02Z",
      currentTime: "2026-11-30T12:00:02Z",
      nodeEligible: true,
      healthy: true,
      status: { IPv4: { lastUpdated: "2026-11-30T12:00:00Z", healthy: true } },
    });
    const l = await httpGet(HOST, healthzPort, "/livez");
    assert.equal(l.status, 200);
    assert.equal("nodeEligible" in JSON.parse(l.body), false);
    assert.equal((await httpGet(HOST, healthzPort, "/other")).status, 404);
  });

  it("per-Service servers answer any path and method with the local ready count as weight", async () => {
    const web = await httpGet(HOST, port("web"), "/anything?x=1", "POST");
    assert.equal(web.status, 200);
    assert.equal(web.headers["x-load-balancing-endpoint-weight"], "2");
    assert.equal(web.headers["content-type"], "application/json");
    assert.deepEqual(JSON.parse(web.body), {
      service: { namespace: "shop", name: "web" },
      localEndpoints: 2,
      serviceProxyHealthy: true,
    });
    const api = await httpGet(HOST, port("api"), "/healthz");
    assert.equal(api.status, 503, "only a terminating endpoint: not counted");
    assert.equal(api.headers["x-load-balancing-endpoint-weight"], "0");
  });

  it("stale rules turn every answer 503 but keep the weight", async () => {
    servers.markQueued("IPv4");
    clock.advance(TIMEOUT);
    assert.equal((await httpGet(HOST, healthzPort, "/healthz")).status, 503);
    const livez = await httpGet(HOST, healthzPort, "/livez");
    assert.equal(livez.status, 503);
    assert.equal(JSON.parse(livez.body).healthy, false);
    const web = await httpGet(HOST, port("web"));
    assert.equal(web.status, 503);
    assert.equal(web.headers["x-load-balancing-endpoint-weight"], "2");
    assert.equal(JSON.parse(web.body).serviceProxyHealthy, false);
    servers.markUpdated("IPv4");
    assert.equal((await httpGet(HOST, port("web"))).status, 200);
    assert.deepEqual(servers.counters.healthz, { "200": 1, "503": 1 });
  });

  it("an ineligible node fails /healthz only", async () => {
    const tainted = await modelFor("node-b");
    await servers.update({ ...model, nodeEligible: tainted.nodeEligible });
    const h = await httpGet(HOST, healthzPort, "/healthz");
    assert.equal(h.status, 503);
    assert.equal(JSON.parse(h.body).nodeEligible, false);
    assert.equal(JSON.parse(h.body).healthy, true);
    assert.equal((await httpGet(HOST, healthzPort, "/livez")).status, 200);
    assert.equal((await httpGet(HOST, port("web"))).status, 200, "per-Service answers ignore eligibility");
    await servers.update(model);
  });

  it("servers close when their Service leaves and open when it comes back", async () => {
    const apiPort = port("api");
    await servers.update({ ...model, services: model.services.filter((s) => s.name !== "api") });
    await assert.rejects(httpGet(HOST, apiPort), /ECONNREFUSED/);
    assert.equal((await httpGet(HOST, port("web"))).status, 200);
    await servers.update(model);
    assert.equal((await httpGet(HOST, apiPort)).status, 503);
  });

  it("a busy port is a finding, retried on the next update", async () => {
    const busyPort = await freePort(HOST);
    const blocker: Server = createServer();
    await new Promise<void>((r) => blocker.listen({ host: HOST, port: busyPort }, r));
    const extra = { namespace: "shop", name: "busy", port: busyPort, localEndpoints: 1 };
    const withBusy = { ...model, services: [...model.services, extra] };
    await servers.update(withBusy);
    await servers.update(withBusy);
    const busy = findings.filter((f) => f.code === "failed_to_start_service_healthcheck");
    assert.equal(busy.length, 1, "a persisting failure is reported once");
    assert.equal(busy[0]?.subject, "Service shop/busy");
    assert.match(busy[0]?.message ?? "", /EADDRINUSE/);
    assert.equal((await httpGet(HOST, port("web"))).status, 200, "the others keep working");
    await new Promise<void>((r) => blocker.close(() => r()));
    await servers.update(withBusy);
    const answer = await httpGet(HOST, busyPort);
    assert.equal(answer.status, 200);
    assert.equal(JSON.parse(answer.body).service.name, "busy");
  });
});
