import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import type { Pool, Service } from "../k8s/objects.ts";
import { parseIp } from "../net/ip.ts";
import { addressPools, poolAdmits, poolContains } from "./address-pools.ts";
import { assignVips, REQUESTED_IPS_ANNOTATION, SHARED_IP_ANNOTATION } from "./ipam.ts";

function service(
  i: number,
  opts: {
    key?: string | undefined;
    ports: number[];
    request?: number | undefined;
    ns?: string;
    status?: number | undefined;
  },
): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: `svc-${i}`,
      namespace: opts.ns ?? "default",
      annotations: {
        ...(opts.key !== undefined && { [SHARED_IP_ANNOTATION]: opts.key }),
        ...(opts.request !== undefined && { [REQUESTED_IPS_ANNOTATION]: `203.0.113.${opts.request}` }),
      },
    },
    spec: { type: "LoadBalancer", ports: opts.ports.map((port) => ({ port, protocol: "TCP" as const })) },
    ...(opts.status !== undefined && {
      status: { loadBalancer: { ingress: [{ ip: `203.0.113.${opts.status}` }] } },
    }),
  };
}

const pool = (name: string, addresses: string[], extra: Partial<Pool> = {}): Pool => ({
  name,
  addresses,
  autoAssign: true,
  avoidBuggyIPs: false,
  ...extra,
});

const serviceArb = fc.record({
  key: fc.option(fc.constantFrom("a", "b"), { nil: undefined }),
  ports: fc.uniqueArray(fc.constantFrom(53, 80, 443), { minLength: 1, maxLength: 2 }),
  request: fc.option(fc.integer({ min: 1, max: 8 }), { nil: undefined }),
  status: fc.option(fc.integer({ min: 1, max: 8 }), { nil: undefined }),
  ns: fc.constantFrom("default", "team"),
});

test("property: IPAM never hands one address to clashing Services, and only from pools that admit them", () => {
  fc.assert(
    fc.property(fc.array(serviceArb, { maxLength: 12 }), (specs) => {
      const services = specs.map((s, i) => service(i, s));
      const pools = addressPools([
        pool("small", ["203.0.113.1-203.0.113.4"]),
        pool("team", ["203.0.113.5-203.0.113.6"], { namespaces: ["team"] }),
      ]);
      const result = assignVips(services, pools);
      const holders = new Map<string, Service[]>();
      for (const svc of services) {
        const a = result.get(`${svc.metadata.namespace}/${svc.metadata.name}`)!;
        for (const vip of a.vips) {
          const p = pools.find((x) => x.name === vip.pool)!;
          assert.ok(
            poolContains(p, parseIp(vip.address)!) && poolAdmits(p, svc),
            `${vip.address} from a pool that does not admit it`,
          );
          holders.set(vip.address, [...(holders.get(vip.address) ?? []), svc]);
        }
        if (a.vips.length === 0)
          assert.ok(
            a.issues.some((i) => i.severity === "error"),
            "no VIP and no error",
          );
      }
      for (const [address, list] of holders) {
        if (list.length < 2) continue;
        const keys = new Set(list.map((s) => s.metadata.annotations?.[SHARED_IP_ANNOTATION]));
        assert.equal(keys.size, 1, `${address} shared across keys`);
        assert.ok(!keys.has(undefined), `${address} shared without a key`);
        const ports = list.flatMap((s) => s.spec.ports.map((p) => `${p.protocol}/${p.port}`));
        assert.equal(new Set(ports).size, ports.length, `${address}: port clash`);
      }
    }),
  );
});

test("property: the same input gives the same assignment, whatever the input order", () => {
  fc.assert(
    fc.property(fc.array(serviceArb, { maxLength: 10 }), (specs) => {
      const services = specs.map((s, i) => service(i, s));
      const pools = addressPools([pool("p", ["203.0.113.1-203.0.113.8"])]);
      const forward = assignVips(services, pools);
      const backward = assignVips([...services].reverse(), pools);
      for (const [k, v] of forward) assert.deepEqual(backward.get(k)?.vips, v.vips);
    }),
  );
});

test("a Service keeps its status address even when a lower one is free", () => {
  const result = assignVips(
    [service(1, { ports: [80], status: 7 })],
    addressPools([pool("p", ["203.0.113.1-203.0.113.8"])]),
  );
  assert.deepEqual(
    result.get("default/svc-1")?.vips.map((v) => [v.address, v.source]),
    [["203.0.113.7", "status"]],
  );
});

test("exhaustion is an error on the Service that found no address, not on the others", () => {
  const pools = addressPools([pool("p", ["203.0.113.1-203.0.113.1"])]);
  const result = assignVips([service(1, { ports: [80] }), service(2, { ports: [80] })], pools);
  assert.equal(result.get("default/svc-1")?.issues.length, 0);
  assert.deepEqual(
    result.get("default/svc-2")?.issues.map((i) => i.code),
    ["pool_exhausted"],
  );
});
