/**
 * Failure is loud (issue #14, section 1): when the API server refuses passlb's requests, the
 * process says so — an error log line with the server's Status message, the
 * `passlb_kube_api_errors_total` and `passlb_kube_api_failing` metrics, `/readyz` 503 with
 * the reason, `kubeApi` in `/api/v1/state` — and recovers as loudly. Against the fake API
 * server (test/support/fake-api-server.ts) with its `failNext()` hook answering the refusal;
 * the messages are the real server's wording for these refusals.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { buildProgram } from "../../src/cli/program.ts";
import { kubeApiPolicy } from "../../src/cluster/kube-api-health.ts";
import { ControllerRuntime } from "../../src/controller/controller-runtime.ts";
import { realClock } from "../../src/health/clock.ts";
import { KubeApiMonitor } from "../../src/web/kube-api-monitor.ts";
import { createLogger } from "../../src/web/logger.ts";
import { Metrics } from "../../src/web/metrics.ts";
import type { FakeApiServer } from "../support/fake-api-server.ts";
import { eventually, fakeCluster } from "./kube-fixture.ts";

// the answer kube-apiserver gave the millisecond Lease (issue #14)
const LEASE_REFUSED =
  'Lease in version "v1" cannot be handled as a Lease: parsing time "2026-12-01T14:38:33.611Z" as "2006-01-02T15:04:05.000000Z07:00": cannot parse ".611Z" as ".000000"';

type Line = Record<string, unknown>;
const jsonLines = (text: string): Line[] =>
  text
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Line);

/** the value of one series of passlb_kube_api_errors_total in an exposition */
function errorsCounted(text: string, verb: string, resource: string, code: string): number {
  const line = text
    .split("\n")
    .find((l) =>
      l.startsWith(`passlb_kube_api_errors_total{verb="${verb}",resource="${resource}",code="${code}"} `),
    );
  return line === undefined ? 0 : Number(line.split(" ")[1]);
}

async function get(url: string): Promise<{ status: number; text: string }> {
  const res = await fetch(url);
  return { status: res.status, text: await res.text() };
}

/** runs a passlb command in-process with its dashboard on a free loopback port */
async function runCli(
  t: { after: (fn: () => unknown) => void },
  api: FakeApiServer,
  args: string[],
): Promise<{ url: () => string; stderr: () => string; stop: () => Promise<void> }> {
  const dir = await mkdtemp(join(tmpdir(), "plb-loud-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const kubeconfig = join(dir, "kubeconfig");
  // each command speaks as its own ServiceAccount from deploy/ (the strict server's RBAC)
  await writeFile(kubeconfig, api.kubeconfigYaml(args[0] === "lb" ? "lb" : "controller"));
  let stderr = "";
  const stop = new AbortController();
  t.after(() => stop.abort());
  const program = buildProgram(
    { stdout: () => {}, stderr: (s) => (stderr += s), readStdin: async () => "" },
    () => {},
    () => stop.signal,
    { stdoutIsTTY: false, isRoot: false, hasNft: () => false, kubeEnv: {} },
  );
  const running = program.parseAsync([
    "node",
    "passlb",
    ...args,
    "--kubeconfig",
    kubeconfig,
    "--dashboard-address",
    "127.0.0.1:0",
    "--log-level",
    "info",
  ]);
  let url = "";
  await eventually(
    () => {
      url = String(jsonLines(stderr).find((l) => l.event === "dashboard_listening")?.url ?? "");
      return url !== "";
    },
    `the dashboard (stderr: ${stderr.slice(0, 400)})`,
  );
  return {
    url: () => url,
    stderr: () => stderr,
    stop: async () => {
      stop.abort();
      await running;
    },
  };
}

test("passlb controller: every Lease write refused → error log with the message, metric, /readyz 503; then it leads and recovers", {
  timeout: 40_000,
}, async (t) => {
  const api = await fakeCluster("../controller/cluster.yaml");
  t.after(() => api.close());
  // about six seconds of refusals at one attempt per 0.25 s: longer than the 2 s lease
  api.failNext({
    verb: ["create", "update"],
    resource: "coordination.k8s.io/leases",
    status: 400,
    count: 24,
    message: LEASE_REFUSED,
  });
  const cli = await runCli(t, api, [
    "controller",
    "--namespace",
    "passlb-system",
    "--identity",
    "loud",
    "--lease-duration",
    "2",
    "--renew-deadline",
    "1",
    "--retry-period",
    "0.25",
  ]);
  t.after(() => cli.stop());
  await eventually(
    async () => (await get(`${cli.url()}readyz`)).status === 503,
    `/readyz 503 (log: ${cli.stderr().slice(-600)})`,
    8000,
  );
  const ready = await get(`${cli.url()}readyz`);
  assert.match(ready.text, /^not ready\nlease failing for \d+s \(\d+ in a row, last create leases: 400\)/);
  assert.ok(ready.text.includes(LEASE_REFUSED), `the server's message in /readyz: ${ready.text}`);
  assert.equal((await get(`${cli.url()}healthz`)).status, 200, "alive: a restart would not help");
  const failing = jsonLines(cli.stderr()).filter((l) => l.event === "kube_api_failing");
  assert.equal(failing.length, 1, "one error line when it starts, not one per attempt");
  assert.equal(failing[0]?.level, "error");
  assert.equal(failing[0]?.reason, "lease");
  assert.equal(failing[0]?.code, "400");
  assert.ok(String(failing[0]?.msg).includes(LEASE_REFUSED));
  const metrics = (await get(`${cli.url()}metrics`)).text;
  const count = Number(
    /passlb_kube_api_errors_total\{verb="create",resource="leases",code="400"\} (\d+)/.exec(metrics)?.[1],
  );
  assert.ok(count >= 3, `refused creates counted: ${count}`);
  assert.match(metrics, /passlb_kube_api_failing\{channel="lease"\} 1/);
  const state = JSON.parse((await get(`${cli.url()}api/v1/state`)).text);
  assert.equal(state.kubeApi.ready, false);
  assert.equal(state.kubeApi.failing[0].channel, "lease");
  assert.equal(state.kubeApi.failing[0].message.includes(LEASE_REFUSED), true);

  // the refusals end: the controller takes the Lease, assigns, and says it recovered
  await eventually(
    () =>
      api.find("v1", "Service", "web", "shop")?.status !== undefined &&
      (api.find("v1", "Service", "web", "shop") as { status?: { loadBalancer?: { ingress?: unknown[] } } })
        .status?.loadBalancer?.ingress?.length === 1,
    "web's address after the refusals",
    20_000,
  );
  await eventually(async () => (await get(`${cli.url()}readyz`)).status === 200, "/readyz 200 again");
  assert.ok(jsonLines(cli.stderr()).some((l) => l.event === "kube_api_recovered" && l.reason === "lease"));
  assert.match((await get(`${cli.url()}metrics`)).text, /passlb_kube_api_failing\{channel="lease"\} 0/);
});

function monitored(api: FakeApiServer, manageEndpointSlices = false) {
  const lines: Line[] = [];
  const metrics = new Metrics();
  const monitor = new KubeApiMonitor({
    now: Date.now,
    policy: kubeApiPolicy(3000),
    metrics,
    logger: createLogger({ level: "info", component: "controller", write: (l) => lines.push(JSON.parse(l)) }),
  });
  const runtime = new ControllerRuntime({
    kubeConfig: api.kubeConfig("controller"),
    namespace: "passlb-system",
    identity: "a",
    controller: { defaultClass: false, ipMode: "VIP" },
    election: { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 250 },
    manageEndpointSlices,
    clock: realClock(),
    random: Math.random,
    apiCalls: monitor,
    tuning: {
      debounce: { quietMs: 20, maxMs: 200 },
      sourceBackoff: { initialMs: 20, maxMs: 200 },
      loopBackoff: { initialMs: 20, maxMs: 200 },
    },
  });
  return { lines, metrics, monitor, runtime };
}

test("Service status, pool status and Event writes refused again and again: each channel failing, with the server's message", {
  timeout: 30_000,
}, async (t) => {
  const api = await fakeCluster("../controller/cluster.yaml");
  api.remove("v1", "Service", "late", "shop");
  const invalid =
    'Service "web" is invalid: status.loadBalancer.ingress[0].ipMode: Invalid value: "VIP": must be empty when ip is empty';
  const forbidden =
    'events is forbidden: User "system:serviceaccount:passlb-system:passlb-controller" cannot create resource "events" in API group "" in the namespace "shop"';
  api.failNext({
    verb: "update",
    resource: "services",
    subresource: "status",
    status: 422,
    count: 1000,
    message: invalid,
  });
  api.failNext({ verb: "create", resource: "events", status: 403, count: 1000, message: forbidden });
  const poolInvalid =
    'LoadBalancerIPPool.passlb.io "main" is invalid: status.ipv4.used: Invalid value: "string": status.ipv4.used in body must be of type integer: "string"';
  api.failNext({
    verb: "update",
    resource: "passlb.io/loadbalancerippools",
    subresource: "status",
    status: 422,
    count: 1000,
    message: poolInvalid,
  });
  const { lines, metrics, monitor, runtime } = monitored(api);
  t.after(async () => {
    await runtime.stop();
    await api.close();
  });
  await runtime.start();
  await eventually(() => monitor.report().failing.length === 3, "three channels failing", 10_000);
  const report = monitor.report();
  assert.deepEqual(
    report.failing.map((f) => [f.channel, f.verb, f.resource, f.code]),
    [
      ["service_writes", "update", "services/status", "422"],
      ["pool_status", "update", "loadbalancerippools/status", "422"],
      ["events", "create", "events", "403"],
    ],
  );
  assert.ok(report.failing[0]?.message.includes(invalid));
  assert.ok(report.failing[1]?.message.includes(poolInvalid));
  assert.ok(report.failing[2]?.message.includes(forbidden));
  const errors = lines.filter((l) => l.level === "error" && l.event === "kube_api_failing");
  assert.deepEqual(errors.map((l) => l.reason).sort(), ["events", "pool_status", "service_writes"]);
  const text = await metrics.text();
  assert.ok(
    errorsCounted(text, "update", "services/status", "422") >= 3,
    "update services/status 422 counted",
  );
  assert.ok(errorsCounted(text, "create", "events", "403") >= 3, "create events 403 counted");
  assert.ok(
    errorsCounted(text, "update", "loadbalancerippools/status", "422") >= 3,
    "update loadbalancerippools/status 422 counted",
  );
  assert.doesNotMatch(text, /resource="leases"/, "the Lease itself was fine");
});

test("EndpointSlice writes refused: the endpointslices channel fails", { timeout: 30_000 }, async (t) => {
  const api = await fakeCluster("../controller/slices.yaml");
  const forbidden =
    'endpointslices.discovery.k8s.io is forbidden: User "system:serviceaccount:passlb-system:passlb-controller" cannot create resource "endpointslices" in API group "discovery.k8s.io" in the namespace "shop"';
  api.failNext({
    verb: "create",
    resource: "discovery.k8s.io/endpointslices",
    status: 403,
    count: 1000,
    message: forbidden,
  });
  const { monitor, runtime, metrics } = monitored(api, true);
  t.after(async () => {
    await runtime.stop();
    await api.close();
  });
  await runtime.start();
  await eventually(
    () => monitor.report().failing.some((f) => f.channel === "endpointslices"),
    "slices failing",
    10_000,
  );
  const f = monitor.report().failing.find((x) => x.channel === "endpointslices");
  assert.equal(f?.code, "403");
  assert.ok(f?.message.includes(forbidden));
  assert.match(
    await metrics.text(),
    /passlb_kube_api_errors_total\{verb="create",resource="endpointslices",code="403"\}/,
  );
});

test("passlb lb --kubeconfig: a list the server keeps refusing → reads failing in /readyz, /api/v1/state, the log and the metric", {
  timeout: 30_000,
}, async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const forbidden =
    'nodes is forbidden: User "system:serviceaccount:passlb-system:passlb-lb" cannot list resource "nodes" in API group "" at the cluster scope';
  api.failNext({ verb: "list", resource: "nodes", status: 403, count: 1000, message: forbidden });
  const cli = await runCli(t, api, ["lb", "--dataplane", "userspace"]);
  t.after(() => cli.stop());
  await eventually(async () => (await get(`${cli.url()}readyz`)).status === 503, "/readyz 503", 15_000);
  const ready = (await get(`${cli.url()}readyz`)).text;
  assert.match(ready, /reads failing for \d+s \(\d+ in a row, last list nodes: 403\)/);
  assert.ok(ready.includes(forbidden), ready);
  const state = JSON.parse((await get(`${cli.url()}api/v1/state`)).text);
  assert.deepEqual(
    state.kubeApi.failing.map((f: { channel: string; resource: string }) => [f.channel, f.resource]),
    [["reads", "nodes"]],
    "only the refused list: the watches that work do not hide it, nor does it stand for them",
  );
  const failing = jsonLines(cli.stderr()).find((l) => l.event === "kube_api_failing");
  assert.equal(failing?.level, "error");
  assert.equal(failing?.resource, "nodes");
  assert.ok(
    errorsCounted((await get(`${cli.url()}metrics`)).text, "list", "nodes", "403") >= 3,
    "list nodes 403 counted",
  );
});
