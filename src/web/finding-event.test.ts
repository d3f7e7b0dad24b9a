import assert from "node:assert/strict";
import { test } from "node:test";
import { findingEvent, upperCamel } from "./finding-event.ts";

const svc = { namespace: "shop", name: "api", uid: "u-1" };
const opts = { now: Date.UTC(2026, 0, 1), instance: "passlb-lb-node-a", action: "Plan" };

test("a Service finding becomes a Warning Event on it with an UpperCamel reason", () => {
  const e = findingEvent(
    { code: "pool_exhausted", severity: "error", subject: "Service shop/api", message: "no free address" },
    svc,
    opts,
  );
  assert.ok(e);
  assert.equal(e.type, "Warning");
  assert.equal(e.reason, "PoolExhausted");
  assert.equal(e.note, "no free address");
  assert.deepEqual(e.regarding, {
    apiVersion: "v1",
    kind: "Service",
    namespace: "shop",
    name: "api",
    uid: "u-1",
  });
  assert.equal(e.eventTime, "2026-01-01T00:00:00.000Z");
  assert.match(e.metadata.name, /^api\.passlb-[0-9a-f]{8}$/);
  const again = findingEvent(
    { code: "pool_exhausted", severity: "error", subject: "Service shop/api", message: "other words" },
    svc,
    opts,
  );
  assert.equal(again?.metadata.name, e.metadata.name, "same finding, same Event (a series)");
});

test("info is Normal; long notes are cut to 1 kB; other subjects are not Service Events", () => {
  const e = findingEvent(
    { code: "vip_kept", severity: "info", subject: "Service shop/api", message: "é".repeat(2000) },
    svc,
    opts,
  );
  assert.equal(e?.type, "Normal");
  assert.ok(Buffer.byteLength(e?.note ?? "") <= 1024);
  assert.ok(e?.note.endsWith("…"));
  assert.equal(
    findingEvent({ code: "x", severity: "warning", subject: "Node node-a", message: "m" }, svc, opts),
    undefined,
  );
  assert.equal(
    findingEvent({ code: "x", severity: "warning", subject: "Service shop/web", message: "m" }, svc, opts),
    undefined,
  );
  assert.equal(upperCamel("no_local_endpoints"), "NoLocalEndpoints");
});
