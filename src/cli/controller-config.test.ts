import assert from "node:assert/strict";
import { test } from "node:test";
import { type ControllerFlags, controllerConfig } from "./controller-config.ts";

/** What commander hands over for `passlb controller` with no flags, changed by `mutate`. */
function flags(mutate: (f: ControllerFlags) => void = () => {}): ControllerFlags {
  const f: ControllerFlags = {
    namespace: "passlb-system",
    acceptClass: [],
    ipMode: "VIP",
    leaseDuration: "15",
    renewDeadline: "10",
    retryPeriod: "2",
    dashboardAddress: "127.0.0.1:9798",
    logLevel: "info",
  };
  mutate(f);
  return f;
}

test("the defaults: VIP mode, 15/10/2 s Lease timing, no EndpointSlices, identity left to the host", () => {
  assert.deepEqual(controllerConfig(flags()), {
    ok: true,
    config: {
      kube: { kubeconfig: undefined, inCluster: undefined },
      namespace: "passlb-system",
      identity: undefined,
      controller: { defaultClass: false, acceptClasses: [], ipMode: "VIP" },
      election: { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 },
      manageEndpointSlices: false,
    },
  });
});

test("every flag reaches the config", () => {
  const result = controllerConfig(
    flags((f) => {
      f.kubeconfig = "/tmp/kc";
      f.namespace = "lb";
      f.identity = "replica-1";
      f.defaultClass = true;
      f.acceptClass = ["io.cilium/l2-announcer"];
      f.ipMode = "Proxy";
      f.leaseDuration = "4";
      f.renewDeadline = "2.5";
      f.retryPeriod = "0.25";
      f.manageEndpointslices = true;
    }),
  );
  assert.ok(result.ok);
  assert.deepEqual(result.config, {
    kube: { kubeconfig: "/tmp/kc", inCluster: undefined },
    namespace: "lb",
    identity: "replica-1",
    controller: { defaultClass: true, acceptClasses: ["io.cilium/l2-announcer"], ipMode: "Proxy" },
    election: { leaseDurationMs: 4_000, renewDeadlineMs: 2_500, retryPeriodMs: 250 },
    manageEndpointSlices: true,
  });
});

test("each bad value is an error naming its flag and the value", () => {
  const cases: [(f: ControllerFlags) => void, string][] = [
    [(f) => (f.ipMode = "vip"), "--ip-mode vip: expected VIP or Proxy"],
    [(f) => (f.leaseDuration = "soon"), "--lease-duration soon: expected a positive number of seconds"],
    [(f) => (f.renewDeadline = "0"), "--renew-deadline 0: expected a positive number of seconds"],
    [(f) => (f.retryPeriod = "-1"), "--retry-period -1: expected a positive number of seconds"],
    [(f) => (f.retryPeriod = "Infinity"), "--retry-period Infinity: expected a positive number of seconds"],
    [
      (f) => (f.leaseDuration = "15.5"),
      "--lease-duration 15.5: expected whole seconds (the Lease holds its duration in seconds)",
    ],
    [
      (f) => (f.renewDeadline = "15"),
      "--renew-deadline 15: must be shorter than --lease-duration 15 (defaults 10 and 15)",
    ],
    [
      (f) => (f.retryPeriod = "12"),
      "--retry-period 12: must be shorter than --renew-deadline 10 (defaults 2 and 10)",
    ],
  ];
  for (const [mutate, error] of cases)
    assert.deepEqual(controllerConfig(flags(mutate)), { ok: false, error });
});
