// The strict test API server refuses what kube-apiserver refuses: wire types, custom
// resource schemas, validation of the objects passlb writes, names. Each test names the
// upstream file the rule comes from (also cited in the fake's modules).
import assert from "node:assert/strict";
import { test } from "node:test";
import { CoordinationV1Api, type V1MicroTime } from "@kubernetes/client-node";
import { admin } from "./fake-api-call.ts";
import { FakeApiServer } from "./fake-api-server.ts";

async function started(t: { after: (f: () => unknown) => void }): Promise<FakeApiServer> {
  const api = new FakeApiServer();
  await api.start();
  t.after(() => api.close());
  api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: "passlb-system" } });
  api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: "shop" } });
  return api;
}

const LEASES = "/apis/coordination.k8s.io/v1/namespaces/passlb-system/leases";
const lease = (spec: Record<string, unknown>) => ({ metadata: { name: "passlb-controller" }, spec });

test("MicroTime (meta/v1/micro_time.go): the millisecond Lease write passlb used to send is the 400 of issue 14", async (t) => {
  const api = await started(t);
  const leases = api.kubeConfig("controller").makeApiClient(CoordinationV1Api);
  // what passlb sent before: a plain Date, which client-node serialises with toISOString()
  const date = new Date("2026-12-01T14:38:33.611Z") as V1MicroTime;
  await assert.rejects(
    leases.createNamespacedLease({
      namespace: "passlb-system",
      body: lease({ holderIdentity: "a", renewTime: date }),
    }),
    (e: { code: number; body: string }) => {
      assert.equal(e.code, 400);
      assert.equal(
        JSON.parse(e.body).message,
        'Lease in version "v1" cannot be handled as a Lease: parsing time "2026-12-01T14:38:33.611Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".611Z" as ".000000"',
      );
      return true;
    },
  );
  const micro = await admin(api, "POST", LEASES, lease({ renewTime: "2026-12-01T14:38:33.611000Z" }));
  assert.equal(micro.status, 201, "six fractional digits decode");
  const seven = await admin(
    api,
    "PUT",
    `${LEASES}/passlb-controller`,
    lease({ renewTime: "2026-12-01T14:38:33.6110000Z" }),
  );
  assert.equal(seven.status, 400, "seven do not");
  const none = await admin(
    api,
    "PUT",
    `${LEASES}/passlb-controller`,
    lease({ acquireTime: "2026-12-01T14:38:33Z" }),
  );
  assert.match(none.body.message, /cannot parse "Z" as "\.000000"/, "nor none");
});

test("Time (meta/v1/time.go RFC3339), int32, int-or-string (intstr.go) as Go decodes them", async (t) => {
  const api = await started(t);
  const event = (extra: Record<string, unknown>) => ({
    metadata: { generateName: "web.", namespace: "shop" },
    involvedObject: { kind: "Service", name: "web", namespace: "shop" },
    reason: "Test",
    ...extra,
  });
  const ms = await admin(
    api,
    "POST",
    "/api/v1/namespaces/shop/events",
    event({ firstTimestamp: "2026-12-01T14:38:33.611Z" }),
  );
  assert.equal(ms.status, 201, "RFC3339 takes fractional seconds although its layout has none");
  assert.equal(ms.body.firstTimestamp, "2026-12-01T14:38:33Z", "and a Time is stored to the second");
  const offset = await admin(api, "POST", LEASES, lease({ renewTime: "2026-12-01T15:38:33.611000+01:00" }));
  assert.equal(offset.body.spec.renewTime, "2026-12-01T14:38:33.611000Z", "a MicroTime comes back in UTC");
  const bad = await admin(
    api,
    "POST",
    "/api/v1/namespaces/shop/events",
    event({ lastTimestamp: "2026-12-01 14:38" }),
  );
  assert.equal(bad.status, 400);
  assert.equal(
    bad.body.message,
    'Event in version "v1" cannot be handled as a Event: parsing time "2026-12-01 14:38" as "2006-01-02T15:04:05Z07:00": cannot parse " 14:38" as "T"',
  );
  const count = await admin(api, "POST", "/api/v1/namespaces/shop/events", event({ count: "1" }));
  assert.match(
    count.body.message,
    /json: cannot unmarshal string into Go struct field Event\.count of type int32$/,
  );
  const big = await admin(api, "POST", LEASES, lease({ leaseDurationSeconds: 2 ** 31 }));
  assert.match(big.body.message, /of type int32$/, "int32 overflows");
  api.put({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "shop" },
    spec: { type: "ClusterIP" },
  });
  const svc = (targetPort: unknown) => ({
    metadata: { name: "web", namespace: "shop" },
    spec: { type: "ClusterIP", ports: [{ port: 80, targetPort }] },
  });
  assert.equal((await admin(api, "PUT", "/api/v1/namespaces/shop/services/web", svc("http"))).status, 200);
  assert.equal((await admin(api, "PUT", "/api/v1/namespaces/shop/services/web", svc(8080))).status, 200);
  const frac = await admin(api, "PUT", "/api/v1/namespaces/shop/services/web", svc(80.5));
  assert.equal(frac.status, 400);
  assert.match(frac.body.message, /cannot unmarshal number 80\.5 into Go value of type int32/);
});

const POOLS = "/apis/passlb.io/v1alpha1/loadbalancerippools";
const pool = (extra: Record<string, unknown> = {}) => ({
  apiVersion: "passlb.io/v1alpha1",
  kind: "LoadBalancerIPPool",
  metadata: { name: "main" },
  spec: { addresses: ["203.0.113.0/28"] },
  ...extra,
});

test("custom resources (apiextensions pruning, defaulting, fieldValidation) by deploy/'s CRD", async (t) => {
  const api = await started(t);
  const made = await admin(
    api,
    "POST",
    POOLS,
    pool({ spec: { addresses: ["203.0.113.0/28"], colour: "blue" } }),
  );
  assert.equal(made.status, 201);
  assert.equal(made.body.spec.colour, undefined, "a field the schema lacks is pruned");
  assert.equal(made.body.spec.autoAssign, true, "schema defaults are applied");
  assert.deepEqual(made.warnings, ['299 - "unknown field \\"spec.colour\\""'], "Warn (the default) says so");
  const stored = api.put({ ...pool(), metadata: { name: "put" } });
  assert.deepEqual(
    [stored.spec, (await admin(api, "GET", `${POOLS}/put`)).body.spec.disabled],
    [{ addresses: ["203.0.113.0/28"], autoAssign: true, avoidBuggyIPs: false, disabled: false }, false],
    "objects put by a test read back defaulted, as from storage",
  );
  const status = { ipv4: { total: "16", used: 1, spare: 3 }, healthy: true };
  const written = await admin(api, "PUT", `${POOLS}/main/status`, { ...made.body, status });
  assert.equal(written.status, 200);
  assert.deepEqual(
    written.body.status,
    { ipv4: { total: "16", used: 1 } },
    "unknown status fields silently disappear",
  );
  const strict = await admin(api, "PUT", `${POOLS}/main/status?fieldValidation=Strict`, {
    ...written.body,
    status,
  });
  assert.equal(strict.status, 400);
  assert.equal(
    strict.body.message,
    'strict decoding error: unknown field "status.healthy", unknown field "status.ipv4.spare"',
  );
  const ignore = await admin(api, "PUT", `${POOLS}/main/status?fieldValidation=Ignore`, {
    ...written.body,
    status,
  });
  assert.deepEqual(ignore.warnings, []);
  const negative = await admin(api, "PUT", `${POOLS}/main/status`, {
    ...ignore.body,
    status: { ipv4: { total: "16", used: -1 } },
  });
  assert.equal(negative.status, 422, "the schema's minimum holds");
  assert.match(
    negative.body.message,
    /^LoadBalancerIPPool\.passlb\.io "main" is invalid: status\.ipv4\.used/,
  );
});

const SERVICE = "/api/v1/namespaces/shop/services/web";

test("Service status (core/validation ValidateLoadBalancerStatus, meta/v1 ValidateCondition)", async (t) => {
  const api = await started(t);
  api.put({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "shop" },
    spec: { type: "LoadBalancer" },
  });
  const write = async (status: Record<string, unknown>) => {
    const current = (await admin(api, "GET", SERVICE)).body;
    return admin(api, "PUT", `${SERVICE}/status`, { ...current, status });
  };
  const ingress = (...items: Record<string, unknown>[]) => ({ loadBalancer: { ingress: items } });
  assert.equal((await write(ingress({ ip: "203.0.113.10", ipMode: "VIP" }))).status, 200);
  const cases: [Record<string, unknown>, string][] = [
    [
      { ip: "203.0.113.300" },
      'status.loadBalancer.ingress[0].ip: Invalid value: "203.0.113.300": must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)',
    ],
    [
      { ip: "203.0.113.010" },
      'status.loadBalancer.ingress[0].ip: Invalid value: "203.0.113.010": must not have leading 0s',
    ],
    [
      { ip: "2001:DB8::1" },
      'status.loadBalancer.ingress[0].ip: Invalid value: "2001:DB8::1": must be in canonical form ("2001:db8::1")',
    ],
    [
      { hostname: "lb.example", ipMode: "VIP" },
      "status.loadBalancer.ingress[0].ipMode: Forbidden: may not be specified when `ip` is not set",
    ],
    [
      { ip: "203.0.113.10", ipMode: "Direct" },
      'status.loadBalancer.ingress[0].ipMode: Unsupported value: "Direct": supported values: "Proxy", "VIP"',
    ],
    [
      { hostname: "203.0.113.10" },
      'status.loadBalancer.ingress[0].hostname: Invalid value: "203.0.113.10": must be a DNS name, not an IP address',
    ],
  ];
  for (const [item, message] of cases) {
    const r = await write(ingress(item));
    assert.equal(r.status, 422, JSON.stringify(item));
    assert.equal(r.body.message, `Service "web" is invalid: ${message}`);
  }
  const condition = {
    type: "passlb.io/LoadBalancerReady",
    status: "True",
    lastTransitionTime: "2026-01-01T00:00:00Z",
    reason: "",
  };
  const noReason = await write({ conditions: [condition] });
  assert.equal(
    noReason.body.message,
    'Service "web" is invalid: status.conditions[0].reason: Required value',
  );
  const badReason = await write({ conditions: [{ ...condition, reason: "Address assigned" }] });
  assert.match(
    badReason.body.message,
    /status\.conditions\[0\]\.reason: Invalid value: "Address assigned": a condition reason must start/,
  );
  api.put({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "shop" },
    spec: { type: "ClusterIP" },
  });
  const notLb = await write(ingress({ ip: "203.0.113.10", ipMode: "VIP" }));
  assert.match(notLb.body.message, /may only be used when `spec.type` is 'LoadBalancer'/);
});

const SLICES = "/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices";
const slice = (extra: Record<string, unknown>) => ({
  metadata: { generateName: "web-", namespace: "shop", labels: { "kubernetes.io/service-name": "web" } },
  addressType: "IPv4",
  endpoints: [{ addresses: ["198.51.100.10"] }],
  ports: [{ name: "http", port: 8080, protocol: "TCP" }],
  ...extra,
});

test("EndpointSlice (discovery/validation/validation.go)", async (t) => {
  const api = await started(t);
  const ok = await admin(api, "POST", SLICES, slice({}));
  assert.equal(ok.status, 201);
  assert.match(
    ok.body.metadata.name,
    /^web-[bcdfghjklmnpqrstvwxz2456789]{5}$/,
    "generateName + five of apiserver's letters",
  );
  const refused = async (extra: Record<string, unknown>, pattern: RegExp) => {
    const r = await admin(api, "POST", SLICES, slice(extra));
    assert.equal(r.status, 422, JSON.stringify(extra).slice(0, 80));
    assert.match(r.body.message, pattern);
  };
  await refused(
    { endpoints: [{ addresses: ["2001:db8::1"] }] },
    /endpoints\[0\]\.addresses\[0\]: Invalid value: "2001:db8::1": must be a valid IPv4 address/,
  );
  await refused(
    { endpoints: [{ addresses: ["127.0.0.1"] }] },
    /may not be in the loopback range \(127\.0\.0\.0\/8, ::1\/128\)/,
  );
  await refused({ endpoints: [{ addresses: ["169.254.0.7"] }] }, /may not be in the link-local range/);
  await refused(
    { endpoints: [{ addresses: ["224.0.0.18"] }] },
    /may not be in the link-local multicast range/,
  );
  await refused({ endpoints: [{ addresses: ["0.0.0.0"] }] }, /may not be unspecified \(0\.0\.0\.0\)/);
  await refused({ addressType: "IPv6", endpoints: [{ addresses: ["fe80::1"] }] }, /link-local range/);
  await refused(
    { endpoints: [{ addresses: [] }] },
    /endpoints\[0\]\.addresses: Required value: must contain at least 1 address/,
  );
  const many = Array.from({ length: 1001 }, (_, i) => ({
    addresses: [`198.51.${100 + Math.floor(i / 250)}.${(i % 250) + 1}`],
  }));
  await refused({ endpoints: many }, /endpoints: Too many: 1001: must have at most 1000 items/);
  assert.equal(
    (await admin(api, "POST", SLICES, slice({ endpoints: many.slice(0, 1000) }))).status,
    201,
    "1000 is allowed",
  );
  const ports = Array.from({ length: 101 }, (_, i) => ({ name: `p${i}`, port: 1000 + i, protocol: "TCP" }));
  await refused({ ports }, /ports: Too many: 101: must have at most 100 items/);
  await refused(
    { ports: [{ name: "HTTP", port: 80, protocol: "TCP" }] },
    /ports\[0\]\.name: Invalid value: "HTTP": a lowercase RFC 1123 label/,
  );
  await refused(
    {
      ports: [
        { name: "a", port: 80, protocol: "TCP" },
        { name: "a", port: 81, protocol: "TCP" },
      ],
    },
    /ports\[1\]\.name: Duplicate value: "a"/,
  );
  await refused({ ports: [{ name: "a", port: 80 }] }, /ports\[0\]\.protocol: Required value/);
  await refused({ addressType: "IP" }, /addressType: Unsupported value: "IP"/);
  await refused(
    { metadata: { name: "Web_1", namespace: "shop" } },
    /EndpointSlice\.discovery\.k8s\.io "Web_1" is invalid: metadata\.name: Invalid value: "Web_1": a lowercase RFC 1123 subdomain/,
  );
  await refused(
    {
      metadata: {
        generateName: "web-",
        namespace: "shop",
        labels: { "kubernetes.io/service-name": "web/x" },
      },
    },
    /metadata\.labels: Invalid value: "web\/x": a valid label must be an empty string/,
  );
});

test("Event (core/validation/events.go), Lease (coordination/validation), names (apimachinery objectmeta.go)", async (t) => {
  const api = await started(t);
  const ev = (extra: Record<string, unknown>) => ({
    metadata: { generateName: "web.", namespace: "shop" },
    involvedObject: { kind: "Service", name: "web", namespace: "shop" },
    reason: "EnsuredLoadBalancer",
    ...extra,
  });
  assert.equal((await admin(api, "POST", "/api/v1/namespaces/shop/events", ev({}))).status, 201);
  const other = await admin(
    api,
    "POST",
    "/api/v1/namespaces/shop/events",
    ev({ involvedObject: { kind: "Service", name: "web", namespace: "other" } }),
  );
  assert.equal(other.status, 422);
  assert.match(
    other.body.message,
    /involvedObject\.namespace: Invalid value: "other": does not match event\.namespace/,
  );
  const pool = { kind: "LoadBalancerIPPool", name: "main" };
  assert.equal(
    (
      await admin(
        api,
        "POST",
        "/api/v1/namespaces/default/events",
        ev({ metadata: { generateName: "main." }, involvedObject: pool }),
      )
    ).status,
    201,
    "a cluster-scoped object's Event lives in default",
  );
  assert.equal(
    (await admin(api, "POST", "/api/v1/namespaces/shop/events", ev({ involvedObject: pool }))).status,
    422,
    "not in another namespace",
  );
  const micro = ev({
    eventTime: "2026-12-01T14:38:33.611000Z",
    reportingController: "passlb.io/controller",
    reportingInstance: "x".repeat(129),
    action: "Assign",
  });
  const long = await admin(api, "POST", "/api/v1/namespaces/shop/events", micro);
  assert.match(long.body.message, /reportingInstance: Invalid value: "": can have at most 128 characters/);
  const zero = await admin(api, "POST", LEASES, lease({ leaseDurationSeconds: 0 }));
  assert.equal(
    zero.body.message,
    'Lease.coordination.k8s.io "passlb-controller" is invalid: spec.leaseDurationSeconds: Invalid value: 0: must be greater than 0',
  );
  const upper = await admin(api, "POST", "/api/v1/namespaces/shop/services", {
    metadata: { name: "Web" },
    spec: { type: "ClusterIP" },
  });
  assert.match(
    upper.body.message,
    /^Service "Web" is invalid: metadata\.name: Invalid value: "Web": a DNS-1035 label must consist of lower case/,
  );
  const noName = await admin(api, "POST", LEASES, { metadata: {}, spec: {} });
  assert.equal(noName.status, 422);
  assert.match(noName.body.message, /metadata\.name: Required value: name or generateName is required/);
  const slash = await admin(api, "POST", "/api/v1/namespaces/shop/events", ev({ metadata: { name: "a/b" } }));
  assert.match(slash.body.message, /metadata\.name: Invalid value: "a\/b": may not contain '\/'/);
});
