import assert from "node:assert/strict";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { readManifests } from "../../cluster/manifest-files.ts";
import { agentHealthModel } from "../../health/state-agent-model.ts";
import { decodeDocuments } from "../../k8s/decode.ts";
import { nodePortRoutes } from "./node-port-routes.ts";

const DIR = fileURLToPath(new URL("../../../test/fixtures/userspace/cluster/", import.meta.url));

async function snapshot() {
  const read = await readManifests([DIR], async () => "");
  const decoded = decodeDocuments(read.documents);
  assert.deepEqual(decoded.problems, []);
  return decoded.snapshot;
}

test("Local sends only to this node's ready pods; Cluster to any ready pod", async () => {
  const s = await snapshot();
  const n1 = nodePortRoutes(s, "n1");
  const web = n1.routes.find((r) => r.service === "t/web")!;
  assert.equal(web.policy, "Local");
  assert.deepEqual(
    web.targets.map((t) => t.pod),
    ["t/web-1", "t/web-2", "t/web-3"],
  );
  const echo = n1.routes.find((r) => r.service === "t/echo")!;
  assert.equal(echo.policy, "Cluster");
  assert.equal(echo.clientIpAffinity, true);
  assert.deepEqual(
    echo.targets.map((t) => t.pod),
    ["t/echo-1", "t/echo-2"],
  );
  const dns = n1.routes.find((r) => r.service === "t/dns")!;
  assert.equal(dns.protocol, "UDP");
  assert.equal(dns.nodePort, 30054);
  // a node without local web pods routes nothing for web, and its health check (the
  // agent's health model, which the userspace agents serve) says 0
  const n3 = nodePortRoutes(s, "n3");
  assert.deepEqual(n3.routes.find((r) => r.service === "t/web")!.targets, []);
  const healthOf = (node: string) =>
    agentHealthModel(s, node).services.map((x) => [x.name, x.port, x.localEndpoints]);
  assert.deepEqual(healthOf("n3"), [["web", 32200, 0]]);
  assert.deepEqual(healthOf("n1"), [["web", 32200, 3]]);
});

test("an unready local endpoint is not a target and does not count", async () => {
  const s = await snapshot();
  const slices = s.endpointSlices.map((sl) =>
    sl.metadata.name !== "web-1"
      ? sl
      : {
          ...sl,
          endpoints: (sl.endpoints ?? []).map((e) =>
            e.targetRef?.name === "web-1"
              ? { ...e, conditions: { ready: false, serving: false, terminating: false } }
              : e,
          ),
        },
  );
  const changed = { ...s, endpointSlices: slices };
  const n1 = nodePortRoutes(changed, "n1");
  assert.deepEqual(
    n1.routes.find((r) => r.service === "t/web")!.targets.map((t) => t.pod),
    ["t/web-2", "t/web-3"],
  );
  assert.equal(agentHealthModel(changed, "n1").services[0]!.localEndpoints, 2);
});
