import assert from "node:assert/strict";
import { test } from "node:test";
import { fileURLToPath } from "node:url";
import { readManifests } from "../../cluster/manifest-files.ts";
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
  // a node without local web pods routes nothing for web, and its health check says 0
  const n3 = nodePortRoutes(s, "n3");
  assert.deepEqual(n3.routes.find((r) => r.service === "t/web")!.targets, []);
  assert.deepEqual(n3.health, [{ service: "t/web", port: 32200, localEndpoints: 0 }]);
  assert.deepEqual(n1.health, [{ service: "t/web", port: 32200, localEndpoints: 3 }]);
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
  const n1 = nodePortRoutes({ ...s, endpointSlices: slices }, "n1");
  assert.deepEqual(
    n1.routes.find((r) => r.service === "t/web")!.targets.map((t) => t.pod),
    ["t/web-2", "t/web-3"],
  );
  assert.equal(n1.health[0]!.localEndpoints, 2);
});
