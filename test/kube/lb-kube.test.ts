/**
 * `passlb lb --kubeconfig FILE --dataplane userspace` against the fake API server: the LB
 * listens on the VIPs the Services' status gives (never its own IPAM), skips a Service
 * without one with a notice until the controller writes it, reports a bad object, follows
 * changes, and keeps serving while the API server is away. Loopback only (127.77.0.0/16).
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { chooseLbInput } from "../../src/cli/lb-kube.ts";
import { buildProgram } from "../../src/cli/program.ts";
import { eventually, fakeCluster } from "./kube-fixture.ts";

const PORT = 20000 + Math.floor(Math.random() * 20000);

function canConnect(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const s = connect({ host, port });
    s.setTimeout(1000, () => {
      s.destroy();
      resolve(false);
    });
    s.once("connect", () => {
      s.destroy();
      resolve(true);
    });
    s.once("error", () => resolve(false));
  });
}

test("passlb lb in Kubernetes mode, userspace data plane", { timeout: 30_000 }, async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const dir = await mkdtemp(join(tmpdir(), "plb-kube-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, "kubeconfig");
  await writeFile(kubeconfig, api.kubeconfigYaml("lb"));
  // loopback VIPs on a free-ish high port: the LB binds them without root
  const web = api.find("v1", "Service", "web", "shop")!;
  api.put({
    ...web,
    spec: {
      ...(web.spec as object),
      ports: [{ name: "http", port: PORT, protocol: "TCP", nodePort: 30080 }],
    },
    status: { loadBalancer: { ingress: [{ ip: "127.77.0.10" }] } },
  });
  const pending = api.find("v1", "Service", "pending", "shop")!;
  api.put({
    ...pending,
    spec: {
      ...(pending.spec as object),
      ports: [{ name: "http", port: PORT, protocol: "TCP", nodePort: 30081 }],
    },
  });

  let stdout = "";
  let stderr = "";
  let exitCode = 0;
  const stop = new AbortController();
  t.after(() => stop.abort());
  const program = buildProgram(
    {
      stdout: (s) => {
        stdout += s;
      },
      stderr: (s) => {
        stderr += s;
      },
      readStdin: async () => "",
    },
    (c) => {
      exitCode = c;
    },
    () => stop.signal,
    { stdoutIsTTY: false, isRoot: false, hasNft: () => false, kubeEnv: {} },
  );
  const running = program.parseAsync([
    "node",
    "passlb",
    "lb",
    "--kubeconfig",
    kubeconfig,
    "--dataplane",
    "userspace",
    "--dashboard-address",
    "off",
    "--log-level",
    "silent",
  ]);

  await eventually(
    () => stdout.includes(`shop/web: ingress 127.77.0.10`),
    `the web VIP (stdout: ${stdout})`,
    15_000,
  );
  assert.ok(await canConnect("127.77.0.10", PORT), "the LB listens on the status address");
  assert.match(stderr, /shop\/pending: no address in status\.loadBalancer\.ingress yet/);
  assert.match(stderr, /object left out: Service shop\/broken: spec\.ports\[0\]\.port/);
  assert.doesNotMatch(stdout, /shop\/pending: ingress/, "no VIP of its own for a Service without status");

  // the controller writes the address: the LB follows
  const now = api.find("v1", "Service", "pending", "shop")!;
  api.put({ ...now, status: { loadBalancer: { ingress: [{ ip: "127.77.0.11" }] } } });
  await eventually(() => stdout.includes("shop/pending: ingress 127.77.0.11"), "the pending VIP", 10_000);
  assert.ok(await canConnect("127.77.0.11", PORT));

  // the API server goes away: the LB keeps serving what it has
  await api.stop();
  await new Promise((r) => setTimeout(r, 300));
  assert.ok(await canConnect("127.77.0.10", PORT), "still serving while the API server is down");

  stop.abort();
  await running;
  assert.equal(exitCode, 0);
  assert.equal(await canConnect("127.77.0.10", PORT), false, "listeners closed on shutdown");
  assert.deepEqual(api.forbidden(), [], "passlb lb needs nothing deploy/rbac-lb.yaml does not grant");
});

test("the LB's input: manifests win, a kubeconfig is explicit or found, nothing is an error", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "plb-kube-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, "config");
  await writeFile(
    file,
    "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://192.0.2.1:6443'}}]\nusers: [{name: u, user: {}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n",
  );
  assert.deepEqual(chooseLbInput({ filename: ["a.yaml"] }, { KUBECONFIG: file }), { kind: "manifests" });
  assert.match(String(chooseLbInput({ filename: ["a.yaml"], kubeconfig: file }, {})), /not both/);
  const found = chooseLbInput({ filename: [] }, { KUBECONFIG: file });
  assert.ok(typeof found === "object" && found.kind === "kube");
  assert.equal(found.kind === "kube" && found.found.server, "https://192.0.2.1:6443");
  const home = chooseLbInput({ filename: [] }, { HOME: join(dir, "nowhere") });
  assert.match(String(home), /nothing to read/);
  assert.match(
    String(chooseLbInput({ filename: [], kubeconfig: join(dir, "missing") }, {})),
    /api_config_invalid/,
  );
  assert.match(String(chooseLbInput({ filename: [], inCluster: true }, {})), /KUBERNETES_SERVICE_HOST/);
});
