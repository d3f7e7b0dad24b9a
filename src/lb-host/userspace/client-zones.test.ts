import assert from "node:assert/strict";
import { test } from "node:test";
import { clientZones } from "./client-zones.ts";

test("clientZones: the longest prefix holding the client wins, both families", () => {
  const zoneOf = clientZones([
    { name: "zone-b", clientCIDRs: ["192.0.2.0/24", "fd00:2::/32"] },
    { name: "zone-a", clientCIDRs: ["192.0.2.64/26"] },
  ]);
  assert.equal(zoneOf("192.0.2.70"), "zone-a");
  assert.equal(zoneOf("192.0.2.1"), "zone-b");
  assert.equal(zoneOf("fd00:2::9"), "zone-b");
  assert.equal(zoneOf("198.51.100.1"), undefined);
  assert.equal(zoneOf("not an address"), undefined);
});

test("clientZones: the same prefix in two zones goes to the first by name", () => {
  const zoneOf = clientZones([
    { name: "zone-c", clientCIDRs: ["192.0.2.0/24"] },
    { name: "zone-a", clientCIDRs: ["192.0.2.0/24"] },
  ]);
  assert.equal(zoneOf("192.0.2.9"), "zone-a");
});
