import assert from "node:assert/strict";
import { test } from "node:test";
import { ServiceSchema } from "../../k8s/objects.ts";
import { planBackendService } from "./gke-backend-service.ts";
import { gkeContext } from "./gke-context.ts";
import { chooseController } from "./gke-controller-choice.ts";
import { type GkeFlagName, gkeFlags } from "./gke-flags.ts";
import { parseGkeVersion } from "./gke-version.ts";

function plan(
  version: string,
  annotations: Record<string, string>,
  spec: Record<string, unknown>,
  flags: Partial<Record<GkeFlagName, boolean>> = {},
) {
  const v = parseGkeVersion(version)!;
  const options = { version: v, flags: gkeFlags(v, flags), subnetIpv6: "both" as const };
  const service = ServiceSchema.parse({
    apiVersion: "v1",
    kind: "Service",
    metadata: { name: "s", namespace: "ns", uid: "u", annotations },
    spec: { type: "LoadBalancer", ports: [{ port: 80 }], ...spec },
  });
  const { context } = gkeContext(service, chooseController(service, options), options, "uid");
  return planBackendService(context, "hc", []);
}

const WEIGHTED = { "networking.gke.io/weighted-load-balancing": "pods-per-node" };

test("weighted NetLB: WEIGHTED_MAGLEV from 1.31.0-gke.1506000 with eTP Local; field unset before", () => {
  const local = { externalTrafficPolicy: "Local" };
  assert.equal(plan("1.37.1-gke.1", WEIGHTED, local).backendService?.localityLbPolicy, "WEIGHTED_MAGLEV");
  const before = plan("1.31.0-gke.1505999", { ...WEIGHTED, "cloud.google.com/l4-rbs": "enabled" }, local);
  assert.equal(before.backendService?.localityLbPolicy, undefined);
  assert.equal(before.findings[0]?.code, "gke_weighted_ignored");
  const wrongValue = plan("1.37.1-gke.1", { "networking.gke.io/weighted-load-balancing": "yes" }, local);
  assert.equal(wrongValue.backendService?.localityLbPolicy, "MAGLEV");
});

test("weighted ILB needs its flag; with Cluster it warns UnsupportedConfiguration", () => {
  const ilb = { ...WEIGHTED, "networking.gke.io/load-balancer-type": "Internal" };
  assert.equal(
    plan("1.37.1-gke.1", ilb, { externalTrafficPolicy: "Local" }).backendService?.localityLbPolicy,
    undefined,
  );
  const on = { "enable-weighted-l4-ilb": true };
  const local = plan("1.37.1-gke.1", ilb, { externalTrafficPolicy: "Local" }, on);
  assert.equal(local.backendService?.localityLbPolicy, "WEIGHTED_GCP_RENDEZVOUS");
  assert.equal(plan("1.37.1-gke.1", ilb, {}, on).events[0]?.reason, "UnsupportedConfiguration");
});

test("strong session affinity: needs the flag, ClientIP and a timeout in [60, 57600]", () => {
  const ann = { "networking.gke.io/l4-strong-session-affinity": "enabled" };
  const clientIp = (t: number) => ({
    sessionAffinity: "ClientIP",
    sessionAffinityConfig: { clientIP: { timeoutSeconds: t } },
  });
  assert.equal(plan("1.37.1-gke.1", ann, clientIp(600)).findings[0]?.code, "gke_strong_affinity_ignored");
  const on = { "enable-l4lb-strong-sa": true };
  assert.deepEqual(plan("1.37.1-gke.1", ann, clientIp(600), on).backendService?.connectionTrackingPolicy, {
    trackingMode: "PER_SESSION",
    enableStrongAffinity: true,
    idleTimeoutSec: 600,
  });
  assert.equal(plan("1.37.1-gke.1", ann, clientIp(59), on).findings[0]?.severity, "error");
  assert.equal(plan("1.37.1-gke.1", ann, {}, on).findings[0]?.code, "gke_strong_affinity_invalid");
});

test("UDP drains in 0 s, TCP in 30 s; ClientIP maps to CLIENT_IP", () => {
  const udp = plan(
    "1.37.1-gke.1",
    {},
    { ports: [{ port: 53, protocol: "UDP" }], sessionAffinity: "ClientIP" },
  );
  assert.equal(udp.backendService?.connectionDraining.drainingTimeoutSec, 0);
  assert.equal(udp.backendService?.sessionAffinity, "CLIENT_IP");
  assert.equal(plan("1.37.1-gke.1", {}, {}).backendService?.connectionDraining.drainingTimeoutSec, 30);
});
