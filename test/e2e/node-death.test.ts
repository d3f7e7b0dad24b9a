/**
 * A node dies (its link goes down) while a client opens a new connection every 25 ms
 * (issue 16 §1), eTP Local and eTP Cluster, in the lab as root with real packets
 * (test/fixtures/lab/e2e/). Bound, as the issue states it: new connections fail (or still
 * reach the dead node) only within the health check's interval × unhealthyThreshold + 1 s
 * after the link went down — Local: GKE's 3 s × 2 + 1 s = 7 s; Cluster (kube-proxy's
 * :10256/healthz): 8 s × 3 + 1 s = 25 s (ingress-gce pkg/l4/healthchecks). The prober re-probes a
 * failing target after its fastinter (docs/health.md "Fast re-probe"), so it judges within
 * interval × threshold and the extra second is the LB host's to program the change; before
 * fastinter the worst case was interval × threshold + timeout, and CI missed the 7 s by
 * 22 ms once. The test asserts the bound itself. Root only; otherwise
 * skipped with the reason. The lab (`fnod<pid>`) is removed when the test ends, pass or
 * fail.
 */
import { test } from "node:test";
import { planSnapshot } from "../../src/plan/planner.ts";
import { labUnavailable, startLab } from "./lab-harness.ts";
import { assertNodeLossBound } from "./node-loss.ts";
import type { StreamEvent } from "./under-load.ts";

const TOPOLOGY = "test/fixtures/lab/e2e/topology.yaml";
const why = labUnavailable();

test("a node dies (links down): new connections fail only within interval × unhealthyThreshold + 1 s", {
  timeout: 240_000,
}, async (t) => {
  if (why) return t.skip(why);
  const lab = await startLab(t, TOPOLOGY, { prefix: "fnod", lb: true });
  const plans = planSnapshot(await lab.snapshot()).plans;
  const boundOf = (service: string) => {
    const check = plans.find((p) => p.service === service)!.healthChecks[0]!;
    const ms = (check.intervalSeconds * check.unhealthyThreshold + 1) * 1000;
    return { ms, check };
  };
  const node = "node-a2";
  const nodeAddress = lab.host(node).ipv4;
  const cases = [
    // web: eTP Local, node-a2 has one of its four pods
    { what: "eTP Local", service: "e2e/web", port: 80, through: undefined },
    // guarded: eTP Cluster, IPv4 only, its pod on node-a1: what node-a2 forwards reaches
    // it masqueraded. (IPv4 only: when this test was written the agents' /healthz served
    // IPv4 only and a dual-stack Service failed open; fixed since, see docs/reliability.md.)
    {
      what: "eTP Cluster",
      service: "e2e/guarded",
      port: 83,
      through: (e: StreamEvent) => e.client === nodeAddress,
    },
  ];
  for (const c of cases)
    await t.test(c.what, async (st) => {
      const { ms, check } = boundOf(c.service);
      try {
        const figures = await assertNodeLossBound(st, lab, {
          what: `${c.what} (${check.id}: ${check.intervalSeconds} s × ${check.unhealthyThreshold} + 1 s)`,
          client: "client-a",
          target: `${await lab.vip(c.service)}:${c.port}`,
          node,
          boundMs: ms,
          fail: async () => lab.link(node, false),
          ...(c.through ? { through: c.through } : {}),
        });
        st.diagnostic(`${c.what}: ${JSON.stringify(figures)} (bound ${ms} ms)`);
      } finally {
        lab.link(node, true);
      }
    });
});
