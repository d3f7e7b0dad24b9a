/**
 * What the controller's API adapters put on the wire for every metav1.MicroTime and
 * metav1.Time field, read from the request bytes client-node's generated APIs send (their
 * ObjectSerializer, then JSON.stringify) to a recording HTTP server on 127.0.0.1:
 *   - MicroTime (Lease acquireTime, renewTime): RFC 3339 with exactly six fractional digits
 *     (apimachinery pkg/apis/meta/v1/micro_time.go, RFC3339Micro = "2006-01-02T15:04:05.000000Z07:00");
 *   - Time (Event firstTimestamp/lastTimestamp, condition lastTransitionTime, metadata
 *     timestamps read back and written again): RFC 3339 to the second (time.go, MarshalJSON
 *     formats time.RFC3339).
 * The patterns are the formats' own; the millisecond form JavaScript's toISOString writes
 * is what kube-apiserver refused for the Lease (issue #14) and fails here.
 */
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { test } from "node:test";
import { KubeConfig, V1MicroTime } from "@kubernetes/client-node";
import { ObjectSerializer } from "@kubernetes/client-node/dist/gen/models/ObjectSerializer.js";
import type { Service } from "../k8s/objects.ts";
import { setCondition } from "./conditions.ts";
import { controllerEvent } from "./controller-events.ts";
import {
  eventBody,
  KubeControllerApi,
  KubeLeaseApi,
  KubeTime,
  leaseSpec,
  plain,
} from "./kube-controller-api.ts";
import { microTime } from "./leader-election.ts";

const MICRO_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
const TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$/;
const NOW = Date.UTC(2026, 11, 1, 14, 38, 33, 611);

interface Seen {
  readonly method: string;
  readonly path: string;
  // biome-ignore lint/suspicious/noExplicitAny: request JSON, read only in assertions
  readonly body: any;
}

/** Answers every request with its own body (plus a resourceVersion), or `answers[path]` for a GET. */
async function recorder(
  t: { after: (fn: () => Promise<void>) => void },
  answers: Record<string, unknown> = {},
) {
  const seen: Seen[] = [];
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", () => {
      const text = Buffer.concat(chunks).toString("utf8");
      const path = (req.url ?? "").split("?")[0] ?? "";
      const body = text === "" ? undefined : JSON.parse(text);
      seen.push({ method: req.method ?? "", path, body });
      const answer =
        req.method === "GET"
          ? answers[path]
          : { ...body, metadata: { ...body?.metadata, resourceVersion: "2" } };
      res.writeHead(answer === undefined ? 404 : req.method === "POST" ? 201 : 200, {
        "content-type": "application/json",
      });
      res.end(JSON.stringify(answer ?? { kind: "Status", code: 404, message: "not found" }));
    });
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", () => r()));
  t.after(() => new Promise<void>((r) => server.close(() => r())));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [
      {
        name: "rec",
        server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
        skipTLSVerify: true,
      },
    ],
    users: [{ name: "rec" }],
    contexts: [{ name: "rec", cluster: "rec", user: "rec" }],
    currentContext: "rec",
  });
  return { kc, seen };
}

test("Lease create and update: acquireTime and renewTime as MicroTime, six fractional digits", async (t) => {
  const { kc, seen } = await recorder(t);
  const api = new KubeLeaseApi(kc, "passlb-system", "passlb-controller");
  const spec = {
    holderIdentity: "a",
    leaseDurationSeconds: 15,
    acquireTime: microTime(NOW),
    renewTime: microTime(NOW + 2_000),
    leaseTransitions: 0,
  };
  await api.create(spec);
  await api.replace({ ...spec, renewTime: microTime(NOW + 4_000) }, "1");
  assert.deepEqual(
    seen.map((s) => s.method),
    ["POST", "PUT"],
  );
  for (const s of seen) {
    assert.match(s.body.spec.acquireTime, MICRO_TIME, `${s.method} acquireTime`);
    assert.match(s.body.spec.renewTime, MICRO_TIME, `${s.method} renewTime`);
  }
  assert.equal(seen[0]?.body.spec.acquireTime, "2026-12-01T14:38:33.611000Z");
  assert.equal(seen[1]?.body.spec.renewTime, "2026-12-01T14:38:37.611000Z");
});

test("the check above fails the millisecond form the Lease was refused for", () => {
  // what a Date in the same field serialises to (ObjectSerializer → toISOString)
  const asDate = JSON.stringify(ObjectSerializer.serialize({ renewTime: new Date(NOW) }, "V1LeaseSpec", ""));
  assert.doesNotMatch(JSON.parse(asDate).renewTime, MICRO_TIME);
  const asMicro = JSON.stringify(
    ObjectSerializer.serialize(leaseSpec({ renewTime: microTime(NOW) }), "V1LeaseSpec", ""),
  );
  assert.match(JSON.parse(asMicro).renewTime, MICRO_TIME);
  assert.ok(new V1MicroTime(NOW).toISOString().endsWith(".611000Z"));
});

test("Event create: firstTimestamp and lastTimestamp as Time, to the second; no eventTime", async (t) => {
  const { kc, seen } = await recorder(t);
  const api = new KubeControllerApi(kc, { component: "passlb-controller", instance: "a" });
  const target = { kind: "Service" as const, apiVersion: "v1", namespace: "shop", name: "web", uid: "u1" };
  await api.recordEvent(controllerEvent(target, "EnsuredLoadBalancer", "Ensured load balancer"), NOW);
  const body = seen[0]?.body;
  assert.equal(seen[0]?.path, "/api/v1/namespaces/shop/events");
  assert.equal(body.firstTimestamp, "2026-12-01T14:38:33Z");
  assert.match(body.lastTimestamp, TIME);
  assert.equal(body.eventTime, undefined, "core/v1 Events of the legacy form carry no MicroTime");
  // and the pure body, through the serialiser on its own
  const serialised = JSON.parse(
    JSON.stringify(
      ObjectSerializer.serialize(
        eventBody(controllerEvent(target, "EnsuredLoadBalancer", "x"), NOW, {
          component: "c",
          instance: "i",
        }),
        "CoreV1Event",
        "",
      ),
    ),
  );
  assert.match(serialised.firstTimestamp, TIME);
});

test("Service status: a new condition's lastTransitionTime and the times read back are written to the second", async (t) => {
  const server = {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: "web",
      namespace: "shop",
      resourceVersion: "7",
      creationTimestamp: "2026-11-30T08:00:00Z",
    },
    spec: { type: "LoadBalancer", ports: [{ port: 80, protocol: "TCP" }] },
    status: {
      conditions: [
        {
          type: "example.com/Other",
          status: "True",
          reason: "Fine",
          message: "kept",
          lastTransitionTime: "2026-11-30T09:00:00Z",
        },
      ],
    },
  };
  const { kc, seen } = await recorder(t, { "/api/v1/namespaces/shop/services/web": server });
  const api = new KubeControllerApi(kc, { component: "passlb-controller", instance: "a" });
  const read = (await api.readService("shop", "web")) as Service;
  // client-node turned the Times into Dates; they come back as the server wrote them
  assert.equal(read.metadata.creationTimestamp, "2026-11-30T08:00:00Z");
  const conditions = setCondition(
    read.status?.conditions,
    { type: "passlb.io/LoadBalancerReady", status: "True", reason: "AddressAssigned", message: "ok" },
    NOW,
  );
  await api.replaceServiceStatus({ ...read, status: { ...read.status, conditions } });
  const body = seen.find((s) => s.method === "PUT")?.body;
  assert.equal(body.metadata.creationTimestamp, "2026-11-30T08:00:00Z");
  assert.deepEqual(
    body.status.conditions.map((c: { lastTransitionTime: string }) => c.lastTransitionTime),
    ["2026-11-30T09:00:00Z", "2026-12-01T14:38:33Z"],
  );
});

test("plain(): a Time Date to the second, a MicroTime kept at six digits, strings untouched", () => {
  const out = plain({
    t: new Date(NOW),
    m: new V1MicroTime(NOW),
    k: new KubeTime(NOW),
    s: "2026-12-01T14:38:33.611Z",
    nested: [{ t: new Date(NOW) }],
  }) as Record<string, unknown>;
  assert.deepEqual(out, {
    t: "2026-12-01T14:38:33Z",
    m: "2026-12-01T14:38:33.611000Z",
    k: "2026-12-01T14:38:33Z",
    s: "2026-12-01T14:38:33.611Z",
    nested: [{ t: "2026-12-01T14:38:33Z" }],
  });
});

test("pool status: conditions' lastTransitionTime to the second", async (t) => {
  const { kc, seen } = await recorder(t);
  const api = new KubeControllerApi(kc, { component: "passlb-controller", instance: "a" });
  const conditions = setCondition(
    [],
    { type: "passlb.io/PoolReady", status: "True", reason: "Ready", message: "IPAM assigns addresses" },
    NOW,
  );
  await api.replacePoolStatus({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name: "main", resourceVersion: "3" },
    spec: { addresses: ["203.0.113.10/31"] },
    status: { conditions, ipv4: { total: "2", used: 0 } },
  } as never);
  const put = seen.find((s) => s.method === "PUT");
  assert.equal(put?.path, "/apis/passlb.io/v1alpha1/loadbalancerippools/main/status");
  assert.match(put?.body.status.conditions[0].lastTransitionTime, TIME);
});

test("EndpointSlices carry no time field of passlb's: the metadata read from the server goes back unchanged", () => {
  const slice = {
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: "web-abcde", namespace: "shop", creationTimestamp: "2026-11-30T08:00:00Z" },
    addressType: "IPv4",
    endpoints: [{ addresses: ["198.51.100.5"], conditions: { ready: true } }],
    ports: [{ port: 8080, protocol: "TCP" }],
  };
  const sent = JSON.parse(JSON.stringify(ObjectSerializer.serialize(slice, "V1EndpointSlice", "")));
  assert.equal(sent.metadata.creationTimestamp, "2026-11-30T08:00:00Z");
  const times = JSON.stringify(sent).match(/\d{4}-\d{2}-\d{2}T[^"]*/g);
  assert.deepEqual(times, ["2026-11-30T08:00:00Z"], "no other time on the wire");
});
