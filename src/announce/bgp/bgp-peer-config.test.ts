/**
 * One LB host's BGP settings from LoadBalancerBGPPeer objects: which peers select it, the
 * per-session values, passlb's defaults, and every MetalLB-shaped field BIRD cannot honour
 * reported with object and field (never dropped in silence). Also the object's own checks.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import {
  decodeBgpPeer,
  durationSeconds,
  formatBgpPeerProblem,
  type LoadBalancerBGPPeer,
} from "../../k8s/load-balancer-bgp-peer.ts";
import { bgpSettingsFor } from "./bgp-peer-config.ts";

function peer(name: string, spec: Partial<LoadBalancerBGPPeer["spec"]>): LoadBalancerBGPPeer {
  const d = decodeBgpPeer({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerBGPPeer",
    metadata: { name },
    spec: { myASN: 64512, peerASN: 64500, peerAddress: "192.0.2.1", ...spec },
  });
  assert.ok(d.peer, d.problems.map(formatBgpPeerProblem).join("; "));
  return d.peer;
}

const input = (
  peers: LoadBalancerBGPPeer[],
  labels: Record<string, string> | undefined = { rack: "r1" },
) => ({
  host: "lb-1",
  labels,
  peers,
  kernelTable: 4242,
});

test("defaults: every host, BFD at 100 ms × 3, hold 9 s, the peer's ASNs and family", () => {
  const r = bgpSettingsFor(input([peer("tor-a", {})]));
  assert.deepEqual(r.findings, []);
  assert.deepEqual(r.selected, ["tor-a"]);
  assert.deepEqual(r.settings.bfd, { intervalMs: 100, multiplier: 3, receiveMs: 100, transmitMs: 100 });
  assert.equal(r.settings.holdSeconds, 9);
  assert.deepEqual(r.settings.peers, [
    { address: "192.0.2.1", asn: 64500, family: "IPv4", source: "tor-a", localAsn: 64512, bfd: true },
  ]);
});

test("nodeSelectors pick the hosts (any selector); sessions in name order with their own values", () => {
  const r = bgpSettingsFor(
    input([
      peer("tor-b", {
        peerAddress: "fd00::1",
        nodeSelectors: [
          { matchLabels: { rack: "r9" } },
          { matchExpressions: [{ key: "rack", operator: "In", values: ["r1"] }] },
        ],
        holdTime: "1m30s",
        keepaliveTime: "30s",
        connectTime: "5s",
        peerPort: 1179,
        bfd: { enabled: false },
        ipv6: { communities: ["64512:6"] },
      }),
      peer("tor-a", { nodeSelectors: [{ matchLabels: { rack: "r1" } }] }),
      peer("tor-z", { peerAddress: "192.0.2.9", nodeSelectors: [{ matchLabels: { rack: "r2" } }] }),
    ]),
  );
  assert.deepEqual(r.selected, ["tor-a", "tor-b"]);
  assert.deepEqual(r.settings.peers[1], {
    address: "fd00::1",
    asn: 64500,
    family: "IPv6",
    source: "tor-b",
    localAsn: 64512,
    port: 1179,
    holdSeconds: 90,
    keepaliveSeconds: 30,
    connectRetrySeconds: 5,
    bfd: false,
    communities: ["64512:6"],
  });
});

test("what one BIRD cannot honour is a finding naming object and field, with what is used instead", () => {
  const r = bgpSettingsFor(
    input([
      peer("a", { routerID: "192.0.2.10", bfd: { receiveInterval: 100 }, ipv4: { localPref: 50 }, ipv6: {} }),
      peer("b", { peerAddress: "192.0.2.2", routerID: "192.0.2.11", bfd: { receiveInterval: 300 } }),
      peer("c", { routerID: "192.0.2.10" }),
      peer("d", { peerASN: 64512, peerAddress: "192.0.2.4", ipv4: { localPref: 70 } }),
    ]),
  );
  const lines = r.findings.map((f) => `${f.code} ${f.subject}: ${f.message}`);
  assert.deepEqual(lines, [
    "bgp_peer_duplicate LoadBalancerBGPPeer c: spec.peerAddress 192.0.2.1 is also LoadBalancerBGPPeer a's; only a is used",
    "bgp_router_id_conflict LoadBalancerBGPPeer b: spec.routerID 192.0.2.11 is not used: BIRD has one router id per host; 192.0.2.10 from LoadBalancerBGPPeer a is",
    "bgp_bfd_timing_conflict LoadBalancerBGPPeer b: spec.bfd (300/100 ms × 3) is not used: BIRD runs one BFD timing per host; a's 100/100 ms × 3 is",
    "bgp_family_not_carried LoadBalancerBGPPeer a: spec.ipv6 is not used: the session to 192.0.2.1 carries IPv4 routes only; add a LoadBalancerBGPPeer at the router's IPv6 address",
    "bgp_local_pref_ebgp LoadBalancerBGPPeer a: spec.ipv4.localPref 50 is not sent: LOCAL_PREF goes to internal (iBGP) peers only, and myASN 64512 ≠ peerASN 64500 (RFC 4271 §5.1.5)",
  ]);
  assert.equal(r.settings.routerId, "192.0.2.10");
  assert.equal(r.settings.peers.find((p) => p.source === "a")?.localPref, undefined);
  assert.equal(r.settings.peers.find((p) => p.source === "d")?.localPref, 70, "iBGP: sent");
});

test("no Node for the host, or no peer for it: said, and the settings have no session", () => {
  const r = bgpSettingsFor({
    ...input([peer("a", { nodeSelectors: [{ matchLabels: { rack: "r1" } }] })]),
    labels: undefined,
  });
  assert.deepEqual(
    r.findings.map((f) => f.code),
    ["bgp_host_unknown", "bgp_no_peer"],
  );
  assert.deepEqual(r.settings.peers, []);
  assert.equal(r.settings.bfd, undefined);
});

test("the object's own checks: IP addresses, whole seconds, RFC 4271 hold time, keepalive ≤ hold", () => {
  assert.equal(durationSeconds("1m30s"), 90);
  assert.equal(durationSeconds("500ms"), 0.5);
  assert.equal(durationSeconds("9"), undefined);
  const bad = decodeBgpPeer({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerBGPPeer",
    metadata: { name: "x" },
    spec: {
      myASN: 1,
      peerASN: 2,
      peerAddress: "192.0.2.300",
      routerID: "fd00::1",
      holdTime: "2s",
      keepaliveTime: "1500ms",
    },
  });
  assert.deepEqual(bad.problems.map(formatBgpPeerProblem), [
    'LoadBalancerBGPPeer x: spec.peerAddress: "192.0.2.300" is not an IP address',
    'LoadBalancerBGPPeer x: spec.routerID: "fd00::1" is not an IPv4 address (a BGP identifier is 32 bits, RFC 6286)',
    "LoadBalancerBGPPeer x: spec.holdTime: 2s: must be 0s or 3s..65535s in whole seconds (RFC 4271 §4.2)",
    "LoadBalancerBGPPeer x: spec.keepaliveTime: 1500ms: must be 1s..65535s in whole seconds",
  ]);
  const missing = decodeBgpPeer({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerBGPPeer",
    metadata: { name: "y" },
    spec: { myASN: 1 },
  });
  assert.deepEqual(missing.problems.map(formatBgpPeerProblem), [
    "LoadBalancerBGPPeer y: spec.peerASN: Invalid input: expected number, received undefined",
    "LoadBalancerBGPPeer y: spec.peerAddress: Invalid input: expected string, received undefined",
  ]);
});
