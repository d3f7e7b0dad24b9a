import assert from "node:assert/strict";
import { test } from "node:test";
import { cutoverOrder, foreignControllers } from "./foreign-controllers.ts";
import type { ConfigMap, Workload } from "./foreign-objects.ts";

const workload = (
  kind: "Deployment" | "DaemonSet",
  name: string,
  image: string,
  extra: Partial<Workload["spec"]> = {},
  env: Record<string, string> = {},
): Workload => ({
  apiVersion: "apps/v1",
  kind,
  metadata: { name, namespace: "sys" },
  spec: {
    ...extra,
    template: {
      spec: {
        containers: [
          { name: "c", image, env: Object.entries(env).map(([n, value]) => ({ name: n, value })) },
        ],
      },
    },
  },
});
const cm = (data: Record<string, string>): ConfigMap => ({
  apiVersion: "v1",
  kind: "ConfigMap",
  metadata: { name: "cilium-config", namespace: "kube-system" },
  data,
});

test("detection: running controllers and announcers; scaled to zero is stopped; kube-vip only with svc_enable", () => {
  const found = foreignControllers(
    [
      workload("Deployment", "controller", "quay.io/metallb/controller:v0.14.9"),
      workload("Deployment", "old", "quay.io/metallb/controller:v0.13.0", { replicas: 0 }),
      workload(
        "DaemonSet",
        "kube-vip",
        "ghcr.io/kube-vip/kube-vip:v0.9.1",
        {},
        { svc_enable: "false", cp_enable: "true" },
      ),
      workload("DaemonSet", "kube-vip-svc", "ghcr.io/kube-vip/kube-vip:v0.9.1", {}, { svc_enable: "true" }),
      workload("DaemonSet", "svclb-traefik-1", "rancher/klipper-lb:v0.4.9"),
      workload("Deployment", "web", "nginx:1.27"),
    ],
    [],
    0,
  );
  assert.deepEqual(
    found.map((f) => `${f.tool} ${f.role} ${f.object}`),
    [
      "metallb controller Deployment sys/controller",
      "kube-vip announcer DaemonSet sys/kube-vip-svc",
      "k3s-servicelb announcer DaemonSet sys/svclb-traefik-1",
    ],
  );
});

test("Cilium: LB-IPAM is on by default once a pool exists; L2 announcements only when enabled", () => {
  const roles = (data: Record<string, string>, pools: number) =>
    foreignControllers([], [cm(data)], pools).map((f) => f.role);
  assert.deepEqual(roles({}, 1), ["controller"]);
  assert.deepEqual(roles({}, 0), []);
  assert.deepEqual(roles({ "default-lb-service-ipam": "lbipam" }, 0), ["controller"]);
  assert.deepEqual(roles({ "enable-lb-ipam": "false" }, 3), []);
  assert.deepEqual(roles({ "enable-l2-announcements": "true", "enable-lb-ipam": "false" }, 0), ["announcer"]);
});

test("cut-over: the old controller stops before passlb's starts, the old announcer before passlb announces", () => {
  const steps = cutoverOrder(
    foreignControllers(
      [
        workload("Deployment", "controller", "quay.io/metallb/controller:v0.14.9"),
        workload("DaemonSet", "speaker", "quay.io/metallb/speaker:v0.14.9"),
      ],
      [],
      0,
    ),
    ["--default-class"],
  );
  const at = (re: RegExp) => steps.findIndex((s) => re.test(s));
  assert.ok(at(/stop the old controller.*sys\/controller/) < at(/start passlb controller --default-class/));
  assert.ok(at(/start passlb controller/) < at(/stop the old announcer.*sys\/speaker/));
  assert.ok(at(/stop the old announcer/) < at(/turn announcing on/));
  assert.ok(at(/--announce none/) < at(/stop the old controller/));
});
