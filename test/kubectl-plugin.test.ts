// `kubectl passlb` end to end against a fake kubectl (test/support/fake-kubectl.ts) first on
// PATH, answering from test/fixtures/kubectl/: the real plugin program, the real runner
// (child_process), the real decode and plan path. Goldens via test/golden.ts
// (UPDATE_GOLDEN=1 rewrites them; review the diff).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { execKubectl } from "../src/kubectl/kubectl-runner.ts";
import { buildKubectlProgram, runKubectlProgram } from "../src/kubectl/plugin-program.ts";
import { assertGolden } from "./golden.ts";
import { fakeKubectl, type Route } from "./support/fake-kubectl.ts";

const FIXTURES = join(import.meta.dirname, "fixtures", "kubectl");
const POOLS = "get loadbalancerippools -o json";
const CLUSTER = "get services,nodes,endpointslices,namespaces,pods -A -o json";

interface Run {
  code: number;
  stdout: string;
  stderr: string;
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

async function withFake<T>(
  overrides: Record<string, Route | null>,
  body: (fake: ReturnType<typeof fakeKubectl>) => Promise<T>,
): Promise<T> {
  const fake = fakeKubectl(FIXTURES, overrides);
  try {
    return await body(fake);
  } finally {
    fake.remove();
  }
}

test("plan: every Service of the cluster, pools from its LoadBalancerIPPools (text golden)", async () => {
  await withFake({}, async (fake) => {
    const r = await plugin(["plan"], fake.env);
    assert.equal(r.code, 0, r.stderr);
    assertGolden(join(FIXTURES, "plan.txt"), r.stdout);
    assert.match(r.stderr, /LoadBalancerIPPool retired is disabled/);
    assert.deepEqual(
      fake
        .calls()
        .map((c) => c.join(" "))
        .sort(),
      [POOLS, CLUSTER].sort(),
    );
  });
});

test("plan web -n demo -o json: that Service's page, its VIP kept from status (json golden)", async () => {
  await withFake({}, async (fake) => {
    const r = await plugin(["plan", "web", "-n", "demo", "-o", "json"], fake.env);
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
});

test("plan: a class-less Service is planned only with --default-class; a name is looked up in every namespace", async () => {
  await withFake({}, async (fake) => {
    const without = await plugin(["plan", "dns", "-o", "json"], fake.env);
    assert.equal(without.code, 0, without.stderr);
    const a = JSON.parse(without.stdout) as { services: unknown[]; skipped: { service: string }[] };
    assert.equal(a.services.length, 0);
    assert.deepEqual(
      a.skipped.map((s) => s.service),
      ["demo/dns"],
    );
    const withClass = await plugin(["plan", "dns", "--default-class", "-o", "json"], fake.env);
    const b = JSON.parse(withClass.stdout) as { services: { service: string }[] };
    assert.deepEqual(
      b.services.map((s) => s.service),
      ["demo/dns"],
    );
  });
});

test("plan --provider gke web: the provider view of the live Service", async () => {
  await withFake({}, async (fake) => {
    const r = await plugin(["plan", "demo/web", "--provider", "gke", "-o", "json"], fake.env);
    assert.ok(r.code === 0 || r.code === 1, r.stderr);
    const plans = JSON.parse(r.stdout) as { service: string }[];
    assert.deepEqual(
      plans.map((p) => p.service),
      ["demo/web"],
    );
  });
});

test("plan: an unknown Service is an error naming it", async () => {
  await withFake({}, async (fake) => {
    const r = await plugin(["plan", "nope", "-n", "demo"], fake.env);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /Service demo\/nope not found/);
  });
});

test("status: VIPs and conditions from the API server, nodes as the reachable LB host sees them, the other reported unreachable", async () => {
  await withFake({}, async (fake) => {
    const r = await plugin(["status"], fake.env);
    assert.equal(r.code, 1, "an unreachable LB host makes the exit code 1");
    assertGolden(join(FIXTURES, "status.txt"), r.stdout);
    assert.match(r.stderr, /LB host passlb-lb-m4t9c on node lb-2 is unreachable/);
    // the controller cannot take its Lease: said with the server's message, and in the exit code
    assert.match(
      r.stdout,
      /passlb-controller-6d9f8c-q2w7r {2}node cp-1 {2}up 0m47s, KUBERNETES API FAILING\n {6}lease failing for 46s/,
    );
    assert.match(r.stdout, /cannot parse "\.611Z" as "\.000000"/);
    assert.match(r.stderr, /warning: passlb-controller-6d9f8c-q2w7r: the API server refuses/);
    const json = await plugin(["status", "web", "-o", "json"], fake.env);
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
});

test("status: every LB host and controller pod reachable, no API failure → exit 0", async () => {
  await withFake(
    {
      "get --raw /api/v1/namespaces/passlb-system/pods/passlb-lb-m4t9c:9797/proxy/api/v1/state": {
        stdout: "state-lb-1.json",
      },
      "get --raw /api/v1/namespaces/passlb-system/pods/passlb-controller-6d9f8c-q2w7r:9797/proxy/api/v1/state":
        {
          stdout: "state-controller-ok.json",
        },
    },
    async (fake) => {
      const r = await plugin(["status", "web"], fake.env);
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /LB hosts in passlb-system: 2 of 2 reachable/);
    },
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

test("CRD absent and no access are named as such", async () => {
  await withFake(
    {
      [POOLS]: { stderr: 'error: the server doesn\'t have a resource type "loadbalancerippools"\n', exit: 1 },
    },
    async (fake) => {
      const r = await plugin(["plan"], fake.env);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /LoadBalancerIPPool CRD .* is not installed.*\[crd_missing\]/);
    },
  );
  await withFake(
    {
      [CLUSTER]: {
        stderr:
          'Error from server (Forbidden): services is forbidden: User "jane" cannot list resource "services" in API group "" at the cluster scope\n',
        exit: 1,
      },
    },
    async (fake) => {
      const r = await plugin(["plan"], fake.env);
      assert.equal(r.code, 1);
      assert.match(
        r.stderr,
        /no access: kubectl get services,nodes.* was denied.*User "jane".*\[kubectl_forbidden\]/,
      );
    },
  );
});

test("--context and --kubeconfig go to every kubectl call", async () => {
  await withFake({}, async (fake) => {
    await plugin(["--context", "kind-plb", "--kubeconfig", "/tmp/plb-kc", "plan"], fake.env);
    const calls = fake.calls();
    assert.equal(calls.length, 2);
    for (const c of calls)
      assert.deepEqual(c.slice(0, 2), ["--kubeconfig=/tmp/plb-kc", "--context=kind-plb"]);
  });
});

test("bin/kubectl-passlb runs the plugin (as kubectl would run it)", async () => {
  await withFake({}, async (fake) => {
    const r = spawnSync(
      process.execPath,
      [join(import.meta.dirname, "..", "bin", "kubectl-passlb"), "plan", "web", "-n", "demo", "-o", "json"],
      { env: fake.env, encoding: "utf8", timeout: 30_000 },
    );
    assert.equal(r.status, 0, r.stderr);
    const inProcess = await plugin(["plan", "web", "-n", "demo", "-o", "json"], fake.env);
    assert.deepEqual(JSON.parse(r.stdout), JSON.parse(inProcess.stdout));
  });
});
