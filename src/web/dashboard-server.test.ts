import assert from "node:assert/strict";
import { test } from "node:test";
import { type Answer, httpGet } from "../../test/health/net-helpers.ts";
import { webPlans } from "../../test/support/web-fixture.ts";
import { serviceForwarding } from "../forwarding/forwarding-state.ts";
import { DashboardServer } from "./dashboard-server.ts";
import { dashboardState } from "./dashboard-state.ts";
import { Metrics } from "./metrics.ts";

/** A one-shot request to a full URL (net-helpers' httpGet takes host and port apart). */
function get(url: string, method = "GET"): Promise<Answer> {
  const u = new URL(url);
  return httpGet(u.hostname, Number(u.port), `${u.pathname}${u.search}`, method);
}

test("serves the page, the state, the metrics and healthz on loopback; nothing else", async (t) => {
  const metrics = new Metrics();
  const forwarding = webPlans().map((p) => serviceForwarding(p, () => ({ state: "healthy" }), { seed: 1 }));
  metrics.observeForwarding(forwarding);
  const server = new DashboardServer({
    host: "127.0.0.1",
    port: 0,
    metrics,
    state: () =>
      dashboardState({
        now: 0,
        startedAt: 0,
        process: "test",
        dataplane: "none",
        forwarding,
        windowSeconds: 10,
        recentConnections: new Map(),
        events: [],
        issues: [],
      }),
  });
  const { url } = await server.start();
  t.after(() => server.close());
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+\/$/);

  const page = await get(url);
  assert.equal(page.status, 200);
  assert.match(String(page.headers["content-security-policy"]), /default-src 'none'/);
  assert.match(page.body, /<title>passlb<\/title>/);
  assert.doesNotMatch(page.body, /(src|href)=["']?(https?:)?\/\//, "no external asset");

  const state = await get(`${url}api/v1/state`);
  assert.equal(state.status, 200);
  const json = JSON.parse(state.body) as { services: { service: string }[] };
  assert.deepEqual(
    json.services.map((s) => s.service),
    ["default/api", "default/web"],
  );

  const m = await get(`${url}metrics`);
  assert.equal(m.status, 200);
  assert.match(String(m.headers["content-type"]), /^text\/plain/);
  assert.match(m.body, /passlb_services_programmed 2/);

  assert.equal((await get(`${url}healthz`)).body, "ok\n");
  assert.equal((await get(`${url}nope`)).status, 404);
  assert.equal((await get(`${url}api/v1/state`, "POST")).status, 405);
  assert.equal((await get(`${url}`, "HEAD")).body, "");
});

test("a port in use is an error from start, not a crash", async (t) => {
  const state = () => {
    throw new Error("unused");
  };
  const a = new DashboardServer({ host: "127.0.0.1", port: 0, state });
  const { url } = await a.start();
  t.after(() => a.close());
  const b = new DashboardServer({ host: "127.0.0.1", port: Number(new URL(url).port), state });
  await assert.rejects(b.start(), /EADDRINUSE/);
  assert.equal(
    (await get(`${url}api/v1/state`)).status,
    500,
    "a failing state is a 500, the server lives on",
  );
});
