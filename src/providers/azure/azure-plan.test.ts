import assert from "node:assert/strict";
import { describe, test } from "node:test";
import fc from "fast-check";
import { type Service, ServiceSchema } from "../../k8s/objects.ts";
import { emptySnapshot } from "../../k8s/snapshot.ts";
import { flagOn, nonexistentProbeKeys, parseWholeNumber } from "./azure-annotations.ts";
import { AZURE_DEFAULTS, type AzureServicePlanOk } from "./azure-model.ts";
import { ruleName, rulePrefix } from "./azure-names.ts";
import { placeholderUid, planAzure, planAzureService } from "./azure-plan.ts";
import { portProbe, probeTiming } from "./azure-probes.ts";

const UID = "8c2f5a10-4b3e-4d8a-9f61-2e7c0b9d1a35";
const A = "service.beta.kubernetes.io/";

interface RawService {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace: string; uid: string; annotations: Record<string, string> };
  spec: Record<string, unknown>;
}

/** A LoadBalancer Service on TCP 80 (nodePort 30080), changed by `mutate`. */
function service(mutate: (s: RawService) => void = () => {}): Service {
  const raw: RawService = {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "web", namespace: "default", uid: UID, annotations: {} },
    spec: { type: "LoadBalancer", ports: [{ name: "http", port: 80, nodePort: 30080 }] },
  };
  mutate(raw);
  return ServiceSchema.parse(raw);
}
const annotated = (annotations: Record<string, string>) =>
  service((s) => {
    s.metadata.annotations = Object.fromEntries(Object.entries(annotations).map(([k, v]) => [A + k, v]));
  });

describe("annotation readers", () => {
  test("whole numbers are trimmed base-10 int32 values, like Go's ParseInt(TrimSpace(v), 10, 32)", () => {
    assert.equal(parseWholeNumber(" 10 "), 10);
    assert.equal(parseWholeNumber("+7"), 7);
    assert.equal(parseWholeNumber("-3"), -3);
    assert.equal(parseWholeNumber("2147483647"), 2147483647);
    assert.equal(parseWholeNumber("2147483648"), undefined);
    for (const bad of ["", "5s", "1.5", "0x10", "1e2", "five"])
      assert.equal(parseWholeNumber(bad), undefined, bad);
  });
  test("flags are on for true in any letter case and off for anything else", () => {
    for (const v of ["true", "TRUE", "True"]) assert.ok(flagOn(annotated({ x: v }), `${A}x`), v);
    for (const v of ["yes", "1", " true", ""]) assert.ok(!flagOn(annotated({ x: v }), `${A}x`), v);
    assert.ok(!flagOn(service(), `${A}x`));
  });
  test("threshold annotations that do not exist are spotted", () => {
    const s = annotated({
      "port_80_health-probe_threshold": "3",
      "azure-load-balancer-health-probe-probe-threshold": "3",
      "port_80_health-probe_num-of-probe": "3",
    });
    assert.deepEqual(nonexistentProbeKeys(s).sort(), [
      `${A}azure-load-balancer-health-probe-probe-threshold`,
      `${A}port_80_health-probe_threshold`,
    ]);
  });
});

describe("names (spec §2)", () => {
  test("the prefix is a + the UID without dashes, cut to 32 characters", () => {
    assert.equal(rulePrefix(UID), "a8c2f5a104b3e4d8a9f612e7c0b9d1a3");
    assert.equal(rulePrefix("short-uid"), "ashortuid");
  });
  test("rule names fit 75 characters whatever the internal subnet, so -IPv6 keeps them within 80", () => {
    fc.assert(
      fc.property(
        fc.string({ minLength: 1, maxLength: 120 }).filter((s) => s.trim() !== ""),
        fc.integer({ min: 1, max: 65535 }),
        fc.constantFrom("TCP" as const, "UDP" as const, "SCTP" as const),
        (subnet, port, protocol) => {
          const s = annotated({
            "azure-load-balancer-internal": "true",
            "azure-load-balancer-internal-subnet": subnet,
          });
          const v4 = ruleName(
            { service: s, prefix: rulePrefix(UID), family: "IPv4", dualStack: true },
            protocol,
            port,
          );
          const v6 = ruleName(
            { service: s, prefix: rulePrefix(UID), family: "IPv6", dualStack: true },
            protocol,
            port,
          );
          assert.ok(v4.length <= 75, v4);
          assert.equal(v6, `${v4}-IPv6`);
          assert.ok(v4.endsWith(`-${protocol}-${port}`));
        },
      ),
      { numRuns: 200 },
    );
  });
  test("a placeholder UID is stable and UUID-shaped", () => {
    assert.equal(placeholderUid(service()), placeholderUid(service()));
    assert.match(placeholderUid(service()), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    const other = service((s) => {
      s.metadata.name = "other";
    });
    assert.notEqual(placeholderUid(other), placeholderUid(service()));
  });
});

describe("probe timing (spec §4.4)", () => {
  test("accepted exactly when interval ≥ 5, num-of-probe ≥ 2 and interval × num < 120", () => {
    fc.assert(
      fc.property(fc.integer({ min: -5, max: 80 }), fc.integer({ min: -2, max: 40 }), (interval, num) => {
        const s = annotated({
          "port_80_health-probe_interval": String(interval),
          "port_80_health-probe_num-of-probe": String(num),
        });
        const result = probeTiming(s, 80);
        assert.equal(result.ok, interval >= 5 && num >= 2 && interval * num < 120);
        if (result.ok) {
          assert.equal(result.value.interval.value, interval);
          assert.equal(result.value.threshold.value, num);
        } else if (num < 2) assert.equal(result.failure.code, "invalid_probe_num_of_probe");
        else if (interval < 5) assert.equal(result.failure.code, "invalid_probe_interval");
        else assert.equal(result.failure.code, "probe_window_too_long");
      }),
      { numRuns: 300 },
    );
  });
  test("num-of-probe is checked before interval", () => {
    const r = probeTiming(
      annotated({
        "azure-load-balancer-health-probe-interval": "x",
        "port_80_health-probe_num-of-probe": "y",
      }),
      80,
    );
    assert.ok(!r.ok && r.failure.code === "invalid_probe_num_of_probe" && r.failure.value === "y");
  });
});

describe("per-port probe (spec §4)", () => {
  const ctx = { sku: "Standard" as const, nodeEndpoint: false, shared: false };
  test("UDP ports get no probe and their annotations are not read", () => {
    const s = service((x) => {
      x.spec.ports = [{ name: "dns", port: 53, protocol: "UDP", nodePort: 30053 }];
      x.metadata.annotations = { [`${A}port_53_health-probe_port`]: "nope" };
    });
    const r = portProbe(s, s.spec.ports[0]!, "n", ctx, { explain: [], warn: [] });
    assert.deepEqual(r, { ok: true, value: null });
  });
  test("shared mode reads nothing, not even an invalid probe port", () => {
    const s = annotated({ "port_80_health-probe_port": "nope" });
    assert.deepEqual(
      portProbe(s, s.spec.ports[0]!, "n", { ...ctx, shared: true }, { explain: [], warn: [] }),
      {
        ok: true,
        value: null,
      },
    );
  });
  test("with a node-endpoint probe, only a port override yields a probe of its own", () => {
    const plain = service();
    const notes = { explain: [], warn: [] };
    assert.deepEqual(portProbe(plain, plain.spec.ports[0]!, "n", { ...ctx, nodeEndpoint: true }, notes), {
      ok: true,
      value: null,
    });
    const over = annotated({ "port_80_health-probe_port": "10256" });
    const r = portProbe(over, over.spec.ports[0]!, "n", { ...ctx, nodeEndpoint: true }, notes);
    assert.ok(r.ok && r.value?.properties.port === 10256);
  });
});

describe("planAzure", () => {
  test("a manifest without nodePort is told the API server would allocate one", () => {
    const s = service((x) => {
      x.spec.ports = [{ name: "http", port: 80 }];
    });
    const plan = planAzureService(s, AZURE_DEFAULTS);
    assert.ok(
      plan.warnings.some((w) =>
        /port 80\/TCP has no nodePort in the manifest: the API server would allocate one/.test(w),
      ),
    );
    assert.ok(!plan.warnings.some((w) => /allocateLoadBalancerNodePorts/.test(w)));
  });
  test("only LoadBalancer Services, sorted by namespace/name", () => {
    const b = service((s) => {
      s.metadata.name = "b";
    });
    const a = service((s) => {
      s.metadata.name = "a";
      s.metadata.namespace = "z";
    });
    const c = service((s) => {
      s.metadata.name = "c";
      s.spec.type = "ClusterIP";
      s.spec.ports = [{ port: 80 }];
    });
    const plans = planAzure({ ...emptySnapshot(), services: [a, b, c] }, AZURE_DEFAULTS);
    assert.deepEqual(
      plans.map((p) => p.service),
      ["default/b", "z/a"],
    );
  });
  test("every rule's probe id names a probe of the plan (Standard, every probe mode and policy)", () => {
    fc.assert(
      fc.property(
        fc.constantFrom("Standard" as const, "Basic" as const),
        fc.constantFrom("servicenodeport" as const, "shared" as const),
        fc.boolean(),
        fc.boolean(),
        fc.subarray(["TCP", "UDP"] as const, { minLength: 1 }),
        (sku, probeMode, local, dual, protocols) => {
          const s = service((x) => {
            x.spec.ports = protocols.map((p, i) => ({
              name: `p${i}`,
              port: 100 + i,
              protocol: p,
              nodePort: 30100 + i,
            }));
            if (local) {
              x.spec.externalTrafficPolicy = "Local";
              x.spec.healthCheckNodePort = 32000;
            }
            if (dual) {
              x.spec.ipFamilies = ["IPv4", "IPv6"];
              x.spec.ipFamilyPolicy = "RequireDualStack";
            }
          });
          const plan = planAzureService(s, { ...AZURE_DEFAULTS, sku, probeMode }) as AzureServicePlanOk;
          assert.ok(!("error" in plan));
          const names = new Set(plan.probes.map((p) => p.name));
          assert.equal(names.size, plan.probes.length, "probe names are unique");
          for (const r of plan.loadBalancingRules)
            if (r.properties.probe) assert.ok(names.has(r.properties.probe.id.split("/").at(-1)!), r.name);
          assert.equal(plan.loadBalancingRules.length, protocols.length * (dual ? 2 : 1));
        },
      ),
      { numRuns: 60 },
    );
  });
});
