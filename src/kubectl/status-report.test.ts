/**
 * `kubectl passlb status`, the pure half, for the BGP engine: an LB host's `announce` in
 * the one AnnouncerStatus shape (engine bird, `speaker` as engine detail) shows on its row,
 * and every host that announces a VIP is named on its `Held:` line (ECMP: several).
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { buildStatusReport, LbStateSchema, renderStatusText, StatusServiceSchema } from "./status-report.ts";

const service = StatusServiceSchema.parse({
  metadata: { name: "web", namespace: "bgp" },
  spec: { type: "LoadBalancer", loadBalancerClass: "passlb.io/l4" },
  status: { loadBalancer: { ingress: [{ ip: "203.0.113.1" }] } },
});

const birdState = (held: boolean, established: boolean) =>
  LbStateSchema.parse({
    apiVersion: "passlb.io/dashboard/v1",
    process: "passlb lb",
    dataplane: "nftables",
    uptimeSeconds: 62,
    services: [],
    announce: {
      engine: "bird",
      host: "lb",
      state: "running",
      generation: 3,
      vips: [
        {
          vip: "203.0.113.1",
          state: held ? "held" : "withdrawn",
          reason: held ? "bgp/web: 2 healthy node(s); to 198.51.100.1" : "no IPv4 BGP session is established",
        },
      ],
      groups: [],
      speaker: {
        health: established ? "healthy" : "down",
        findings: [],
        sessions: [{ peer: "198.51.100.1", state: established ? "Established" : "Active", established }],
      },
    },
  });

test("status: BIRD's speaker on the LB host's row, every announcing host on the Held line", () => {
  const report = buildStatusReport(
    [service],
    [
      { pod: "lb-a", node: "lb-1", reachable: true, state: birdState(true, true) },
      { pod: "lb-b", node: "lb-2", reachable: true, state: birdState(true, true) },
      { pod: "lb-c", node: "lb-3", reachable: true, state: birdState(false, false) },
    ],
  );
  const lb = report.lbHosts[0]!;
  assert.ok(lb.reachable);
  assert.deepEqual(lb.announce?.speaker, { health: "healthy", established: 1, sessions: 1 });
  assert.deepEqual(report.services[0]!.announce[0]!.heldBy, ["lb-a", "lb-b"]);
  const text = renderStatusText(report, "passlb-system");
  assert.match(
    text,
    /lb-a {2}node lb-1 {2}nftables, up 1m02s, bird running: speaker healthy, 1 of 1 BGP sessions Established/,
  );
  assert.match(
    text,
    /lb-c {2}node lb-3 {2}nftables, up 1m02s, bird running: speaker down, 0 of 1 BGP sessions Established/,
  );
  assert.match(
    text,
    /Held: {8}203\.0\.113\.1 by lb-a and lb-b; lb-c withdrawn \(no IPv4 BGP session is established\)/,
  );
});
