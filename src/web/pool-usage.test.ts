import assert from "node:assert/strict";
import { test } from "node:test";
import { webPlans } from "../../test/support/web-fixture.ts";
import { poolUsage } from "./pool-usage.ts";

test("pool size per family and distinct VIPs used", () => {
  const pools = [
    {
      name: "default",
      addresses: ["203.0.113.1-203.0.113.14", "fd00:10::/64"],
      autoAssign: true,
      avoidBuggyIPs: false,
    },
    { name: "spare", addresses: ["198.51.100.0/30"], autoAssign: false, avoidBuggyIPs: false },
  ];
  assert.deepEqual(poolUsage(pools, webPlans()), [
    { pool: "default", family: "IPv4", size: 14, used: 2 },
    { pool: "default", family: "IPv6", size: Number.MAX_SAFE_INTEGER, used: 0 },
    { pool: "spare", family: "IPv4", size: 4, used: 0 },
  ]);
});
