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
        sessions: [
          {
            peer: "198.51.100.1",
            state: established ? "Established" : "Active",
            established,
            name: "p_tor_a",
            exported: established ? 3 : 0,
            ...(established
              ? { bfd: "Up" }
              : {
                  bfd: "Down",
                  lastError:
                    "TCP MD5 is set on this session: a key that differs from the router's keeps it down without any BGP error",
                }),
          },
        ],
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
  assert.deepEqual(lb.announce?.speaker, {
    health: "healthy",
    established: 1,
    sessions: 1,
    list: [
      { name: "p_tor_a", peer: "198.51.100.1", state: "Established", bfd: "Up", exported: 3, error: "" },
    ],
  });
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
  // every session of every host: state, BFD, what it exports, why it may be down
  assert.match(text, /BGP sessions:\n {2}LB HOST +SESSION +PEER +STATE +BFD +ROUTES +WHY\n/);
  assert.match(text, /\n {2}lb-a +p_tor_a +198\.51\.100\.1 +Established +Up +3 exported *\n/);
  assert.match(
    text,
    /\n {2}lb-c +p_tor_a +198\.51\.100\.1 +Active +Down +0 exported +TCP MD5 is set on this session/,
  );
  assert.match(
    text,
    /Held: {8}203\.0\.113\.1 by lb-a and lb-b; lb-c withdrawn \(no IPv4 BGP session is established\)/,
  );
});

test("status: the wire — the agreed answer with its MAC and host, else each host's problem; foreign VRRP speakers", () => {
  const l2State = (pod: string, wire: { problem: string | null; message: string }, foreign: unknown[] = []) =>
    LbStateSchema.parse({
      apiVersion: "passlb.io/dashboard/v1",
      process: "passlb lb",
      dataplane: "nftables",
      uptimeSeconds: 62,
      services: [],
      announce: {
        engine: "keepalived",
        host: pod,
        state: "running",
        generation: 3,
        vips: [{ vip: "203.0.113.1", state: pod === "lb-a" ? "held" : "backup", reason: "vrrp" }],
        groups: [
          { name: "passlb_v4_1", state: pod === "lb-a" ? "MASTER" : "BACKUP", priority: 250, vips: 1 },
        ],
        wire: {
          checkedAt: 1,
          periodMs: 10000,
          errors: [],
          vips: [{ vip: "203.0.113.1", answers: [], ...wire }],
          vrrp: { watching: true, interface: "eth0", range: { first: 1, last: 255 }, foreign },
        },
      },
    });
  const agreed = { problem: null, message: "203.0.113.1: answered by 5e:b5:dc:86:86:80 (lb-a)" };
  const ok = renderStatusText(
    buildStatusReport(
      [service],
      [
        { pod: "lb-a", node: "lb-1", reachable: true, state: l2State("lb-a", agreed) },
        { pod: "lb-b", node: "lb-2", reachable: true, state: l2State("lb-b", agreed) },
      ],
    ),
    "passlb-system",
  );
  assert.match(
    ok,
    /\n {2}Wire: {8}203\.0\.113\.1: answered by 5e:b5:dc:86:86:80 \(lb-a\) \(checked by lb-a, lb-b\)\n/,
  );
  const dup = {
    problem: "duplicate_answer",
    message: "203.0.113.1: 2 answers: 5e:b5:dc:86:86:80 (lb-a), 86:df:f1:ec:47:3e (unknown device)",
  };
  const foreign = [
    {
      interface: "eth0",
      family: "IPv4",
      vrid: 3,
      source: "192.0.2.9",
      mac: "02:00:00:00:00:09",
      priority: 254,
    },
  ];
  const bad = renderStatusText(
    buildStatusReport(
      [service],
      [
        { pod: "lb-a", node: "lb-1", reachable: true, state: l2State("lb-a", dup, foreign) },
        { pod: "lb-b", node: "lb-2", reachable: true, state: l2State("lb-b", agreed) },
      ],
    ),
    "passlb-system",
  );
  assert.match(
    bad,
    /\n {2}Wire: {8}lb-a: 203\.0\.113\.1: 2 answers: 5e:b5:dc:86:86:80 \(lb-a\), 86:df:f1:ec:47:3e \(unknown device\) \[duplicate_answer\]\n/,
  );
  assert.doesNotMatch(bad, /Wire: {8}lb-b/);
  assert.match(
    bad,
    /lb-a {2}node lb-1 .*\n {6}FOREIGN VRRP SPEAKER 192\.0\.2\.9 \(02:00:00:00:00:09\) on VRID 3 \(eth0, priority 254\)/,
  );
});
