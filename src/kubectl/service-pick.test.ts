import assert from "node:assert/strict";
import { test } from "node:test";
import { pickServices } from "./service-pick.ts";

const KEYS = ["demo/web", "prod/web", "demo/dns"];

test("no name: every Service, or those of -n's namespace", () => {
  const all = pickServices(KEYS, undefined, undefined);
  assert.ok(all.ok);
  assert.deepEqual(KEYS.filter(all.matches), KEYS);
  const demo = pickServices(KEYS, undefined, "demo");
  assert.ok(demo.ok);
  assert.deepEqual(KEYS.filter(demo.matches), ["demo/web", "demo/dns"]);
});

test("a name: with -n, as ns/name, or unique across namespaces", () => {
  for (const [name, ns] of [
    ["web", "prod"],
    ["prod/web", undefined],
  ] as const) {
    const p = pickServices(KEYS, name, ns);
    assert.ok(p.ok);
    assert.equal(p.key, "prod/web");
    assert.deepEqual(KEYS.filter(p.matches), ["prod/web"]);
  }
  const dns = pickServices(KEYS, "dns", undefined);
  assert.ok(dns.ok && dns.key === "demo/dns");
});

test("ambiguous and missing names are errors that say what to do", () => {
  const twice = pickServices(KEYS, "web", undefined);
  assert.ok(!twice.ok);
  assert.match(twice.error, /several namespaces \(demo\/web, prod\/web\): pass -n/);
  const none = pickServices(KEYS, "web", "staging");
  assert.ok(!none.ok);
  assert.equal(none.error, "Service staging/web not found");
});
