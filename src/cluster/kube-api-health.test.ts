import assert from "node:assert/strict";
import { test } from "node:test";
import { KubeApiMonitor } from "../web/kube-api-monitor.ts";
import { createLogger } from "../web/logger.ts";
import { Metrics } from "../web/metrics.ts";
import {
  failingChanges,
  failingChannels,
  failingLine,
  isChannelFault,
  type KubeApiHealthState,
  kubeApiCode,
  kubeApiPolicy,
  kubeApiReport,
  recordKubeApiFailure,
  recordKubeApiSuccess,
} from "./kube-api-health.ts";

const LEASE_MS = 15_000;
const policy = kubeApiPolicy(LEASE_MS);
const refused = (message = "Lease create: HTTP 400: cannot parse") => ({
  verb: "create",
  resource: "leases",
  code: "400",
  message,
});

test("lease: failing only once no attempt succeeded for longer than the lease duration", () => {
  let s: KubeApiHealthState = {};
  for (let t = 0; t <= 14_000; t += 2_000) s = recordKubeApiFailure(s, "lease", refused(), t);
  assert.deepEqual(failingChannels(s, policy, 14_999), [], "within the lease duration: not yet");
  const failing = failingChannels(s, policy, 15_000);
  assert.equal(failing.length, 1);
  assert.deepEqual(
    { channel: failing[0]?.channel, sinceMs: failing[0]?.sinceMs, failures: failing[0]?.failures },
    { channel: "lease", sinceMs: 0, failures: 8 },
  );
  assert.equal(failing[0]?.message, "Lease create: HTTP 400: cannot parse");
  s = recordKubeApiSuccess(s, "lease");
  assert.deepEqual(failingChannels(s, policy, 60_000), [], "one success clears it");
});

test("writes and reads: three failures in a row, whatever the time; a success between resets the count", () => {
  let s: KubeApiHealthState = {};
  const write = { verb: "update", resource: "services/status", code: "422", message: "invalid" };
  s = recordKubeApiFailure(s, "service_writes", write, 0);
  s = recordKubeApiFailure(s, "service_writes", write, 1);
  assert.deepEqual(failingChannels(s, policy, 2), []);
  s = recordKubeApiSuccess(s, "service_writes");
  s = recordKubeApiFailure(s, "service_writes", write, 3);
  s = recordKubeApiFailure(s, "service_writes", write, 4);
  assert.deepEqual(failingChannels(s, policy, 5), []);
  s = recordKubeApiFailure(s, "service_writes", write, 5);
  assert.deepEqual(
    failingChannels(s, policy, 5).map((f) => [f.channel, f.sinceMs, f.failures]),
    [["service_writes", 3, 3]],
  );
});

test("reads: a success of another resource leaves a failing one failing", () => {
  let s: KubeApiHealthState = {};
  const pools = { verb: "list", resource: "loadbalancerippools", code: "403", message: "forbidden" };
  for (let i = 0; i < 3; i++) s = recordKubeApiFailure(s, "reads", pools, i);
  s = recordKubeApiSuccess(s, "reads", "services");
  assert.equal(failingChannels(s, policy, 3).length, 1);
  s = recordKubeApiSuccess(s, "reads", "loadbalancerippools");
  assert.equal(failingChannels(s, policy, 3).length, 0);
});

test("codes: HTTP status or unreachable; 409 and 404 are answers, not faults", () => {
  assert.equal(kubeApiCode(400), "400");
  assert.equal(kubeApiCode(undefined), "unreachable");
  assert.equal(kubeApiCode(0), "unreachable");
  assert.equal(isChannelFault(409), false);
  assert.equal(isChannelFault(404), false);
  assert.equal(isChannelFault(403), true);
  assert.equal(
    isChannelFault(409, "lease"),
    true,
    "on the Lease a race lost for the lease duration is stuck",
  );
  assert.equal(isChannelFault(undefined), true);
});

test("report, line and changes", () => {
  let s: KubeApiHealthState = {};
  s = recordKubeApiFailure(s, "lease", refused(), 0);
  const failing = failingChannels(s, policy, 20_000);
  const report = kubeApiReport(failing, 20_000);
  assert.equal(report.ready, false);
  assert.equal(report.failing[0]?.since, "1970-01-01T00:00:00.000Z");
  assert.equal(report.failing[0]?.forSeconds, 20);
  assert.equal(
    failingLine(report.failing[0] as never),
    "lease failing for 20s (1 in a row, last create leases: 400): Lease create: HTTP 400: cannot parse",
  );
  assert.deepEqual(failingChanges([], failing).started.length, 1);
  assert.deepEqual(failingChanges(failing, []).ended, ["lease"]);
  assert.deepEqual(kubeApiReport([], 0), { ready: true, failing: [] });
});

test("the monitor: metric per refused request, one error line when a channel starts failing, a reminder, recovery", async () => {
  let now = 0;
  const lines: Record<string, unknown>[] = [];
  const metrics = new Metrics();
  const monitor = new KubeApiMonitor({
    now: () => now,
    policy,
    metrics,
    logger: createLogger({
      level: "debug",
      component: "controller",
      write: (l) => lines.push(JSON.parse(l)),
    }),
    remindMs: 30_000,
  });
  const error = Object.assign(
    new Error("create Lease passlb-system/passlb-controller: HTTP 400: cannot parse"),
    {
      details: { status: 400 },
    },
  );
  for (; now <= 16_000; now += 2_000) monitor.failed("lease", { verb: "create", resource: "leases" }, error);
  monitor.failed(
    "lease",
    { verb: "update", resource: "leases" },
    Object.assign(new Error("lost"), { details: { status: 409 } }),
  );
  const errors = () => lines.filter((l) => l.level === "error");
  assert.equal(errors().length, 1, "logged once when it starts");
  assert.equal(errors()[0]?.event, "kube_api_failing");
  assert.equal(errors()[0]?.reason, "lease");
  assert.equal(errors()[0]?.code, "400");
  assert.match(String(errors()[0]?.msg), /HTTP 400: cannot parse/);
  const text = await metrics.text();
  assert.match(text, /passlb_kube_api_errors_total\{verb="create",resource="leases",code="400"\} 9/);
  assert.match(text, /passlb_kube_api_errors_total\{verb="update",resource="leases",code="409"\} 1/);
  assert.match(text, /passlb_kube_api_failing\{channel="lease"\} 1/);
  assert.equal(monitor.report().ready, false);
  now += 31_000;
  monitor.report();
  assert.equal(errors().length, 2, "reminded while it lasts");
  monitor.ok("lease");
  assert.equal(monitor.report().ready, true);
  assert.ok(lines.some((l) => l.event === "kube_api_recovered" && l.reason === "lease"));
  assert.match(await metrics.text(), /passlb_kube_api_failing\{channel="lease"\} 0/);
});
