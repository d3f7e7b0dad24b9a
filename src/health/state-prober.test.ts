import assert from "node:assert/strict";
import { describe, it } from "node:test";
import fc from "fast-check";
import { loadPlans } from "../../test/health/load-fixture.ts";
import { initialHealth, type ProbeOutcome, recordProbe, type TargetHealth } from "./state-machine.ts";
import { backendHealth, probeTargets } from "./state-probe-targets.ts";

const plans = loadPlans("plans.json");
const OK: ProbeOutcome = { ok: true, reason: "HTTP 200" };
const FAIL: ProbeOutcome = { ok: false, reason: "HTTP 503" };
const T = { healthyThreshold: 2, unhealthyThreshold: 3 };

function run(outcomes: readonly ProbeOutcome[], thresholds = T, start = initialHealth(0)) {
  let h: TargetHealth = start;
  const transitions: string[] = [];
  outcomes.forEach((o, i) => {
    const step = recordProbe(h, o, thresholds, (i + 1) * 1000);
    h = step.health;
    if (step.transition) transitions.push(`${step.transition.from}->${step.transition.to}@${i + 1}`);
  });
  return { health: h, transitions };
}

describe("probe state machine", () => {
  it("starts unknown and needs the thresholds to decide", () => {
    assert.deepEqual(run([OK]).transitions, []);
    assert.deepEqual(run([OK, OK]).transitions, ["unknown->healthy@2"]);
    assert.deepEqual(run([FAIL, FAIL, FAIL]).transitions, ["unknown->unhealthy@3"]);
  });

  it("an opposite result resets the streak (hysteresis)", () => {
    const flapping = [OK, OK, FAIL, FAIL, OK, FAIL, FAIL, OK, FAIL, FAIL];
    assert.deepEqual(run(flapping).transitions, ["unknown->healthy@2"]);
    const r = run([OK, OK, FAIL, FAIL, FAIL, OK, OK]);
    assert.deepEqual(r.transitions, ["unknown->healthy@2", "healthy->unhealthy@5", "unhealthy->healthy@7"]);
    assert.equal(r.health.since, 7000);
    assert.match(
      recordProbe(run([OK, OK, FAIL, FAIL]).health, FAIL, T, 0).transition?.reason ?? "",
      /3 consecutive failures \(threshold 3\), last: HTTP 503/,
    );
  });

  it("keeps the last weight an answer carried and reports changes", () => {
    const a = recordProbe(initialHealth(0), { ...OK, weight: 3 }, T, 1);
    assert.deepEqual(a.weightChange, { from: undefined, to: 3 });
    const b = recordProbe(a.health, OK, T, 2);
    assert.equal(b.health.weight, 3);
    assert.equal(b.weightChange, undefined);
    const c = recordProbe(b.health, { ...FAIL, weight: 0 }, T, 3);
    assert.deepEqual(c.weightChange, { from: 3, to: 0 });
  });

  it("property: the state is decided by the latest streak", () => {
    fc.assert(
      fc.property(
        fc.array(fc.boolean(), { maxLength: 40 }),
        fc.integer({ min: 1, max: 5 }),
        fc.integer({ min: 1, max: 5 }),
        (results, healthyThreshold, unhealthyThreshold) => {
          const { health } = run(
            results.map((ok) => (ok ? OK : FAIL)),
            { healthyThreshold, unhealthyThreshold },
          );
          let streak = 0;
          const last = results.at(-1);
          for (let i = results.length - 1; i >= 0 && results[i] === last; i--) streak++;
          if (last === true && streak >= healthyThreshold) assert.equal(health.state, "healthy");
          if (last === false && streak >= unhealthyThreshold) assert.equal(health.state, "unhealthy");
          if (health.state === "unknown") {
            // never reached a threshold anywhere in the history
            let run1 = 0;
            let prev: boolean | undefined;
            for (const r of results) {
              run1 = r === prev ? run1 + 1 : 1;
              prev = r;
              assert.ok(run1 < (r ? healthyThreshold : unhealthyThreshold));
            }
          }
        },
      ),
    );
  });
});

describe("probeTargets", () => {
  const targets = probeTargets(plans);
  const byKey = new Map(targets.map((t) => [t.key, t]));

  it("probes each distinct (protocol, address, port, path) once, included backends only", () => {
    assert.deepEqual(
      targets.map((t) => t.key),
      [
        "HTTP 192.0.2.11:10256/healthz",
        "HTTP 192.0.2.11:30100/healthz",
        "HTTP 192.0.2.12:10256/healthz",
        "HTTP 192.0.2.12:30100/healthz",
        "HTTP [fd00::12]:10256/healthz",
      ],
    );
    assert.deepEqual(byKey.get("HTTP 192.0.2.12:10256/healthz")?.users, [
      { service: "shop/cluster-wide", check: "node-healthz", node: "node-b" },
      { service: "shop/dual", check: "node-healthz", node: "node-b" },
    ]);
  });

  it("takes the strictest parameters when checks share a target", () => {
    const shared = byKey.get("HTTP 192.0.2.11:10256/healthz");
    assert.deepEqual(
      [shared?.intervalMs, shared?.timeoutMs, shared?.healthyThreshold, shared?.unhealthyThreshold],
      [5000, 1000, 2, 2],
    );
    const local = byKey.get("HTTP 192.0.2.11:30100/healthz");
    assert.equal(local?.readsWeight, true);
    assert.equal(shared?.readsWeight, false);
  });

  it("adds a TCP nodePort check per TCP listener for the data-path annotation", () => {
    const withDataPath = probeTargets(plans, new Set(["shop/web"]));
    const added = withDataPath.filter((t) => t.protocol === "TCP");
    assert.deepEqual(
      added.map((t) => [t.key, t.intervalMs, t.unhealthyThreshold, t.users[0]?.check]),
      [
        ["TCP 192.0.2.11:30080", 3000, 2, "data-path-TCP-80"],
        ["TCP 192.0.2.12:30080", 3000, 2, "data-path-TCP-80"],
      ],
    );
  });
});

describe("backendHealth", () => {
  const h = (state: TargetHealth["state"], weight?: number): TargetHealth => ({
    ...initialHealth(0),
    state,
    weight,
  });

  it("gates each listener on every check that covers it and reads the weight back", () => {
    const states = new Map([
      ["HTTP 192.0.2.11:30100/healthz", h("healthy", 5)],
      ["HTTP 192.0.2.12:30100/healthz", h("unhealthy", 0)],
      ["HTTP [fd00::12]:10256/healthz", h("unhealthy")],
    ]);
    const result = backendHealth(plans, states);
    const get = (service: string, node: string) =>
      result.find((r) => r.service === service && r.node === node);
    assert.deepEqual(get("shop/web", "node-a"), {
      service: "shop/web",
      node: "node-a",
      listeners: { "TCP/80": true, "UDP/53": true },
      checks: { local: "healthy" },
      weight: 5,
    });
    assert.deepEqual(get("shop/web", "node-b")?.listeners, { "TCP/80": false, "UDP/53": false });
    assert.equal(get("shop/web", "node-b")?.weight, 0);
    assert.equal(get("shop/web", "node-c"), undefined, "excluded backends are not probed");
    assert.deepEqual(get("shop/cluster-wide", "node-b")?.checks, { "node-healthz": "unknown" });
    assert.deepEqual(
      get("shop/cluster-wide", "node-b")?.listeners,
      { "TCP/80": true },
      "unknown admits traffic",
    );
    assert.deepEqual(get("shop/dual", "node-b")?.listeners, { "TCP/8080": false }, "one family down: out");
    const late = new Map([...states, ["HTTP 192.0.2.11:30100/healthz", initialHealth(0, false)]]);
    assert.deepEqual(
      backendHealth(plans, late).find((r) => r.service === "shop/web" && r.node === "node-a")?.listeners,
      { "TCP/80": false, "UDP/53": false },
      "a target that came after the first plan waits for a verdict",
    );
    assert.equal(get("shop/dual", "node-a")?.weight, 1, "no weight-reading check: the planned weight");
  });

  it("a failing data-path check takes out only its listener", () => {
    const states = new Map([
      ["HTTP 192.0.2.11:30100/healthz", h("healthy", 2)],
      ["TCP 192.0.2.11:30080", h("unhealthy")],
    ]);
    const web = backendHealth(plans, states, new Set(["shop/web"])).find((r) => r.node === "node-a");
    assert.deepEqual(web?.listeners, { "TCP/80": false, "UDP/53": true });
  });
});
