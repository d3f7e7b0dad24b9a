import assert from "node:assert/strict";
import { test } from "node:test";
import { type Service, ServiceSchema } from "../../k8s/objects.ts";
import { azureListenerProbes } from "./azure-probe-annotations.ts";

const A = "service.beta.kubernetes.io/";

function service(annotations: Record<string, string>, spec: Record<string, unknown> = {}): Service {
  return ServiceSchema.parse({
    apiVersion: "v1",
    kind: "Service",
    metadata: {
      name: "web",
      namespace: "default",
      annotations: Object.fromEntries(Object.entries(annotations).map(([k, v]) => [A + k, v])),
    },
    spec: {
      type: "LoadBalancer",
      ports: [
        { name: "http", port: 80, nodePort: 30080, appProtocol: "http" },
        { name: "https", port: 443, nodePort: 30443, appProtocol: "https" },
        { name: "dns", port: 53, protocol: "UDP", nodePort: 30053 },
      ],
      ...spec,
    },
  });
}

test("Cluster: one probe per TCP listener from appProtocol, none for UDP (Https kept: Standard)", () => {
  const r = azureListenerProbes(service({ "port_443_health-probe_request-path": "/ready" }));
  assert.deepEqual(r.errors, []);
  assert.deepEqual(Object.fromEntries(r.listeners), {
    "TCP/80": { protocol: "HTTP", port: 30080, path: "/", intervalSeconds: 5, threshold: 2 },
    "TCP/443": { protocol: "HTTPS", port: 30443, path: "/ready", intervalSeconds: 5, threshold: 2 },
    "UDP/53": null,
  });
});

test("Local: every listener, UDP too, gets the /healthz probe unless it overrides the probe port", () => {
  const r = azureListenerProbes(
    service(
      { "port_443_health-probe_port": "15021", "azure-load-balancer-health-probe-interval": "10" },
      { externalTrafficPolicy: "Local", healthCheckNodePort: 32123 },
    ),
  );
  const healthz = { protocol: "HTTP", port: 32123, path: "/healthz", intervalSeconds: 10, threshold: 2 };
  assert.deepEqual(Object.fromEntries(r.listeners), {
    "TCP/80": healthz,
    "TCP/443": { protocol: "HTTPS", port: 15021, path: "/", intervalSeconds: 10, threshold: 2 },
    "UDP/53": healthz,
  });
});

test("every error is collected with its annotation and value; broken listeners map to null", () => {
  const r = azureListenerProbes(
    service({
      "port_80_health-probe_port": "nope",
      "port_443_health-probe_interval": "3",
      "port_53_health-probe_port": "x",
    }),
  );
  assert.deepEqual(
    r.errors.map((e) => [e.annotation, e.value]),
    [
      [`${A}port_80_health-probe_port`, "nope"],
      [`${A}port_443_health-probe_interval`, "3"],
    ],
  );
  assert.equal(r.listeners.get("TCP/80"), null);
  assert.equal(r.listeners.get("TCP/443"), null);
});

test("no_lb_rule and no_probe_rule listeners have no probe", () => {
  const r = azureListenerProbes(
    service(
      { port_80_no_lb_rule: "true", port_443_no_probe_rule: "TRUE" },
      { externalTrafficPolicy: "Local", healthCheckNodePort: 32123 },
    ),
  );
  assert.equal(r.listeners.get("TCP/80"), null);
  assert.equal(r.listeners.get("TCP/443"), null);
  assert.notEqual(r.listeners.get("UDP/53"), null);
});

test("a broken Local probe is an error, and listeners without their own probe map to null", () => {
  const r = azureListenerProbes(
    service(
      { "azure-load-balancer-health-probe-num-of-probe": "1" },
      { externalTrafficPolicy: "Local", healthCheckNodePort: 32123 },
    ),
  );
  assert.equal(r.errors.length, 1);
  assert.equal(r.errors[0]?.annotation, `${A}azure-load-balancer-health-probe-num-of-probe`);
  assert.deepEqual([...r.listeners.values()], [null, null, null]);
});
