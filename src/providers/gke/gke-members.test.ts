import assert from "node:assert/strict";
import { test } from "node:test";
import fc from "fast-check";
import {
  type EndpointSlice,
  EndpointSliceSchema,
  type Node,
  NodeSchema,
  ServiceSchema,
} from "../../k8s/objects.ts";
import { chooseController } from "./gke-controller-choice.ts";
import { gkeFlags } from "./gke-flags.ts";
import {
  CURRENT_NEG_MEMBERS_ANNOTATION,
  countSliceEndpoints,
  parseCurrentNegMembers,
  planMembers,
} from "./gke-members.ts";
import { parseGkeVersion } from "./gke-version.ts";

const node = (name: string, labels: Record<string, string> = {}): Node =>
  NodeSchema.parse({
    apiVersion: "v1",
    kind: "Node",
    metadata: { name, labels },
    spec: { providerID: `gce://p/zone-a/${name}`, podCIDR: "10.0.0.0/24" },
    status: { conditions: [{ type: "Ready", status: "True" }] },
  });

const slice = (family: "IPv4" | "IPv6", nodes: string[], terminating = false): EndpointSlice =>
  EndpointSliceSchema.parse({
    apiVersion: "discovery.k8s.io/v1",
    kind: "EndpointSlice",
    metadata: { name: `s-${family}`, namespace: "ns", labels: { "kubernetes.io/service-name": "s" } },
    addressType: family,
    endpoints: nodes.map((n, i) => ({
      addresses: [family === "IPv4" ? `10.1.0.${i + 1}` : `fd00::${i + 1}`],
      conditions: { ready: true, terminating },
      nodeName: n,
      targetRef: { kind: "Pod", name: `p${i}` },
    })),
    ports: [{ name: "", port: 80, protocol: "TCP" }],
  });

test("E counts every slice: a dual-stack Service counts each pod twice; terminating ones not at all", () => {
  assert.equal(countSliceEndpoints([slice("IPv4", ["a", "b"]), slice("IPv6", ["a", "b"])]), 4);
  assert.equal(countSliceEndpoints([slice("IPv4", ["a"], true)]), 0);
});

test("the current-members annotation parses zones and node lists, ignoring blanks", () => {
  assert.deepEqual(
    [...parseCurrentNegMembers(" zone-a = n1, n2 ;zone-b=;;bad")],
    [
      ["zone-a", ["n1", "n2"]],
      ["zone-b", []],
    ],
  );
});

test("enable-l4-neg-local-include-drain-nodes keeps a drain-labelled node that hosts a pod, nothing else", () => {
  const v = parseGkeVersion("1.37.1-gke.1")!;
  const service = ServiceSchema.parse({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "s", namespace: "ns", uid: "u" },
    spec: { type: "LoadBalancer", externalTrafficPolicy: "Local", ports: [{ port: 80 }] },
  });
  const nodes = [
    node("drain-pod", { "operation.gke.io/type": "drain" }),
    node("drain-master", { "operation.gke.io/type": "drain", "node-role.kubernetes.io/master": "" }),
  ];
  const slices = [slice("IPv4", ["drain-pod", "drain-master"])];
  const plan = (flag: boolean) => {
    const options = {
      version: v,
      flags: gkeFlags(v, { "enable-l4-neg-local-include-drain-nodes": flag }),
      subnetIpv6: "both" as const,
    };
    const members = planMembers(chooseController(service, options), service, nodes, slices, options, {
      neg: "neg",
      instanceGroup: "ig",
    });
    return members.nodes.filter((d) => d.member).map((d) => d.name);
  };
  assert.deepEqual(plan(false), []);
  assert.deepEqual(plan(true), ["drain-pod"]);
});

test("property: an ILB's NEG members survive unrelated nodes joining and leaving (prior state fed back)", () => {
  const v = parseGkeVersion("1.37.1-gke.1")!;
  const options = { version: v, flags: gkeFlags(v), subnetIpv6: "both" as const };
  const members = (names: readonly string[], current?: string) => {
    const service = ServiceSchema.parse({
      apiVersion: "v1",
      kind: "Service",
      metadata: {
        name: "s",
        namespace: "ns",
        uid: "u",
        annotations: {
          "networking.gke.io/load-balancer-type": "Internal",
          ...(current ? { [CURRENT_NEG_MEMBERS_ANNOTATION]: current } : {}),
        },
      },
      spec: { type: "LoadBalancer", ports: [{ port: 80 }] },
    });
    const plan = planMembers(
      chooseController(service, options),
      service,
      names.map((n) => node(n)),
      [],
      options,
      {
        neg: "neg",
        instanceGroup: "ig",
      },
    );
    return plan.nodes.filter((d) => d.member).map((d) => d.name);
  };
  const name = fc.stringMatching(/^[a-z][a-z0-9-]{0,10}$/);
  fc.assert(
    fc.property(
      // more nodes than the 24 wanted, so joiners with low hashes would displace members without stickiness
      fc.uniqueArray(name, { minLength: 25, maxLength: 60 }),
      fc.uniqueArray(name, { minLength: 1, maxLength: 20 }),
      fc.nat(),
      (base, joiners, seed) => {
        const before = members(base);
        const outsiders = base.filter((n) => !before.includes(n));
        const leaving = new Set(outsiders.filter((_, i) => (seed >> (i % 30)) & 1));
        const next = [...base.filter((n) => !leaving.has(n)), ...joiners.filter((n) => !base.includes(n))];
        const after = members(next, `zone-a=${before.join(",")}`);
        assert.ok(
          before.every((n) => after.includes(n)),
          `lost ${before.filter((n) => !after.includes(n))}`,
        );
        assert.equal(after.length, Math.min(24, next.length));
      },
    ),
    { numRuns: 150 },
  );
});
