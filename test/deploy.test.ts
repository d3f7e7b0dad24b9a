// deploy/ checked statically: every YAML parses, the kustomization lists exactly the files
// there are, objects carry the namespace and labels expected, RBAC has no wildcard and a
// comment on every rule, the example pools pass the CRD's schema and ours, the workloads'
// arguments are flags the commands have, and the Dockerfile copies files that exist. When
// kubectl with kustomize is on PATH, `kubectl kustomize` builds the base and the component.
import assert from "node:assert/strict";
import { execFileSync, spawnSync } from "node:child_process";
import {
  accessSync,
  constants,
  existsSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { test } from "node:test";
import { parseAllDocuments } from "yaml";
import { buildProgram } from "../src/cli/program.ts";
import { decodeDocuments } from "../src/k8s/decode.ts";
import {
  LoadBalancerIPPoolSchema,
  LoadBalancerIPPoolStatusSchema,
} from "../src/k8s/load-balancer-ip-pool.ts";
import { poolsFromCluster } from "../src/kubectl/ip-pools.ts";
import { parseBindAddress } from "../src/node-agent/agent-config.ts";
import { validateAgainst } from "./support/openapi-check.ts";

const ROOT = join(import.meta.dirname, "..");
const DEPLOY = join(ROOT, "deploy");
const NAMESPACE = "passlb-system";
const CLUSTER_SCOPED = new Set([
  "Namespace",
  "CustomResourceDefinition",
  "ClusterRole",
  "ClusterRoleBinding",
]);

type Obj = {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [k: string]: unknown;
};

function yamlFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) out.push(...yamlFiles(path));
    else if (/\.ya?ml$/.test(entry.name)) out.push(path);
  }
  return out.sort();
}

function docs(path: string): unknown[] {
  return parseAllDocuments(readFileSync(path, "utf8")).map((d) => {
    assert.deepEqual(d.errors, [], `${relative(ROOT, path)} does not parse`);
    return d.toJS();
  });
}

const kustomization = docs(join(DEPLOY, "kustomization.yaml"))[0] as {
  resources: string[];
  namespace: string;
};
const baseObjects: { file: string; obj: Obj }[] = kustomization.resources.flatMap((file) =>
  docs(join(DEPLOY, file)).map((obj) => ({ file, obj: obj as Obj })),
);
const byKind = (kind: string) => baseObjects.filter((o) => o.obj.kind === kind).map((o) => o.obj);
const crd = byKind("CustomResourceDefinition")[0] as Obj & {
  spec: {
    versions: {
      name: string;
      served: boolean;
      storage: boolean;
      subresources?: unknown;
      schema: { openAPIV3Schema: unknown };
    }[];
  } & Record<string, unknown>;
};

test("every YAML under deploy/ parses", () => {
  const files = yamlFiles(DEPLOY);
  assert.ok(files.length >= 8, `only ${files.length} files`);
  for (const f of files)
    for (const d of docs(f)) assert.equal(typeof d, "object", `${relative(ROOT, f)}: empty document`);
});

test("the kustomization lists every manifest of the base and nothing missing; the component lists its own", () => {
  const topLevel = readdirSync(DEPLOY)
    .filter((f) => /\.ya?ml$/.test(f) && f !== "kustomization.yaml")
    .sort();
  assert.deepEqual([...kustomization.resources].sort(), topLevel);
  assert.equal(kustomization.namespace, NAMESPACE);
  const componentDir = join(DEPLOY, "components", "manage-endpointslices");
  const component = docs(join(componentDir, "kustomization.yaml"))[0] as {
    kind: string;
    resources: string[];
    patches: { path: string }[];
  };
  assert.equal(component.kind, "Component");
  const listed = [...component.resources, ...component.patches.map((p) => p.path)].sort();
  const present = readdirSync(componentDir)
    .filter((f) => f !== "kustomization.yaml")
    .sort();
  assert.deepEqual(listed, present);
});

test("objects: namespaced ones in passlb-system, cluster-scoped ones without a namespace, all labelled passlb", () => {
  const all = [
    ...baseObjects,
    ...docs(join(DEPLOY, "components", "manage-endpointslices", "rbac-endpointslices.yaml")).map((obj) => ({
      file: "rbac-endpointslices.yaml",
      obj: obj as Obj,
    })),
  ];
  for (const { file, obj } of all) {
    const what = `${file}: ${obj.kind} ${obj.metadata.name}`;
    if (CLUSTER_SCOPED.has(obj.kind)) assert.equal(obj.metadata.namespace, undefined, what);
    else assert.equal(obj.metadata.namespace, NAMESPACE, what);
    assert.equal(obj.metadata.labels?.["app.kubernetes.io/name"], "passlb", what);
    assert.equal(obj.metadata.labels?.["app.kubernetes.io/part-of"], "passlb", what);
    assert.ok(obj.metadata.name.startsWith("passlb") || obj.kind === "CustomResourceDefinition", what);
  }
  // every binding names a role and a ServiceAccount that the manifests define
  const accounts = new Set(byKind("ServiceAccount").map((s) => s.metadata.name));
  const roles = new Set(
    all.filter((o) => /Role$/.test(o.obj.kind)).map((o) => `${o.obj.kind}/${o.obj.metadata.name}`),
  );
  for (const { obj } of all.filter((o) => /RoleBinding$/.test(o.obj.kind))) {
    const b = obj as Obj & {
      roleRef: { kind: string; name: string };
      subjects: { kind: string; name: string; namespace: string }[];
    };
    assert.ok(roles.has(`${b.roleRef.kind}/${b.roleRef.name}`), `${b.metadata.name}: unknown role`);
    for (const s of b.subjects) {
      assert.equal(s.kind, "ServiceAccount");
      assert.ok(accounts.has(s.name), `${b.metadata.name}: unknown ServiceAccount ${s.name}`);
      assert.equal(s.namespace, NAMESPACE);
    }
  }
});

type Rule = { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] };
const rbacFiles = [
  "rbac-controller.yaml",
  "rbac-lb.yaml",
  "components/manage-endpointslices/rbac-endpointslices.yaml",
];

function rules(file: string, kind: string, name: string): Rule[] {
  const obj = docs(join(DEPLOY, file)).find(
    (o) => (o as Obj).kind === kind && (o as Obj).metadata.name === name,
  );
  assert.ok(obj, `${file}: no ${kind} ${name}`);
  return (obj as { rules: Rule[] }).rules;
}

test("RBAC: no wildcards, a comment on every rule, and least privilege per identity", () => {
  for (const file of rbacFiles) {
    const lines = readFileSync(join(DEPLOY, file), "utf8").split("\n");
    lines.forEach((line, i) => {
      if (/^\s*- apiGroups:/.test(line))
        assert.match(
          lines[i - 1] ?? "",
          /^\s*#/,
          `${file}:${i + 1}: a rule without a comment saying what it is for`,
        );
    });
    for (const obj of docs(join(DEPLOY, file)) as (Obj & { rules?: Rule[] })[])
      for (const r of obj.rules ?? [])
        for (const v of [...r.apiGroups, ...r.resources, ...r.verbs])
          assert.ok(!v.includes("*"), `${file}: ${obj.metadata.name} has a wildcard`);
  }
  const grants = (rs: Rule[]) =>
    new Set(
      rs.flatMap((r) => r.resources.flatMap((res) => r.verbs.map((v) => `${r.apiGroups[0]}/${res}:${v}`))),
    );
  const controller = grants(rules("rbac-controller.yaml", "ClusterRole", "passlb-controller"));
  for (const g of [
    "/services:watch",
    "/services:update",
    "/services/status:update",
    "discovery.k8s.io/endpointslices:list",
    "/nodes:watch",
    "/namespaces:list",
    "/events:create",
    "passlb.io/loadbalancerippools:watch",
    "passlb.io/loadbalancerippools/status:update",
  ])
    assert.ok(controller.has(g), `controller lacks ${g}`);
  for (const g of controller) {
    assert.ok(!g.startsWith("/pods:"), "pods belong to the optional component");
    assert.ok(
      !/endpointslices:(create|update|delete|patch)$/.test(g),
      "slice writes belong to the optional component",
    );
    assert.ok(!g.includes("secrets") && !g.includes("leases"), `controller ClusterRole grants ${g}`);
    assert.ok(!g.endsWith(":delete"), `controller deletes nothing: ${g}`);
    assert.ok(!g.endsWith(":patch"), `controller only replaces (PUT), never patches: ${g}`);
  }
  const lease = rules("rbac-controller.yaml", "Role", "passlb-controller-leader-election");
  assert.deepEqual(
    lease.filter((r) => r.verbs.includes("update")).map((r) => r.resourceNames),
    [["passlb-controller"]],
  );
  const lb = grants(rules("rbac-lb.yaml", "ClusterRole", "passlb-lb"));
  // the LB hosts read, create Events (their wire checks' findings, src/cli/lb-events.ts) and
  // write only their conditions on the BGP objects' /status
  for (const g of lb)
    assert.ok(
      /:(get|list|watch)$/.test(g) ||
        g === "/events:create" ||
        /^passlb\.io\/loadbalancerbgp(peers|advertisements)\/status:patch$/.test(g),
      `the LB hosts only read (create Events, patch the BGP objects' status): ${g}`,
    );
  // Secrets: list only, by name, in passlb's namespace (a Role, not the ClusterRole)
  assert.ok(![...lb].some((g) => g.includes("secrets")), "no cluster-wide Secret access");
  const secrets = rules("rbac-lb.yaml", "Role", "passlb-lb-secrets");
  assert.deepEqual(
    secrets.map((r) => [r.resources, r.verbs, r.resourceNames]),
    [[["secrets"], ["list"], ["passlb-bgp-password"]]],
  );
  const optional = grants(rules(rbacFiles[2] as string, "ClusterRole", "passlb-controller-endpointslices"));
  assert.ok(optional.has("/pods:watch") && optional.has("discovery.k8s.io/endpointslices:create"));
});

test("the CRD: loadbalancerippools.passlb.io, cluster-scoped, v1alpha1 served and stored with status, exactly the documented fields", () => {
  assert.equal(crd.metadata.name, "loadbalancerippools.passlb.io");
  assert.equal(crd.spec.scope, "Cluster");
  assert.deepEqual((crd.spec.names as { shortNames: string[] }).shortNames, ["lbippool"]);
  const [v] = crd.spec.versions;
  assert.equal(crd.spec.versions.length, 1);
  assert.deepEqual([v?.name, v?.served, v?.storage], ["v1alpha1", true, true]);
  assert.deepEqual(v?.subresources, { status: {} });
  const schema = v?.schema.openAPIV3Schema as {
    properties: Record<string, { properties: Record<string, unknown> }>;
  };
  assert.deepEqual(Object.keys(schema.properties.spec?.properties ?? {}).sort(), [
    "addresses",
    "allocation",
    "autoAssign",
    "avoidBuggyIPs",
    "disabled",
    "implicitSharing",
    "namespaces",
    "reserveFirstLast",
    "serviceSelector",
  ]);
  assert.deepEqual(Object.keys(schema.properties.status?.properties ?? {}).sort(), [
    "conditions",
    "conflicts",
    "ipv4",
    "ipv6",
  ]);
  // and the same fields as the controller's zod schema
  assert.deepEqual(
    Object.keys(schema.properties.spec?.properties ?? {}).sort(),
    Object.keys(LoadBalancerIPPoolSchema.shape.spec.shape).sort(),
  );
  assert.deepEqual(
    Object.keys(schema.properties.status?.properties ?? {}).sort(),
    Object.keys(LoadBalancerIPPoolStatusSchema.shape).sort(),
  );
});

test("the example pools pass the CRD's schema, our schema and our address rules; broken ones fail the CRD's", () => {
  const schema = crd.spec.versions[0]?.schema.openAPIV3Schema;
  const pools = docs(join(DEPLOY, "examples", "pool.yaml")) as Obj[];
  assert.ok(pools.length >= 1);
  for (const pool of pools) {
    assert.deepEqual(validateAgainst(schema, pool), [], pool.metadata.name);
    assert.ok(LoadBalancerIPPoolSchema.safeParse(pool).success, pool.metadata.name);
  }
  const converted = poolsFromCluster(pools);
  assert.deepEqual(converted.problems, []);
  const decoded = decodeDocuments([
    {
      source: "deploy/examples/pool.yaml",
      index: 1,
      value: {
        apiVersion: "passlb.io/v1alpha1",
        kind: "PasslbConfig",
        metadata: { name: "x" },
        spec: { pools: converted.pools },
      },
    },
  ]);
  assert.deepEqual(decoded.problems, []);
  assert.equal(decoded.snapshot.config.pools.length, pools.length);
  // documentation addresses only
  for (const pool of pools)
    for (const a of (pool as unknown as { spec: { addresses: string[] } }).spec.addresses)
      assert.match(
        a,
        /^(192\.0\.2\.|198\.51\.100\.|203\.0\.113\.|2001:db8:|fd)/,
        `${a} is not a documentation address`,
      );
  const first = pools[0] as Obj & { spec: Record<string, unknown> };
  const broken = [
    { ...first, spec: { ...first.spec, addresses: [] } },
    { ...first, spec: { ...first.spec, addresses: ["not an address"] } },
    { ...first, spec: { autoAssign: true } },
    { ...first, spec: { ...first.spec, autoAssign: "yes" } },
  ];
  for (const b of broken) assert.notDeepEqual(validateAgainst(schema, b), [], JSON.stringify(b.spec));
  const statusOk = {
    ...first,
    status: {
      ipv4: { total: "256", used: 3 },
      conflicts: [{ address: "203.0.113.7", services: ["a/b", "c/d"], reason: "requested_twice" }],
    },
  };
  assert.deepEqual(validateAgainst(schema, statusOk), []);
});

test("the example Service decodes with our schemas and is passlb's", () => {
  const path = join(DEPLOY, "examples", "service.yaml");
  const decoded = decodeDocuments(
    (docs(path) as unknown[]).map((value, i) => ({
      source: "deploy/examples/service.yaml",
      index: i + 1,
      value,
    })),
  );
  assert.deepEqual(decoded.problems, []);
  assert.deepEqual(
    decoded.snapshot.services.map((s) => [s.metadata.name, s.spec.type, s.spec.loadBalancerClass]),
    [["echo", "LoadBalancer", "passlb.io/l4"]],
  );
});

test("workloads: controller Deployment and LB DaemonSet as specified", () => {
  type Container = {
    args: string[];
    securityContext: {
      readOnlyRootFilesystem?: boolean;
      runAsUser?: number;
      capabilities: { add?: string[]; drop: string[] };
    };
    livenessProbe?: unknown;
    readinessProbe?: unknown;
    resources?: { requests?: unknown; limits?: unknown };
    ports: { name: string; containerPort: number; hostPort?: number }[];
  };
  type Workload = Obj & {
    spec: { replicas?: number; template: { spec: Record<string, unknown> & { containers: Container[] } } };
  };
  const deployment = byKind("Deployment")[0] as Workload;
  const d = deployment.spec.template.spec;
  assert.equal(deployment.spec.replicas, 2);
  assert.equal(d.serviceAccountName, "passlb-controller");
  assert.equal((d.securityContext as { runAsNonRoot: boolean }).runAsNonRoot, true);
  assert.ok((d.affinity as { podAntiAffinity?: unknown }).podAntiAffinity);
  const c = d.containers[0] as Container;
  assert.equal(c.securityContext.readOnlyRootFilesystem, true);
  assert.deepEqual(c.securityContext.capabilities.drop, ["ALL"]);
  assert.ok(c.livenessProbe && c.readinessProbe && c.resources?.requests && c.resources.limits);
  assert.equal(c.args[0], "controller");
  assert.ok(c.args.includes("--in-cluster"));

  const daemonset = byKind("DaemonSet")[0] as Workload;
  const s = daemonset.spec.template.spec;
  assert.deepEqual(s.nodeSelector, { "passlb.io/lb-host": "true", "kubernetes.io/os": "linux" });
  assert.equal(s.hostNetwork, true);
  assert.equal(s.dnsPolicy, "ClusterFirstWithHostNet");
  assert.equal(s.serviceAccountName, "passlb-lb");
  const l = s.containers[0] as Container;
  assert.deepEqual(l.securityContext.capabilities.add?.sort(), ["NET_ADMIN", "NET_RAW"]);
  assert.deepEqual(l.securityContext.capabilities.drop, ["ALL"]);
  assert.ok(
    l.args.includes("--dashboard-address=[$(HOST_IP)]:9797"),
    "the dashboard binds the host's address",
  );
  assert.ok(l.livenessProbe && l.readinessProbe && l.resources?.requests);
  assert.equal(
    l.ports.find((p) => p.name === "dashboard")?.containerPort,
    9797,
    "kubectl passlb status finds the port by name",
  );
});

type SecurityContext = {
  runAsUser?: number;
  runAsNonRoot?: boolean;
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  readOnlyRootFilesystem?: boolean;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type: string };
};
type SecuredContainer = {
  name: string;
  args: string[];
  env?: { name: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  ports: { name: string; containerPort: number }[];
  securityContext: SecurityContext;
  livenessProbe: { httpGet: { path: string; port: string } };
  readinessProbe: { httpGet: { path: string; port: string } };
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean }[];
};
type PodSpec = {
  hostNetwork?: boolean;
  hostPID?: boolean;
  hostIPC?: boolean;
  securityContext?: SecurityContext;
  containers: SecuredContainer[];
  initContainers?: unknown[];
  volumes?: ({ name: string } & Record<string, unknown>)[];
};
const podSpec = (kind: string): PodSpec =>
  (byKind(kind)[0] as Obj & { spec: { template: { spec: PodSpec } } }).spec.template.spec;

/** the workload's dashboard flag, with each env var its fieldRef names filled in by `ip` */
function dashboardBinds(
  c: SecuredContainer,
  ip: string,
): { host: string | undefined; port: number } | undefined {
  const arg = c.args.find((a) => a.startsWith("--dashboard-address="))?.split("=")[1] ?? "";
  const filled = arg.replace(/\$\((\w+)\)/g, (_m, name: string) => {
    const ref = c.env?.find((e) => e.name === name)?.valueFrom?.fieldRef?.fieldPath;
    assert.ok(
      ref === "status.podIP" || ref === "status.hostIP",
      `${c.name}: $(${name}) is not the pod's or host's IP`,
    );
    return ip;
  });
  return parseBindAddress(filled);
}

function assertHardened(what: string, spec: PodSpec, c: SecuredContainer): void {
  const sc = c.securityContext;
  assert.equal(sc.allowPrivilegeEscalation, false, `${what}: allowPrivilegeEscalation`);
  assert.equal(sc.readOnlyRootFilesystem, true, `${what}: read-only root filesystem`);
  assert.notEqual(sc.privileged, true, `${what}: privileged`);
  assert.deepEqual(sc.capabilities?.drop, ["ALL"], `${what}: drops every capability first`);
  assert.equal(
    (sc.seccompProfile ?? spec.securityContext?.seccompProfile)?.type,
    "RuntimeDefault",
    `${what}: seccomp`,
  );
  assert.ok(!spec.hostPID && !spec.hostIPC, `${what}: no host PID or IPC namespace`);
  assert.equal(spec.initContainers, undefined, `${what}: no init container to harden separately`);
  // the only writable places are bounded emptyDirs; nothing of the host is mounted
  for (const v of spec.volumes ?? []) {
    assert.deepEqual(
      Object.keys(v).sort(),
      ["emptyDir", "name"],
      `${what}: volume ${v.name} is not an emptyDir`,
    );
    assert.ok(
      (v.emptyDir as { sizeLimit?: string }).sizeLimit,
      `${what}: emptyDir ${v.name} without sizeLimit`,
    );
  }
  // probes: liveness is the process, readiness the API calls (/readyz), on the dashboard port
  assert.equal(c.livenessProbe.httpGet.path, "/healthz", what);
  assert.equal(c.readinessProbe.httpGet.path, "/readyz", what);
  const port = c.ports.find((p) => p.name === c.readinessProbe.httpGet.port)?.containerPort;
  for (const ip of ["192.0.2.7", "fd00::7"]) {
    const bind = dashboardBinds(c, ip);
    assert.ok(bind, `${what}: --dashboard-address does not parse with ${ip} filled in`);
    assert.equal(
      bind.host,
      ip,
      `${what}: the dashboard binds the one address probes and scrapes use, not all`,
    );
    assert.equal(bind.port, port, `${what}: the probes' port is the dashboard's`);
  }
}

test("least privilege: the controller runs as non-root with no capability at all", () => {
  const spec = podSpec("Deployment");
  const c = spec.containers[0] as SecuredContainer;
  assert.equal(spec.containers.length, 1);
  assert.equal(spec.hostNetwork, undefined, "the controller needs no host network");
  assert.equal(spec.securityContext?.runAsNonRoot, true);
  assert.ok((spec.securityContext?.runAsUser ?? 0) > 0, "a non-root uid");
  assert.equal(c.securityContext.runAsNonRoot, true);
  assert.equal(c.securityContext.capabilities?.add, undefined, "no capability added");
  assertHardened("controller", spec, c);
});

test("least privilege: the LB runs with exactly the capabilities its commands use, each named with its reason", () => {
  const spec = podSpec("DaemonSet");
  const c = spec.containers[0] as SecuredContainer;
  assert.equal(spec.containers.length, 1);
  assert.equal(spec.hostNetwork, true, "it programs the host's own nftables and routes");
  assert.deepEqual([...(c.securityContext.capabilities?.add ?? [])].sort(), ["NET_ADMIN", "NET_RAW"]);
  assertHardened("lb", spec, c);
  // each granted capability is explained, beside the tool that needs it, in the manifest and the docs
  const manifest = readFileSync(join(DEPLOY, "lb-daemonset.yaml"), "utf8");
  const install = readFileSync(join(ROOT, "docs", "install.md"), "utf8");
  const why = { NET_ADMIN: ["nft", "ip rule", "ip addr"], NET_RAW: ["keepalived"] };
  for (const [cap, tools] of Object.entries(why))
    for (const text of [manifest, install]) {
      const line = text.split("\n").find((l) => l.includes(cap) && tools.some((t) => l.includes(t)));
      assert.ok(line, `${cap} is not explained with ${tools.join("/")}`);
    }
  // and the code runs those tools and no other privileged one
  const used = [
    "src/drivers/nft.ts",
    "src/drivers/ip-routes.ts",
    "src/announce/vip-addresses.ts",
    "src/drivers/keepalived-driver.ts",
  ]
    .map((f) => readFileSync(join(ROOT, f), "utf8"))
    .join("\n");
  for (const tool of ['"nft"', '"ip"', '"keepalived"'])
    assert.ok(used.includes(tool), `the code no longer runs ${tool}`);
});

test("the dashboard and metrics bind to loopback unless a flag says otherwise", () => {
  const program = buildProgram({ stdout: () => {}, stderr: () => {}, readStdin: async () => "" }, () => {});
  const withDashboard = program.commands.filter((c) =>
    c.options.some((o) => o.long === "--dashboard-address"),
  );
  assert.deepEqual(withDashboard.map((c) => c.name()).sort(), ["agent", "controller", "lb", "up"]);
  for (const c of withDashboard) {
    const def = String(c.options.find((o) => o.long === "--dashboard-address")?.defaultValue);
    assert.equal(
      parseBindAddress(def)?.host,
      "127.0.0.1",
      `passlb ${c.name()} --dashboard-address defaults to ${def}`,
    );
  }
});

test("workloads: every flag in the containers' args is a flag of that passlb command", () => {
  const program = buildProgram({ stdout: () => {}, stderr: () => {}, readStdin: async () => "" }, () => {});
  const workloads = [...byKind("Deployment"), ...byKind("DaemonSet")] as (Obj & {
    spec: { template: { spec: { containers: { args: string[] }[] } } };
  })[];
  // the manage-endpointslices component appends its value to the controller's args
  const componentArgs = (
    docs(join(DEPLOY, "components", "manage-endpointslices", "controller-flag.yaml"))[0] as unknown as {
      value: string;
    }[]
  ).map((p) => p.value);
  for (const w of workloads) {
    const args = w.spec.template.spec.containers[0]?.args ?? [];
    const name = args[0] ?? "";
    const command = program.commands.find((c) => c.name() === name);
    assert.ok(command, `${w.kind} ${w.metadata.name}: passlb has no command ${name}`);
    const flags = new Set(command.options.map((o) => o.long));
    assert.ok(flags.has("--in-cluster"), `passlb ${name} has no --in-cluster`);
    const extra = name === "controller" ? componentArgs : [];
    for (const arg of [...args.slice(1), ...extra]) {
      const flag = arg.split("=")[0] ?? arg;
      assert.ok(flags.has(flag), `${w.kind} ${w.metadata.name}: passlb ${name} has no ${flag}`);
    }
  }
});

test("the Dockerfile builds from files that exist and installs what the LB host needs", () => {
  const text = readFileSync(join(ROOT, "Dockerfile"), "utf8");
  const ignored = readFileSync(join(ROOT, ".dockerignore"), "utf8")
    .split("\n")
    .map((l) => l.trim())
    .filter((l) => l !== "" && !l.startsWith("#"));
  const copies = [...text.matchAll(/^COPY (?!--from)(.+)$/gm)].map(
    (m) => m[1]?.trim().split(/\s+/).slice(0, -1) ?? [],
  );
  assert.ok(copies.length >= 4);
  for (const sources of copies)
    for (const src of sources) {
      assert.ok(existsSync(join(ROOT, src)), `Dockerfile copies ${src}, which does not exist`);
      assert.ok(!ignored.some((i) => src === i || src.startsWith(`${i}/`)), `.dockerignore hides ${src}`);
    }
  // a supported Node.js LTS on Debian slim, the same in both stages, one the engines allow
  const bases = [...text.matchAll(/^FROM (\S+)/gm)].map((m) => m[1]);
  assert.deepEqual(bases, ["node:24-trixie-slim", "node:24-trixie-slim"]);
  assert.match(text, /npm ci/);
  assert.match(text, /npm run build/);
  // ndisc6 and tcpdump: the wire checks (src/announce/wire-checker.ts, vrrp-watch.ts)
  for (const pkg of [
    "nftables",
    "iproute2",
    "iputils-arping",
    "conntrack",
    "bird2",
    "keepalived",
    "ndisc6",
    "tcpdump",
  ])
    assert.match(text, new RegExp(`\\b${pkg}\\b`));
  assert.match(text, /^USER 65532/m);
  assert.match(text, /^ENTRYPOINT \["passlb"\]$/m);
  for (const m of text.matchAll(/ln -s \/opt\/passlb\/(\S+)/g))
    assert.ok(existsSync(join(ROOT, m[1] ?? "")), m[1]);
  const pkg = JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as {
    scripts: Record<string, string>;
    bin: Record<string, string>;
    engines: { node: string };
  };
  // the image's Node and the CI's (this process) are both among the supported versions
  const majors = [...pkg.engines.node.matchAll(/\^(\d+)\./g)].map((m) => Number(m[1]));
  assert.deepEqual(majors, [20, 22, 24]);
  assert.ok(
    majors.includes(Number(process.versions.node.split(".")[0])),
    `Node ${process.version} not in engines`,
  );
  const install = readFileSync(join(ROOT, "docs", "install.md"), "utf8");
  assert.ok(install.includes(pkg.engines.node), "docs/install.md states the engines range");
  assert.ok(pkg.scripts.build);
  assert.equal(pkg.bin["kubectl-passlb"], "bin/kubectl-passlb");
  for (const bin of Object.values(pkg.bin)) accessSync(join(ROOT, bin), constants.X_OK);
});

test("docs/install.md names only deploy/ files that exist", () => {
  const text = readFileSync(join(ROOT, "docs", "install.md"), "utf8");
  const paths = [...text.matchAll(/\bdeploy\/[A-Za-z0-9_./-]*[A-Za-z0-9_]/g)].map((m) => m[0]);
  assert.ok(paths.length >= 4);
  // `deploy/passlb-controller` is kubectl's shorthand for a Deployment, not a path
  for (const p of new Set(paths.filter((p) => !p.startsWith("deploy/passlb-"))))
    assert.ok(existsSync(join(ROOT, p)), `docs/install.md: ${p} does not exist`);
});

function kustomizeAvailable(): string | undefined {
  const r = spawnSync("kubectl", ["kustomize", "--help"], { encoding: "utf8", timeout: 10_000 });
  if (r.error) return "kubectl is not on PATH";
  if (r.status !== 0) return "this kubectl has no kustomize";
  return undefined;
}

test("kubectl kustomize builds the base and the manage-endpointslices component", (t) => {
  const missing = kustomizeAvailable();
  if (missing) return t.skip(missing);
  const built = execFileSync("kubectl", ["kustomize", DEPLOY], { encoding: "utf8", timeout: 30_000 });
  const objects = parseAllDocuments(built).map((d) => d.toJS() as Obj);
  assert.deepEqual(
    objects.map((o) => `${o.kind}/${o.metadata.name}`).sort(),
    baseObjects.map((o) => `${o.obj.kind}/${o.obj.metadata.name}`).sort(),
  );
  assert.ok(built.includes("image: passlb:0.1.0"));
  const overlay = mkdtempSync(join(tmpdir(), "plb-kustomize-"));
  try {
    const base = relative(overlay, DEPLOY);
    writeFileSync(
      join(overlay, "kustomization.yaml"),
      `resources: [${base}]\ncomponents: [${base}/components/manage-endpointslices]\n`,
    );
    const withComponent = parseAllDocuments(
      execFileSync("kubectl", ["kustomize", overlay], { encoding: "utf8", timeout: 30_000 }),
    ).map((d) => d.toJS() as Obj & { spec?: { template?: { spec: { containers: { args: string[] }[] } } } });
    const controller = withComponent.find((o) => o.kind === "Deployment");
    assert.ok(controller?.spec?.template?.spec.containers[0]?.args.includes("--manage-endpointslices"));
    assert.ok(
      withComponent.some(
        (o) => o.kind === "ClusterRole" && o.metadata.name === "passlb-controller-endpointslices",
      ),
    );
  } finally {
    rmSync(overlay, { recursive: true, force: true });
  }
});

test("the announce-bgp component: its args are passlb lb flags, BIRD runs as its own container with least privilege, and kustomize builds it", (t) => {
  const dir = join(DEPLOY, "components", "announce-bgp");
  const component = docs(join(dir, "kustomization.yaml"))[0] as { kind: string; patches: { path: string }[] };
  assert.equal(component.kind, "Component");
  assert.deepEqual(
    component.patches.map((p) => p.path).sort(),
    readdirSync(dir)
      .filter((f) => f !== "kustomization.yaml")
      .sort(),
  );
  const ops = docs(join(dir, "lb-bgp.yaml"))[0] as unknown as { path: string; value: unknown }[];
  const program = buildProgram({ stdout: () => {}, stderr: () => {}, readStdin: async () => "" }, () => {});
  const lb = program.commands.find((c) => c.name() === "lb")!;
  const flags = new Set(lb.options.map((o) => o.long));
  for (const op of ops.filter((o) => o.path.endsWith("/args/-")))
    assert.ok(flags.has(String(op.value).split("=")[0]), `passlb lb has no ${op.value}`);
  const lbArgs = ops.filter((o) => o.path.endsWith("/containers/0/args/-")).map((o) => String(o.value));
  assert.ok(lbArgs.includes("--bgp-speaker=external"), "passlb talks to the bird container's BIRD");
  // the speaker: Debian's bird2 in the same image (no download), its own container
  assert.match(readFileSync(join(ROOT, "Dockerfile"), "utf8"), /apt-get install[^\n]*\bbird2\b/);
  const bird = ops.find((o) => o.path === "/spec/template/spec/containers/-")?.value as
    // biome-ignore lint/suspicious/noExplicitAny: a container from YAML, read field by field
    Record<string, any> | undefined;
  assert.ok(bird, "a bird container");
  assert.equal(bird.name, "bird");
  assert.equal(bird.image, "passlb", "the same image, built from Debian's bird2 package");
  const stateDir = lbArgs.find((a) => a.startsWith("--state-dir="))!.split("=")[1]!;
  const script = bird.args.join(" ");
  for (const f of ["bird.conf", "bird.ctl", "bird.pid"])
    assert.ok(script.includes(`${stateDir}/${f}`), `BIRD uses ${stateDir}/${f}, where passlb looks`);
  assert.match(script, /exec bird -f /, "BIRD in the foreground: the container lives as long as it does");
  assert.deepEqual(
    // biome-ignore lint/suspicious/noExplicitAny: YAML
    bird.volumeMounts.map((m: any) => [m.name, m.mountPath]),
    [["state", "/run/passlb"]],
    "the state volume the lb container mounts",
  );
  const sc = bird.securityContext;
  assert.deepEqual([...sc.capabilities.add].sort(), ["NET_ADMIN", "NET_BIND_SERVICE"]);
  assert.deepEqual(sc.capabilities.drop, ["ALL"]);
  assert.equal(sc.privileged, false);
  assert.equal(sc.allowPrivilegeEscalation, false);
  assert.equal(sc.readOnlyRootFilesystem, true);
  // each capability is explained beside the container
  const why = readFileSync(join(dir, "kustomization.yaml"), "utf8");
  assert.match(why, /NET_ADMIN \(BFD's sockets ask for SO_PRIORITY/);
  assert.match(why, /NET_BIND_SERVICE \(TCP 179\)/);
  // the lb container drops NET_RAW (keepalived's) on a routed tier
  const removed = ops.find((o) => (o as { op?: string }).op === "remove");
  assert.equal(removed?.path, "/spec/template/spec/containers/0/securityContext/capabilities/add/1");
  const missing = kustomizeAvailable();
  if (missing) return t.diagnostic(`${missing}: the build is not checked`);
  const overlay = mkdtempSync(join(tmpdir(), "plb-kustomize-"));
  try {
    const base = relative(overlay, DEPLOY);
    writeFileSync(
      join(overlay, "kustomization.yaml"),
      `resources: [${base}]\ncomponents: [${base}/components/announce-bgp]\n`,
    );
    const built = parseAllDocuments(
      execFileSync("kubectl", ["kustomize", overlay], { encoding: "utf8", timeout: 30_000 }),
    ).map((d) => d.toJS() as Obj & { spec?: { template?: { spec: Record<string, unknown> } } });
    // biome-ignore lint/suspicious/noExplicitAny: the built DaemonSet, read field by field
    const dsObj = built.find((o) => o.kind === "DaemonSet") as Record<string, any>;
    const ds = JSON.stringify(dsObj);
    for (const s of [
      "--announce=bgp",
      "--state-dir=/run/passlb/bgp",
      "--bgp-speaker=external",
      '"mountPath":"/run/passlb"',
    ])
      assert.ok(ds.includes(s), s);
    // biome-ignore lint/suspicious/noExplicitAny: containers from YAML
    const containers = dsObj.spec.template.spec.containers as Record<string, any>[];
    assert.deepEqual(
      containers.map((c) => [c.name, [...c.securityContext.capabilities.add].sort()]),
      [
        ["lb", ["NET_ADMIN"]],
        ["bird", ["NET_ADMIN", "NET_BIND_SERVICE"]],
      ],
    );
    assert.equal(dsObj.spec.template.spec.hostNetwork, true, "BIRD speaks from the host's addresses");
    assert.ok(
      built.some(
        (o) => o.kind === "CustomResourceDefinition" && o.metadata.name === "loadbalancerbgppeers.passlb.io",
      ),
      "the LoadBalancerBGPPeer CRD is part of deploy/",
    );
  } finally {
    rmSync(overlay, { recursive: true, force: true });
  }
});

test("the decap-vxlan-gpe component: the agent's decapsulation alone, host network, NET_ADMIN only, one host directory", (t) => {
  const dir = join(DEPLOY, "components", "decap-vxlan-gpe");
  const component = docs(join(dir, "kustomization.yaml"))[0] as { kind: string; resources: string[] };
  assert.equal(component.kind, "Component");
  assert.deepEqual(
    [...component.resources].sort(),
    readdirSync(dir)
      .filter((f) => f !== "kustomization.yaml")
      .sort(),
  );
  const ds = docs(join(dir, "decap-daemonset.yaml"))[0] as Obj & {
    spec: { template: { spec: PodSpec & Record<string, unknown> } };
  };
  assert.equal(ds.kind, "DaemonSet");
  assert.equal(ds.metadata.namespace, NAMESPACE, "set here: the base's namespace does not reach a component");
  assert.equal(ds.metadata.labels?.["app.kubernetes.io/part-of"], "passlb");
  const spec = ds.spec.template.spec;
  const c = spec.containers[0] as SecuredContainer;
  assert.equal(spec.containers.length, 1);
  assert.equal(spec.hostNetwork, true, "the device and sysctls are the host's");
  assert.equal(spec.automountServiceAccountToken, false, "it talks to no API server");
  assert.equal(spec.serviceAccountName, undefined);
  assert.deepEqual(c.securityContext.capabilities?.add, ["NET_ADMIN"]);
  const sc = c.securityContext;
  assert.deepEqual(sc.capabilities?.drop, ["ALL"]);
  assert.equal(sc.allowPrivilegeEscalation, false);
  assert.equal(sc.readOnlyRootFilesystem, true);
  assert.notEqual(sc.privileged, true);
  assert.equal(sc.seccompProfile?.type, "RuntimeDefault");
  assert.ok(!spec.hostPID && !spec.hostIPC && spec.initContainers === undefined);
  // the args are `passlb agent` flags: decapsulation alone (no manifests, no DNAT, no health servers)
  const program = buildProgram({ stdout: () => {}, stderr: () => {}, readStdin: async () => "" }, () => {});
  const agent = program.commands.find((cmd) => cmd.name() === "agent")!;
  const flags = new Set(agent.options.map((o) => o.long));
  assert.equal(c.args[0], "agent");
  for (const arg of c.args.slice(1)) assert.ok(flags.has(arg.split("=")[0]!), `passlb agent has no ${arg}`);
  const value = (flag: string) => c.args.find((a) => a.startsWith(`${flag}=`))?.split("=")[1];
  assert.equal(value("--decap"), "vxlan-gpe");
  assert.equal(value("--encap-port"), "4790", "the LB hosts' default --encap-port");
  assert.equal(value("--manifests"), undefined);
  assert.equal(value("--dataplane"), undefined);
  // writable: bounded emptyDirs and exactly the host's IPv4 interface sysctls, where --proc-sys says
  const hostPaths = (spec.volumes ?? []).filter((v) => "hostPath" in v);
  assert.deepEqual(
    hostPaths.map((v) => v.hostPath),
    [{ path: "/proc/sys/net/ipv4/conf", type: "Directory" }],
  );
  const mount = c.volumeMounts?.find((m) => m.name === hostPaths[0]!.name);
  assert.equal(mount?.mountPath, `${value("--proc-sys")}/net/ipv4/conf`);
  for (const v of (spec.volumes ?? []).filter((x) => !("hostPath" in x)))
    assert.ok((v.emptyDir as { sizeLimit?: string } | undefined)?.sizeLimit, `${v.name}: a bounded emptyDir`);
  // probes on the dashboard port, bound to the host's address, and not kube-proxy's 10249
  assert.equal(c.livenessProbe.httpGet.path, "/healthz");
  assert.equal(c.readinessProbe.httpGet.path, "/readyz");
  const port = c.ports.find((p) => p.name === c.readinessProbe.httpGet.port)?.containerPort;
  for (const ip of ["192.0.2.7", "fd00::7"]) assert.deepEqual(dashboardBinds(c, ip), { host: ip, port });
  assert.notEqual(port, 10249);
  // the capability and every setting the agent makes are named in the manifest and the docs
  const manifest = readFileSync(join(dir, "decap-daemonset.yaml"), "utf8");
  const docsText = ["install.md", "agent-dataplane.md"].map((f) =>
    readFileSync(join(ROOT, "docs", f), "utf8"),
  );
  assert.ok(manifest.split("\n").some((l) => l.includes("NET_ADMIN") && l.includes("ip link")));
  for (const setting of [
    "net.ipv4.conf.plbvg0.rp_filter",
    "net.ipv4.conf.all.rp_filter",
    "127.0.0.42/32",
    "decap-vxlan-gpe",
  ])
    for (const [name, text] of [
      [
        "the manifest",
        setting === "decap-vxlan-gpe" ? readFileSync(join(dir, "kustomization.yaml"), "utf8") : manifest,
      ],
      ["docs/install.md", docsText[0]!],
      ["docs/agent-dataplane.md", docsText[1]!],
    ] as const)
      assert.ok(text.includes(setting), `${name} does not name ${setting}`);
  const missing = kustomizeAvailable();
  if (missing) return t.diagnostic(`${missing}: the build is not checked`);
  const overlay = mkdtempSync(join(tmpdir(), "plb-kustomize-"));
  try {
    const base = relative(overlay, DEPLOY);
    writeFileSync(
      join(overlay, "kustomization.yaml"),
      `resources: [${base}]\ncomponents: [${base}/components/decap-vxlan-gpe]\nimages:\n  - { name: passlb, newTag: "9.9.9" }\n`,
    );
    const built = parseAllDocuments(
      execFileSync("kubectl", ["kustomize", overlay], { encoding: "utf8", timeout: 30_000 }),
    ).map((d) => d.toJS() as Obj & { spec?: { template?: { spec: { containers: { image: string }[] } } } });
    const decap = built.find((o) => o.kind === "DaemonSet" && o.metadata.name === "passlb-decap");
    assert.equal(decap?.metadata.namespace, NAMESPACE);
    assert.equal(
      decap?.spec?.template?.spec.containers[0]?.image,
      "passlb:9.9.9",
      "the overlay's image reaches it",
    );
    assert.ok(built.some((o) => o.kind === "DaemonSet" && o.metadata.name === "passlb-lb"));
  } finally {
    rmSync(overlay, { recursive: true, force: true });
  }
});
