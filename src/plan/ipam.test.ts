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

const FOREIGN_KEYS = [
  (k: string) => ({ "metallb.io/allow-shared-ip": k }),
  (k: string) => ({ "metallb.universe.tf/allow-shared-ip": k }),
  (k: string) => ({ "lbipam.cilium.io/sharing-key": k }),
  (k: string) => ({ "purelb.io/allow-shared-ip": k }),
  (k: string) => ({ [SHARED_IP_ANNOTATION]: k }),
];
const FOREIGN_IPS = [
  "metallb.io/loadBalancerIPs",
  "lbipam.cilium.io/ips",
  "kube-vip.io/loadbalancerIPs",
  "eip.openelb.kubesphere.io/v1alpha1",
  REQUESTED_IPS_ANNOTATION,
];

const foreignArb = fc.record({
  key: fc.option(fc.tuple(fc.integer({ min: 0, max: 4 }), fc.constantFrom("a", "b")), { nil: undefined }),
  ips: fc.option(fc.tuple(fc.integer({ min: 0, max: 4 }), fc.integer({ min: 1, max: 6 })), {
    nil: undefined,
  }),
  ports: fc.uniqueArray(fc.constantFrom("TCP/53", "UDP/53", "TCP/80"), { minLength: 1, maxLength: 2 }),
  status: fc.option(fc.integer({ min: 1, max: 6 }), { nil: undefined }),
  ns: fc.constantFrom("default", "team"),
});

test("property: with every tool's keys, no address is held across sharing keys or by two Services on one protocol/port, nor one another Service shows, and order does not matter", () => {
  fc.assert(
    fc.property(
      fc.array(foreignArb, { maxLength: 10 }),
      fc.integer({ min: 1, max: 6 }),
      (specs, shownByOther) => {
        const services: Service[] = specs.map((s, i) => ({
          apiVersion: "v1",
          kind: "Service",
          metadata: {
            name: `svc-${i}`,
            namespace: s.ns,
            annotations: {
              ...(s.key && FOREIGN_KEYS[s.key[0]]!(s.key[1])),
              ...(s.ips && { [FOREIGN_IPS[s.ips[0]]!]: `203.0.113.${s.ips[1]}` }),
            },
          },
          spec: {
            type: "LoadBalancer",
            ports: s.ports.map((p) => ({
              port: Number(p.split("/")[1]),
              protocol: p.split("/")[0] as "TCP" | "UDP",
            })),
          },
          ...(s.status !== undefined && {
            status: { loadBalancer: { ingress: [{ ip: `203.0.113.${s.status}` }] } },
          }),
        }));
        const other: Service = {
          ...service(99, { ports: [443], status: shownByOther }),
          spec: {
            type: "LoadBalancer",
            loadBalancerClass: "example.com/lb",
            ports: [{ port: 443, protocol: "TCP" }],
          },
        };
        const pools = addressPools([pool("p", ["203.0.113.1-203.0.113.6"])]);
        const result = assignVips(services, pools, { others: [other] });
        const holders = new Map<string, string[]>();
        for (const [name, a] of result)
          for (const v of a.vips) holders.set(v.address, [...(holders.get(v.address) ?? []), name]);
        assert.ok(
          !holders.has(`203.0.113.${shownByOther}`),
          "an address another Service shows was handed out",
        );
        for (const [address, names] of holders) {
          if (names.length < 2) continue;
          const ids = new Set(names.map((n) => result.get(n)?.request?.sharing?.id));
          assert.equal(ids.size, 1, `${address} shared across sharing keys`);
          assert.ok(!ids.has(undefined), `${address} shared without a key`);
          const pairs = names.flatMap((n) => {
            const svc = services.find((s) => `${s.metadata.namespace}/${s.metadata.name}` === n)!;
            return svc.spec.ports.map((p) => `${p.protocol}/${p.port}`);
          });
          assert.equal(new Set(pairs).size, pairs.length, `${address}: a protocol/port pair twice`);
        }
        const backward = assignVips([...services].reverse(), pools, { others: [other] });
        for (const [k, v] of result) assert.deepEqual(backward.get(k)?.vips, v.vips);
      },
    ),
  );
});
