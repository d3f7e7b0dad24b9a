// `kubectl passlb` end to end with the real kubectl (/usr/bin/kubectl) against the strict
// test API server (test/support/fake-api-server.ts, over TLS: client-go sends a token only
// over TLS) holding the objects of test/fixtures/kubectl/: the real plugin program, the real
// runner (child_process), real kubectl discovery, lists, errors and the pod proxy, the real
// decode and plan path. Goldens via test/golden.ts (UPDATE_GOLDEN=1 rewrites them).
// Without kubectl on PATH every test but "kubectl missing" skips, saying so.
import assert from "node:assert/strict";
import { execFile, spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { execKubectl } from "../src/kubectl/kubectl-runner.ts";
import { buildKubectlProgram, runKubectlProgram } from "../src/kubectl/plugin-program.ts";
import { assertGolden } from "./golden.ts";
import { FakeApiServer, type FakeApiServerOptions, type FakeIdentity } from "./support/fake-api-server.ts";
import { selfSignedCert, type TlsPair } from "./support/fake-api-tls.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "kubectl");
const KUBECTL = spawnSync("kubectl", ["version", "--client"], { encoding: "utf8" });
const NO_KUBECTL =
  KUBECTL.error || KUBECTL.status !== 0 ? "kubectl is not on PATH (Debian: kubernetes-client)" : false;
const TLS: TlsPair | undefined = NO_KUBECTL ? undefined : selfSignedCert();
const SKIP =
  NO_KUBECTL || (TLS ? false : "openssl is missing: the fake API server needs a certificate for kubectl");
if (SKIP) console.log(`# kubectl plugin tests skipped: ${SKIP}`);

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

interface Cluster {
  readonly api: FakeApiServer;
  /** kubectl's environment: KUBECONFIG at the fake, its own HOME (discovery cache) */
  readonly env: NodeJS.ProcessEnv;
  readonly dir: string;
}

/** The fake API server with the fixture cluster, LB hosts answering through the pod proxy. */
async function withCluster<T>(
  body: (c: Cluster) => Promise<T>,
  o: {
    as?: FakeIdentity;
    options?: FakeApiServerOptions;
    reachable?: string[];
    /** what the controller pod's /api/v1/state says (default: its Lease writes are refused) */
    controllerState?: "state-controller-failing.json" | "state-controller-ok.json";
  } = {},
): Promise<T> {
  const api = new FakeApiServer({ ...o.options, ...(TLS ? { tls: TLS } : {}) });
  await api.start();
  const dir = mkdtempSync(join(tmpdir(), "plb-kubectl-real-"));
  try {
    for (const f of ["cluster.json", "pools.json", "lb-pods.json", "controller-pods.json"]) {
      if (f === "pools.json" && o.options?.customResources === false) continue;
      for (const item of JSON.parse(readFileSync(join(FIXTURES, f), "utf8")).items) api.put(item);
    }
    const state = JSON.parse(readFileSync(join(FIXTURES, "state-lb-1.json"), "utf8"));
    const controllerPod = "passlb-controller-6d9f8c-q2w7r";
    const controllerState = JSON.parse(
      readFileSync(join(FIXTURES, o.controllerState ?? "state-controller-failing.json"), "utf8"),
    );
    const reachable = new Set([...(o.reachable ?? ["passlb-lb-7kq2x"]), controllerPod]);
    // a reachable LB host answers /api/v1/state; the other one's dashboard answers 503
    api.podProxy = (_ns, pod, _port, path) =>
      reachable.has(pod) && path === "/api/v1/state"
        ? { status: 200, body: pod === controllerPod ? controllerState : state }
        : { status: 503, body: "not ready" };
    writeFileSync(join(dir, "kubeconfig"), api.kubeconfigYaml(o.as ?? "admin"));
    const env = { ...process.env, KUBECONFIG: join(dir, "kubeconfig"), HOME: dir };
    return await body({ api, env, dir });
  } finally {
    await api.close();
    // a kubectl the plugin started may still be writing its discovery cache under $HOME
    // when the plugin has already exited on another call's error (seen under load: ENOTEMPTY)
    rmSync(dir, { recursive: true, force: true, maxRetries: 10, retryDelay: 100 });
  }
}

async function plugin(args: string[], env: NodeJS.ProcessEnv): Promise<Run> {
  const out = { code: 0, stdout: "", stderr: "" };
  const io = {
    stdout: (t: string) => {
      out.stdout += t;
    },
    stderr: (t: string) => {
      out.stderr += t;
    },
    readStdin: async () => "",
  };
  const setExitCode = (c: number) => {
    out.code = c;
  };
  const program = buildKubectlProgram(io, setExitCode, (globalArgs) => execKubectl({ env, globalArgs }));
  await runKubectlProgram(program, ["node", "kubectl-passlb", ...args], io, setExitCode);
  return out;
}

const opts = { skip: SKIP };

/** what kubectl asked the API server, as "verb resource" (discovery left out) */
const asked = (api: FakeApiServer) =>
  [
    ...new Set(
      api
        .requests()
        .filter((r) => r.resource !== "")
        .map((r) => `${r.verb} ${r.resource}${r.subresource ? `/${r.subresource}` : ""}`),
    ),
  ].sort();

test(
  "plan: every Service of the cluster, pools from its LoadBalancerIPPools (text golden)",
  opts,
  async () => {
    await withCluster(async ({ api, env }) => {
      const r = await plugin(["plan"], env);
      assert.equal(r.code, 0, r.stderr);
      assertGolden(join(FIXTURES, "plan.txt"), r.stdout);
      assert.match(r.stderr, /LoadBalancerIPPool retired is disabled/);
      assert.deepEqual(asked(api), [
        "list discovery.k8s.io/endpointslices",
        "list namespaces",
        "list nodes",
        "list passlb.io/loadbalancerippools",
        "list pods",
        "list services",
      ]);
    });
  },
);

test(
  "plan web -n demo -o json: that Service's page, its VIP kept from status (json golden)",
  opts,
  async () => {
    await withCluster(async ({ env }) => {
      const r = await plugin(["plan", "web", "-n", "demo", "-o", "json"], env);
      assert.equal(r.code, 0, r.stderr);
      const doc = JSON.parse(r.stdout) as {
        services: { service: string; vips: { address: string; source: string }[] }[];
      };
      assert.deepEqual(
        doc.services.map((s) => s.service),
        ["demo/web"],
      );
      assert.deepEqual(
        doc.services[0]?.vips.map((v) => [v.address, v.source]),
        [["203.0.113.5", "status"]],
      );
      assertGolden(join(FIXTURES, "plan-web.json"), doc);
    });
  },
);

test(
  "plan: a class-less Service is planned only with --default-class; a name is looked up in every namespace",
  opts,
  async () => {
    await withCluster(async ({ env }) => {
      const without = await plugin(["plan", "dns", "-o", "json"], env);
      assert.equal(without.code, 0, without.stderr);
      const a = JSON.parse(without.stdout) as { services: unknown[]; skipped: { service: string }[] };
      assert.equal(a.services.length, 0);
      assert.deepEqual(
        a.skipped.map((s) => s.service),
        ["demo/dns"],
      );
      const withClass = await plugin(["plan", "dns", "--default-class", "-o", "json"], env);
      const b = JSON.parse(withClass.stdout) as { services: { service: string }[] };
      assert.deepEqual(
        b.services.map((s) => s.service),
        ["demo/dns"],
      );
    });
  },
);

test("plan --provider gke web: the provider view of the live Service", opts, async () => {
  await withCluster(async ({ env }) => {
    const r = await plugin(["plan", "demo/web", "--provider", "gke", "-o", "json"], env);
    assert.ok(r.code === 0 || r.code === 1, r.stderr);
    const plans = JSON.parse(r.stdout) as { service: string }[];
    assert.deepEqual(
      plans.map((p) => p.service),
      ["demo/web"],
    );
  });
});

test("plan: an unknown Service is an error naming it", opts, async () => {
  await withCluster(async ({ env }) => {
    const r = await plugin(["plan", "nope", "-n", "demo"], env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Service demo\/nope not found/);
  });
});

test(
  "status: VIPs and conditions from the API server, nodes as the reachable LB host sees them, the other reported unreachable",
  opts,
  async () => {
    await withCluster(async ({ api, env }) => {
      const r = await plugin(["status"], env);
      assert.equal(r.code, 1, "an unreachable LB host makes the exit code 1");
      assertGolden(join(FIXTURES, "status.txt"), r.stdout);
      assert.match(r.stderr, /LB host passlb-lb-m4t9c on node lb-2 is unreachable/);
      assert.ok(asked(api).includes("get pods/proxy"), "the LB hosts were asked through the pod proxy");
      // the controller cannot take its Lease: said with the server's message, and in the exit code
      assert.match(
        r.stdout,
        /passlb-controller-6d9f8c-q2w7r {2}node cp-1 {2}up 0m47s, KUBERNETES API FAILING\n {6}lease failing for 46s/,
      );
      assert.match(r.stdout, /cannot parse "\.611Z" as "\.000000"/);
      assert.match(r.stderr, /warning: passlb-controller-6d9f8c-q2w7r: the API server refuses/);
      const json = await plugin(["status", "web", "-o", "json"], env);
      const report = JSON.parse(json.stdout) as {
        lbHosts: { pod: string; reachable: boolean; error?: string }[];
        services: {
          service: string;
          vips: { address: string }[];
          nodes: { node: string; hosts: Record<string, unknown> }[];
        }[];
      };
      assert.deepEqual(
        report.lbHosts.map((h) => [h.pod, h.reachable]),
        [
          ["passlb-lb-7kq2x", true],
          ["passlb-lb-m4t9c", false],
        ],
      );
      assert.match(report.lbHosts[1]?.error ?? "", /ServiceUnavailable/);
      assert.deepEqual(
        report.services.map((s) => [s.service, s.vips.map((v) => v.address)]),
        [["demo/web", ["203.0.113.5"]]],
      );
      assert.deepEqual(report.services[0]?.nodes.find((n) => n.node === "node-b1")?.hosts, {
        "passlb-lb-7kq2x": { state: "unhealthy", weight: 2, reason: "has_local_endpoints" },
      });
    });
  },
);

test("status: every LB host and controller pod reachable, no API failure → exit 0", opts, async () => {
  await withCluster(
    async ({ env }) => {
      const r = await plugin(["status", "web"], env);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /LB hosts in passlb-system: 2 of 2 reachable/);
      assert.match(r.stdout, /Controller pods in passlb-system: 1 of 1 reachable/);
      assert.doesNotMatch(r.stdout, /FAILING/);
    },
    { reachable: ["passlb-lb-7kq2x", "passlb-lb-m4t9c"], controllerState: "state-controller-ok.json" },
  );
});

test("kubectl missing: the error says so, exit 1", async () => {
  const empty = mkdtempSync(join(tmpdir(), "plb-nopath-"));
  try {
    const r = await plugin(["plan"], { ...process.env, PATH: empty });
    assert.equal(r.code, 1);
    assert.match(r.stderr, /kubectl was not found on PATH.*\[kubectl_missing\]/);
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

test("CRD absent and no access are named as such, from the real kubectl's words", opts, async () => {
  await withCluster(
    async ({ env }) => {
      const r = await plugin(["plan"], env);
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, /LoadBalancerIPPool CRD .* is not installed.*\[crd_missing\]/, r.stderr);
      assert.match(r.stderr, /the server doesn't have a resource type "loadbalancerippools"/, r.stderr);
    },
    { options: { customResources: false } },
  );
  await withCluster(
    async ({ env }) => {
      const r = await plugin(["plan"], env);
      assert.equal(r.code, 1, r.stderr);
      assert.match(
        r.stderr,
        /no access: kubectl get .* was denied.*User "jane".*\[kubectl_forbidden\]/,
        r.stderr,
      );
      assert.match(
        r.stderr,
        /Error from server \(Forbidden\): .* is forbidden: User "jane" cannot list resource/,
      );
    },
    { as: "jane" },
  );
});

test("--context and --kubeconfig go to every kubectl call", opts, async () => {
  await withCluster(async ({ api, env, dir }) => {
    const { KUBECONFIG: _k, ...bare } = env;
    const kubeconfig = join(dir, "kubeconfig");
    const ok = await plugin(
      ["--context", "fake", "--kubeconfig", kubeconfig, "plan", "web", "-n", "demo"],
      bare,
    );
    assert.equal(ok.code, 0, `kubectl found the server only through the flags: ${ok.stderr}`);
    assert.ok(api.requests().some((r) => r.verb === "list" && r.resource === "services"));
    const wrong = await plugin(["--context", "nope", "--kubeconfig", kubeconfig, "plan"], bare);
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /context was not found for specified context: nope/);
  });
});

test("bin/kubectl-passlb runs the plugin (as kubectl would run it)", opts, async () => {
  await withCluster(async ({ env }) => {
    // async: the fake API server runs in this process and must keep answering
    const r = await new Promise<{ status: number | null; stdout: string; stderr: string }>((resolve) => {
      execFile(
        process.execPath,
        [join(import.meta.dirname, "..", "bin", "kubectl-passlb"), "plan", "web", "-n", "demo", "-o", "json"],
        { env, encoding: "utf8", timeout: 30_000 },
        (error, stdout, stderr) =>
          resolve({ status: error ? ((error.code as number | null) ?? 1) : 0, stdout, stderr }),
      );
    });
    assert.equal(r.status, 0, r.stderr);
    const inProcess = await plugin(["plan", "web", "-n", "demo", "-o", "json"], env);
    assert.deepEqual(JSON.parse(r.stdout), JSON.parse(inProcess.stdout));
  });
});
