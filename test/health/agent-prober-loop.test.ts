// The loop end to end on loopback: two nodes' health servers (passlb agent's), the prober
// driven by a plan, and the results folded back onto the plan — health per listener and
// the weight read from X-Load-Balancing-Endpoint-Weight.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { it } from "node:test";
import { FakeClock, realClock } from "../../src/health/clock.ts";
import { HealthServers } from "../../src/health/health-servers.ts";
import { ProbeConnections } from "../../src/health/probe-connections.ts";
import { Prober, type ProberEvent } from "../../src/health/prober.ts";
import type { AgentHealthModel } from "../../src/health/state-agent-model.ts";
import { backendHealth, probeTargets } from "../../src/health/state-probe-targets.ts";
import type { LoadBalancerPlan } from "../../src/plan/load-balancer-plan.ts";
import { fixturePath } from "./load-fixture.ts";
import { freePort } from "./net-helpers.ts";

const NODE_A = "127.94.0.1";
const NODE_B = "127.94.0.2";
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function model(port: number, localEndpoints: number): AgentHealthModel {
  return {
    nodeEligible: true,
    ineligibleReason: undefined,
    families: ["IPv4"],
    services: [{ namespace: "shop", name: "web", port, localEndpoints }],
    findings: [],
  };
}

async function node(host: string, port: number, localEndpoints: number): Promise<HealthServers> {
  const servers = new HealthServers({
    clock: new FakeClock(),
    healthz: { host, port: 0 },
    serviceHost: host,
    healthTimeoutMs: 60_000,
    onFinding: (f) => assert.fail(f.message),
  });
  await servers.update(model(port, localEndpoints));
  return servers;
}

it("health and weights flow from the nodes' servers back onto the plan", async (t) => {
  const port = await freePort(NODE_A);
  const text = readFileSync(fixturePath("loop-plan.json"), "utf8").replace('"LOCAL_PORT"', String(port));
  const plans = (JSON.parse(text) as { plans: LoadBalancerPlan[] }).plans;
  const a = await node(NODE_A, port, 3);
  const b = await node(NODE_B, port, 0);
  t.after(() => Promise.all([a.close(), b.close()]));

  const events: ProberEvent[] = [];
  const connections = new ProbeConnections();
  const prober = new Prober({
    clock: realClock(),
    probe: connections.probe,
    forget: (key) => connections.forget(key),
    seed: 3,
    maxConcurrent: 8,
    onEvent: (e) => events.push(e),
  });
  t.after(async () => {
    await prober.close();
    connections.close();
  });
  const targets = probeTargets(plans);
  assert.deepEqual(
    targets.map((x) => x.key),
    [`HTTP ${NODE_A}:${port}/healthz`, `HTTP ${NODE_B}:${port}/healthz`],
  );
  prober.setTargets(targets);
  await sleep(1200);

  const health = () => backendHealth(plans, prober.states());
  assert.deepEqual(
    health().map((h) => [h.node, h.listeners["TCP/80"], h.weight]),
    [
      ["node-a", true, 3],
      ["node-b", false, 0],
    ],
  );

  await a.update(model(port, 1)); // a pod on node-a went away
  await sleep(700);
  assert.equal(health()[0]?.weight, 1);
  assert.ok(events.some((e) => e.kind === "weight" && e.from === 3 && e.to === 1));

  await a.close(); // node-a's agent dies
  await sleep(1200);
  assert.deepEqual(health()[0]?.listeners, { "TCP/80": false });
  const down = events.find(
    (e) => e.kind === "transition" && e.to === "unhealthy" && e.target.address === NODE_A,
  );
  assert.ok(down && down.kind === "transition");
  assert.equal(down.from, "healthy");
  assert.match(down.reason, /2 consecutive failures/);
});
