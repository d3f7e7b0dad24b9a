/**
 * Table tests of the request reader and the sharing rules, one table per origin, built from
 * the cases from upstream (MetalLB usage docs and controller/service.go, Cilium
 * lb-ipam.rst and service_store.go, kube-vip pkg/utils/ip.go, PureLB allocator.go, OpenELB
 * ipam.go). Each row: annotations (and spec fields) in, the request summary out.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import type { Pool, Service } from "../k8s/objects.ts";
import { formatIp } from "../net/ip.ts";
import { addressPools } from "./address-pools.ts";
import { addressRequest } from "./address-request.ts";
import { assignVips } from "./ipam.ts";

type Spec = Partial<Service["spec"]>;

function svc(
  name: string,
  annotations: Record<string, string>,
  spec: Spec = {},
  extra: { ns?: string; status?: string[]; created?: string } = {},
): Service {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name,
      namespace: extra.ns ?? "default",
      annotations,
      ...(extra.created && { creationTimestamp: extra.created }),
    },
    spec: { type: "LoadBalancer", ports: [{ port: 80, protocol: "TCP" }], ...spec },
    ...(extra.status && { status: { loadBalancer: { ingress: extra.status.map((ip) => ({ ip })) } } }),
  };
}

interface Row {
  readonly name: string;
  readonly annotations: Record<string, string>;
  readonly spec?: Spec;
  readonly addresses?: string[];
  readonly pool?: string;
  readonly sharing?: string;
  readonly refused?: boolean;
  /** codes of the findings, in order */
  readonly codes?: string[];
  /** `key=use` of the foreign keys read */
  readonly uses?: string[];
}

function check(rows: readonly Row[]): void {
  for (const row of rows) {
    const r = addressRequest(svc("s", row.annotations, row.spec ?? {}));
    const got = {
      addresses: r.addresses.map(formatIp),
      pool: r.pool?.name,
      sharing: r.sharing?.id,
      refused: r.refused,
      codes: r.issues.map((i) => i.code),
      uses: r.keys.map((k) => `${k.key}=${k.use}`),
    };
    const want = {
      addresses: row.addresses ?? [],
      pool: row.pool,
      sharing: row.sharing,
      refused: row.refused ?? false,
      codes: row.codes ?? [],
      uses: row.uses ?? got.uses,
    };
    assert.deepEqual(got, want, row.name);
  }
}

test("MetalLB keys: current and deprecated prefix, ≤1 address per family, annotation vs spec.loadBalancerIP", () => {
  check([
    {
      name: "dual-stack request (website usage: required for dual-stack)",
      annotations: { "metallb.io/loadBalancerIPs": "203.0.113.10,fd00:10::10" },
      addresses: ["203.0.113.10", "fd00:10::10"],
      uses: ["metallb.io/loadBalancerIPs=honoured"],
    },
    {
      name: "two addresses of one family: an error",
      annotations: { "metallb.io/loadBalancerIPs": "203.0.113.10,203.0.113.11" },
      addresses: ["203.0.113.10"],
      codes: ["requested_address_invalid"],
    },
    {
      name: "annotation and a different spec.loadBalancerIP: refused (controller/service.go)",
      annotations: { "metallb.io/loadBalancerIPs": "203.0.113.10" },
      spec: { loadBalancerIP: "203.0.113.11" },
      refused: true,
      codes: ["conflicting_ip_request"],
    },
    {
      name: "annotation and the same spec.loadBalancerIP: one request",
      annotations: { "metallb.io/loadBalancerIPs": "203.0.113.10" },
      spec: { loadBalancerIP: "203.0.113.10" },
      addresses: ["203.0.113.10"],
    },
    {
      name: "deprecated prefix: read, with an info naming the current key",
      annotations: {
        "metallb.universe.tf/loadBalancerIPs": "203.0.113.12",
        "metallb.universe.tf/allow-shared-ip": "dns",
        "metallb.universe.tf/address-pool": "prod",
      },
      addresses: ["203.0.113.12"],
      pool: "prod",
      sharing: "metallb:dns",
      codes: ["deprecated_annotation", "deprecated_annotation", "deprecated_annotation"],
    },
    {
      name: "both prefixes: metallb.io wins, the old one is ignored",
      annotations: {
        "metallb.universe.tf/address-pool": "old",
        "metallb.io/address-pool": "new",
      },
      pool: "new",
      uses: ["metallb.universe.tf/address-pool=ignored", "metallb.io/address-pool=honoured"],
    },
    {
      name: "the output annotation is ignored on read",
      annotations: { "metallb.io/ip-allocated-from-pool": "prod" },
      uses: ["metallb.io/ip-allocated-from-pool=ignored"],
    },
  ]);
});

test("Cilium keys: union with spec.loadBalancerIP, first address per family, sharing scope", () => {
  check([
    {
      name: "union of spec.loadBalancerIP and lbipam.cilium.io/ips, duplicates removed (lbipam.go)",
      annotations: { "lbipam.cilium.io/ips": "203.0.113.20,fd00:10::20" },
      spec: { loadBalancerIP: "203.0.113.20" },
      addresses: ["203.0.113.20", "fd00:10::20"],
    },
    {
      name: "several IPv4 in the union: the first kept, a warning (passlb: one per family)",
      annotations: { "lbipam.cilium.io/ips": "203.0.113.21" },
      spec: { loadBalancerIP: "203.0.113.20" },
      addresses: ["203.0.113.20"],
      codes: ["unsupported_annotation"],
    },
    {
      name: "the old name io.cilium/lb-ipam-ips (≤1.15)",
      annotations: { "io.cilium/lb-ipam-ips": "203.0.113.22", "io.cilium/lb-ipam-sharing-key": "pihole" },
      addresses: ["203.0.113.22"],
      sharing: "cilium:pihole",
    },
    {
      name: "Cilium and MetalLB disagreeing: refused (the union is for Cilium-only Services)",
      annotations: { "lbipam.cilium.io/ips": "203.0.113.22", "metallb.io/loadBalancerIPs": "203.0.113.23" },
      refused: true,
      codes: ["conflicting_ip_request"],
    },
  ]);
});

test("kube-vip, PureLB and OpenELB keys", () => {
  check([
    {
      name: "kube-vip: annotation and spec written together by the cloud-provider agree",
      annotations: { "kube-vip.io/loadbalancerIPs": "203.0.113.30,fd00:10::30" },
      spec: { loadBalancerIP: "203.0.113.30" },
      addresses: ["203.0.113.30", "fd00:10::30"],
      sharing: "kube-vip:203.0.113.30,fd00:10::30",
    },
    {
      name: "kube-vip: 0.0.0.0 is DHCP, unsupported",
      annotations: { "kube-vip.io/loadbalancerIPs": "0.0.0.0" },
      codes: ["unsupported_annotation"],
      uses: ["kube-vip.io/loadbalancerIPs=unsupported"],
    },
    {
      name: "kube-vip: per-Service tuning is unsupported; ignore has no effect; outputs ignored",
      annotations: {
        "kube-vip.io/serviceInterface": "eth1",
        "kube-vip.io/ignore": "true",
        "kube-vip.io/vipHost": "n1",
      },
      codes: ["unsupported_annotation"],
      uses: [
        "kube-vip.io/serviceInterface=unsupported",
        "kube-vip.io/ignore=ignored",
        "kube-vip.io/vipHost=ignored",
      ],
    },
    {
      name: "PureLB: addresses, service group, sharing key",
      annotations: {
        "purelb.io/addresses": "203.0.113.40",
        "purelb.io/service-group": "default",
        "purelb.io/allow-shared-ip": "web",
        "purelb.io/allocated-by": "PureLB",
      },
      addresses: ["203.0.113.40"],
      pool: "default",
      sharing: "purelb:web",
    },
    {
      name: "PureLB: sharing under Local is not rewritten to Cluster: a warning",
      annotations: { "purelb.io/allow-shared-ip": "web" },
      spec: { externalTrafficPolicy: "Local" },
      sharing: "purelb:web",
      codes: ["foreign_behaviour_differs"],
    },
    {
      name: "OpenELB: marker, Eip pool, pinned address with its implied key; bgp unsupported",
      annotations: {
        "lb.kubesphere.io/v1alpha1": "openelb",
        "eip.openelb.kubesphere.io/v1alpha2": "eip-pool",
        "eip.openelb.kubesphere.io/v1alpha1": "203.0.113.50",
        "protocol.openelb.kubesphere.io/v1alpha1": "bgp",
      },
      addresses: ["203.0.113.50"],
      pool: "eip-pool",
      sharing: "openelb:203.0.113.50",
      codes: ["unsupported_annotation"],
    },
    {
      name: "pool names of two tools disagree: refused",
      annotations: { "metallb.io/address-pool": "a", "purelb.io/service-group": "b" },
      refused: true,
      codes: ["conflicting_pool_request"],
    },
    {
      name: "sharing keys of two tools: refused",
      annotations: { "metallb.io/allow-shared-ip": "a", "passlb.io/allow-shared-ip": "a" },
      refused: true,
      codes: ["conflicting_sharing_key"],
    },
  ]);
});

const pool = (name: string, addresses: string[], extra: Partial<Pool> = {}): Pool => ({
  name,
  addresses,
  autoAssign: true,
  avoidBuggyIPs: false,
  ...extra,
});

function assign(services: Service[], pools: Pool[]) {
  const out = assignVips(services, addressPools(pools));
  return Object.fromEntries(
    [...out].map(([k, a]) => [
      k.replace(/^[^/]+\//, ""),
      [a.vips.map((v) => v.address), a.issues.map((i) => i.code)],
    ]),
  );
}

test("sharing under each tool's rules", () => {
  const p = [pool("p", ["203.0.113.1-203.0.113.8"])];
  const tcp = (port: number) => ({ port, protocol: "TCP" as const });
  const udp = (port: number) => ({ port, protocol: "UDP" as const });
  const t = (n: number) => `2026-01-01T00:00:0${n}Z`;
  // MetalLB: TCP/53 and UDP/53 share (pi-hole); Local needs an identical selector (metallb#801)
  assert.deepEqual(
    assign(
      [
        svc("dns-tcp", { "metallb.io/allow-shared-ip": "dns" }, { ports: [tcp(53)] }, { created: t(1) }),
        svc("dns-udp", { "metallb.io/allow-shared-ip": "dns" }, { ports: [udp(53)] }, { created: t(2) }),
        svc(
          "local-a",
          { "metallb.io/allow-shared-ip": "l", "metallb.io/loadBalancerIPs": "203.0.113.5" },
          { externalTrafficPolicy: "Local", selector: { app: "a" } },
          { created: t(3) },
        ),
        svc(
          "local-b",
          { "metallb.io/allow-shared-ip": "l", "metallb.io/loadBalancerIPs": "203.0.113.5" },
          { externalTrafficPolicy: "Local", selector: { app: "b" }, ports: [tcp(443)] },
          { created: t(4) },
        ),
        svc(
          "other-ns",
          { "metallb.io/allow-shared-ip": "dns" },
          { ports: [tcp(80)] },
          { created: t(5), ns: "team" },
        ),
      ],
      p,
    ),
    {
      "dns-tcp": [["203.0.113.1"], []],
      "dns-udp": [["203.0.113.1"], []],
      "local-a": [["203.0.113.5"], []],
      "local-b": [[], ["sharing_not_allowed"]],
      "other-ns": [["203.0.113.1"], []], // MetalLB keys are cluster-wide
    },
  );
  // Cilium: per namespace unless both allow each other; same eTP
  assert.deepEqual(
    assign(
      [
        svc(
          "a",
          { "lbipam.cilium.io/sharing-key": "k", "lbipam.cilium.io/ips": "203.0.113.2" },
          {},
          { created: t(1) },
        ),
        svc(
          "b",
          { "lbipam.cilium.io/sharing-key": "k", "lbipam.cilium.io/ips": "203.0.113.2" },
          { ports: [tcp(81)] },
          { created: t(2), ns: "team" },
        ),
        svc(
          "c",
          {
            "lbipam.cilium.io/sharing-key": "x",
            "lbipam.cilium.io/sharing-cross-namespace": "team",
            "lbipam.cilium.io/ips": "203.0.113.3",
          },
          {},
          { created: t(3) },
        ),
        svc(
          "d",
          {
            "lbipam.cilium.io/sharing-key": "x",
            "lbipam.cilium.io/sharing-cross-namespace": "*",
            "lbipam.cilium.io/ips": "203.0.113.3",
          },
          { ports: [tcp(82)] },
          { created: t(4), ns: "team" },
        ),
        svc(
          "e",
          { "lbipam.cilium.io/sharing-key": "k", "lbipam.cilium.io/ips": "203.0.113.2" },
          { ports: [tcp(83)], externalTrafficPolicy: "Local", selector: { app: "e" } },
          { created: t(5) },
        ),
      ],
      p,
    ),
    {
      a: [["203.0.113.2"], []],
      b: [[], ["sharing_not_allowed"]],
      c: [["203.0.113.3"], []],
      d: [["203.0.113.3"], []],
      e: [[], ["sharing_not_allowed"]],
    },
  );
  // kube-vip: a pinned address shares by port number, whatever the protocol; OpenELB by pair
  assert.deepEqual(
    assign(
      [
        svc(
          "kv-tcp",
          { "kube-vip.io/loadbalancerIPs": "203.0.113.4" },
          { ports: [tcp(53)] },
          { created: t(1) },
        ),
        svc(
          "kv-udp",
          { "kube-vip.io/loadbalancerIPs": "203.0.113.4" },
          { ports: [udp(53)] },
          { created: t(2) },
        ),
        svc(
          "kv-web",
          { "kube-vip.io/loadbalancerIPs": "203.0.113.4" },
          { ports: [tcp(80)] },
          { created: t(3) },
        ),
        svc(
          "oe-tcp",
          { "eip.openelb.kubesphere.io/v1alpha1": "203.0.113.6" },
          { ports: [tcp(53)] },
          { created: t(4) },
        ),
        svc(
          "oe-udp",
          { "eip.openelb.kubesphere.io/v1alpha1": "203.0.113.6" },
          { ports: [udp(53)] },
          { created: t(5) },
        ),
      ],
      p,
    ),
    {
      "kv-tcp": [["203.0.113.4"], []],
      "kv-udp": [[], ["port_clash_on_shared_ip"]],
      "kv-web": [["203.0.113.4"], []],
      "oe-tcp": [["203.0.113.6"], []],
      "oe-udp": [["203.0.113.6"], []],
    },
  );
});

test("pools: implicit sharing, reserveFirstLast, allocation priority and selectors, autoAssign", () => {
  const t = (n: number) => `2026-01-01T00:00:0${n}Z`;
  // kube-vip allow-share: keyless Services share an IPv4 address on different port numbers
  assert.deepEqual(
    assign(
      [
        svc("a", {}, { ports: [{ port: 80, protocol: "TCP" }] }, { created: t(1) }),
        svc("b", {}, { ports: [{ port: 443, protocol: "TCP" }] }, { created: t(2) }),
        svc("c", {}, { ports: [{ port: 80, protocol: "UDP" }] }, { created: t(3) }),
      ],
      [pool("share", ["203.0.113.0/30"], { implicitSharing: "portDisjoint", reserveFirstLast: true })],
    ),
    { a: [["203.0.113.1"], []], b: [["203.0.113.1"], []], c: [["203.0.113.2"], []] },
  );
  // MetalLB serviceAllocation: the matching pool with the lowest priority first; a pool
  // whose allocation does not match is never used; autoAssign false only on request
  const pools = [
    pool("general", ["203.0.113.100"]),
    pool("late", ["203.0.113.110"], { allocation: { priority: 20, namespaces: ["team"] } }),
    pool("early", ["203.0.113.120"], {
      allocation: { priority: 10, serviceSelectors: [{ matchLabels: { tier: "web" } }] },
    }),
    pool("manual", ["203.0.113.130"], { autoAssign: false }),
  ];
  const labelled = (name: string, ns: string, labels: Record<string, string>, created: string): Service => {
    const s = svc(name, {}, {}, { ns, created });
    return { ...s, metadata: { ...s.metadata, labels } };
  };
  assert.deepEqual(
    assign(
      [
        labelled("web", "team", { tier: "web" }, t(1)),
        labelled("api", "team", {}, t(2)),
        labelled("other", "default", {}, t(3)),
        svc("pinned", { "metallb.io/loadBalancerIPs": "203.0.113.130" }, {}, { created: t(4) }),
        svc("nothing-left", {}, {}, { created: t(5) }),
      ],
      pools,
    ),
    {
      web: [["203.0.113.120"], []],
      api: [["203.0.113.110"], []],
      other: [["203.0.113.100"], []],
      pinned: [["203.0.113.130"], []],
      "nothing-left": [[], ["pool_exhausted"]],
    },
  );
});

test("adopt, never renumber: status addresses are kept before anything is claimed; an address another Service shows is never handed out", () => {
  const p = [pool("p", ["203.0.113.1-203.0.113.3"])];
  const out = assignVips(
    [
      // created first, asks for nothing: would get .1, but .1 is b's
      svc("a-new", {}, {}, { created: "2026-01-01T00:00:01Z" }),
      svc(
        "b-old",
        { "metallb.io/allow-shared-ip": "x" },
        {},
        { created: "2026-01-02T00:00:00Z", status: ["203.0.113.1"] },
      ),
    ],
    addressPools(p),
    { others: [svc("foreign", {}, { loadBalancerClass: "example.com/lb" }, { status: ["203.0.113.2"] })] },
  );
  assert.deepEqual(
    out.get("default/b-old")?.vips.map((v) => [v.address, v.source]),
    [["203.0.113.1", "status"]],
  );
  assert.deepEqual(
    out.get("default/a-new")?.vips.map((v) => v.address),
    ["203.0.113.3"],
  );
  const req = assignVips(
    [svc("wants-2", { "passlb.io/load-balancer-ips": "203.0.113.2" })],
    addressPools(p),
    { others: [svc("foreign", {}, { loadBalancerClass: "example.com/lb" }, { status: ["203.0.113.2"] })] },
  );
  assert.deepEqual(
    req.get("default/wants-2")?.issues.map((i) => [i.code, i.message]),
    [["address_in_use", "203.0.113.2 is still in the status of Service default/foreign"]],
  );
});
