import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { loadFixture } from "../../test/health/load-fixture.ts";
import { agentHealthModel } from "./state-agent-model.ts";
import { markQueued, markUpdated, type ProxyFreshness, proxyHealth } from "./state-proxy-health.ts";
import { goTime, healthzResponse, livezResponse, serviceHealthResponse } from "./state-responses.ts";

const T0 = Date.UTC(2026, 10, 30, 12, 0, 0);
const TIMEOUT = 60_000;

describe("proxy freshness (kube-proxy proxy_health.go rule)", () => {
  it("a fresh agent that never synced is healthy", () => {
    assert.equal(proxyHealth({}, T0, TIMEOUT).healthy, true);
    const queuedOnly = markQueued({}, "IPv4", T0);
    assert.equal(proxyHealth(queuedOnly, T0 + 10 * TIMEOUT, TIMEOUT).healthy, true);
  });

  it("a pending change becomes stale exactly at the timeout", () => {
    let s: ProxyFreshness = markUpdated({}, "IPv4", T0);
    s = markQueued(s, "IPv4", T0 + 1000);
    assert.equal(proxyHealth(s, T0 + 1000 + TIMEOUT - 1, TIMEOUT).healthy, true);
    assert.equal(proxyHealth(s, T0 + 1000 + TIMEOUT, TIMEOUT).healthy, false);
    assert.equal(proxyHealth(s, T0 + 1000 + TIMEOUT, TIMEOUT).families.IPv4?.healthy, false);
  });

  it("the oldest pending change counts; an update clears it", () => {
    let s: ProxyFreshness = markUpdated({}, "IPv4", T0);
    s = markQueued(s, "IPv4", T0 + 1000);
    s = markQueued(s, "IPv4", T0 + 50_000);
    assert.equal(proxyHealth(s, T0 + 61_000, TIMEOUT).healthy, false);
    s = markUpdated(s, "IPv4", T0 + 61_000);
    assert.equal(proxyHealth(s, T0 + 200_000, TIMEOUT).healthy, true);
  });

  it("one stale family makes the whole proxy unhealthy; lastUpdated is the latest", () => {
    let s: ProxyFreshness = markUpdated({}, "IPv4", T0);
    s = markUpdated(s, "IPv6", T0 + 5000);
    s = markQueued(s, "IPv4", T0 + 6000);
    const h = proxyHealth(s, T0 + 70_000, TIMEOUT);
    assert.equal(h.healthy, false);
    assert.equal(h.lastUpdated, T0 + 5000);
    assert.deepEqual(h.families, {
      IPv4: { lastUpdated: T0, healthy: false },
      IPv6: { lastUpdated: T0 + 5000, healthy: true },
    });
  });
});

describe("Go time format", () => {
  it("prints RFC3339Nano with trailing zeros trimmed", () => {
    assert.equal(goTime(undefined), "0001-01-01T00:00:00Z");
    assert.equal(goTime(T0), "2026-11-30T12:00:00Z");
    assert.equal(goTime(T0 + 120), "2026-11-30T12:00:00.12Z");
    assert.equal(goTime(T0 + 1.5), "2026-11-30T12:00:00.0015Z");
  });
});

describe("responses", () => {
  const fresh = proxyHealth(markUpdated({}, "IPv4", T0), T0 + 3000, TIMEOUT);
  const stale = proxyHealth(markQueued(markUpdated({}, "IPv4", T0), "IPv4", T0 + 1), T0 + 90_000, TIMEOUT);

  it("/healthz is 200 with lastUpdated = now when fresh and eligible", () => {
    const r = healthzResponse(fresh, true, T0 + 3000);
    assert.equal(r.status, 200);
    assert.deepEqual(r.headers, { "Content-Type": "application/json", "X-Content-Type-Options": "nosniff" });
    assert.deepEqual(JSON.parse(r.body), {
      lastUpdated: "2026-11-30T12:00:03Z",
      currentTime: "2026-11-30T12:00:03Z",
      nodeEligible: true,
      healthy: true,
      status: { IPv4: { lastUpdated: "2026-11-30T12:00:00Z", healthy: true } },
    });
    assert.deepEqual(Object.keys(JSON.parse(r.body)), [
      "lastUpdated",
      "currentTime",
      "nodeEligible",
      "healthy",
      "status",
    ]);
  });

  it("/healthz is 503 on an ineligible node while healthy stays true; /livez stays 200", () => {
    const r = healthzResponse(fresh, false, T0 + 3000);
    assert.equal(r.status, 503);
    const body = JSON.parse(r.body);
    assert.equal(body.nodeEligible, false);
    assert.equal(body.healthy, true);
    assert.equal(body.lastUpdated, "2026-11-30T12:00:00Z", "on 503 lastUpdated is the real update time");
    const l = livezResponse(fresh, T0 + 3000);
    assert.equal(l.status, 200);
    assert.equal("nodeEligible" in JSON.parse(l.body), false);
  });

  it("stale rules make both /healthz and /livez 503", () => {
    assert.equal(healthzResponse(stale, true, T0 + 90_000).status, 503);
    assert.equal(livezResponse(stale, T0 + 90_000).status, 503);
    assert.equal(JSON.parse(livezResponse(stale, T0 + 90_000).body).healthy, false);
  });

  it("the status map is omitted when no family was ever recorded", () => {
    const r = livezResponse(proxyHealth({}, T0, TIMEOUT), T0);
    assert.equal("status" in JSON.parse(r.body), false);
  });

  it("a Service answer carries the weight header on 200 and on 503", () => {
    const ok = serviceHealthResponse({
      namespace: "shop",
      name: "web",
      localEndpoints: 3,
      proxyHealthy: true,
    });
    assert.equal(ok.status, 200);
    assert.equal(ok.headers["X-Load-Balancing-Endpoint-Weight"], "3");
    assert.equal(
      ok.body,
      '{\n\t"service": {\n\t\t"namespace": "shop",\n\t\t"name": "web"\n\t},\n\t"localEndpoints": 3,\n\t"serviceProxyHealthy": true\n}',
    );
    const none = serviceHealthResponse({
      namespace: "shop",
      name: "web",
      localEndpoints: 0,
      proxyHealthy: true,
    });
    assert.equal(none.status, 503);
    assert.equal(none.headers["X-Load-Balancing-Endpoint-Weight"], "0");
    const sick = serviceHealthResponse({
      namespace: "shop",
      name: "web",
      localEndpoints: 2,
      proxyHealthy: false,
    });
    assert.equal(sick.status, 503);
    assert.equal(sick.headers["X-Load-Balancing-Endpoint-Weight"], "2");
    assert.equal(JSON.parse(sick.body).serviceProxyHealthy, false);
  });
});

describe("agentHealthModel", () => {
  const snapshot = loadFixture("agent-cluster.yaml");

  it("counts distinct local ready IPs: terminating and unready excluded, several ports once", () => {
    const m = agentHealthModel(snapshot, "node-a");
    assert.equal(m.nodeEligible, true);
    assert.deepEqual(m.services, [
      { namespace: "shop", name: "web", port: 30100, localEndpoints: 2 },
      { namespace: "shop", name: "api", port: 30101, localEndpoints: 0 },
    ]);
    assert.deepEqual(
      m.findings.map((f) => [f.code, f.subject]),
      [["health_check_node_port_missing", "Service shop/no-port"]],
    );
  });

  it("follows kube-proxy's node eligibility, not the load balancer's", () => {
    assert.equal(agentHealthModel(snapshot, "node-b").nodeEligible, false);
    assert.match(
      agentHealthModel(snapshot, "node-b").ineligibleReason ?? "",
      /ToBeDeletedByClusterAutoscaler/,
    );
    assert.equal(agentHealthModel(snapshot, "node-c").nodeEligible, false);
    assert.equal(
      agentHealthModel(snapshot, "node-d").nodeEligible,
      true,
      "the exclude label is not kube-proxy's",
    );
    const unknown = agentHealthModel(snapshot, "node-z");
    assert.equal(unknown.nodeEligible, false);
    assert.match(unknown.ineligibleReason ?? "", /not in the input/);
  });

  it("keeps one freshness family per node address family", () => {
    assert.deepEqual(agentHealthModel(snapshot, "node-a").families, ["IPv4"]);
    assert.deepEqual(agentHealthModel(snapshot, "node-b").families, ["IPv4", "IPv6"]);
    assert.equal(agentHealthModel(snapshot, "node-b").services[0]?.localEndpoints, 1);
  });
});
