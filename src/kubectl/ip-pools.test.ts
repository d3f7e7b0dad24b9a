import assert from "node:assert/strict";
import { test } from "node:test";
import { poolsFromCluster } from "./ip-pools.ts";

const pool = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: "passlb.io/v1alpha1",
  kind: "LoadBalancerIPPool",
  metadata: { name },
  spec,
});

test("LoadBalancerIPPools become planner pools in IPAM order (oldest, then name); disabled ones and broken ones are left out and said", () => {
  const r = poolsFromCluster([
    pool("zeta", {
      addresses: ["203.0.113.0/28"],
      namespaces: ["team-a"],
      serviceSelector: { matchLabels: { a: "b" } },
    }),
    pool("alpha", { addresses: ["198.51.100.1-198.51.100.9"], autoAssign: false }),
    pool("old", { addresses: ["192.0.2.0/30"], disabled: true }),
    pool("bad", { addresses: [] }),
  ]);
  assert.deepEqual(r.pools, [
    { name: "alpha", addresses: ["198.51.100.1-198.51.100.9"], autoAssign: false, avoidBuggyIPs: false },
    {
      name: "zeta",
      addresses: ["203.0.113.0/28"],
      autoAssign: true,
      avoidBuggyIPs: false,
      namespaces: ["team-a"],
      serviceSelector: { matchLabels: { a: "b" } },
    },
  ]);
  assert.deepEqual(r.disabled, ["old"]);
  assert.equal(r.problems.length, 1);
  assert.match(r.problems[0] ?? "", /^LoadBalancerIPPool bad: spec\.addresses: /);
});
