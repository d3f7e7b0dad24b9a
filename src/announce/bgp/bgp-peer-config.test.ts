/**
 * One LB host's BGP settings from LoadBalancerBGPPeer and LoadBalancerBGPAdvertisement
 * objects: which peers select it, every MetalLB BGPPeer field on its session, what each
 * session exports (per pool, per peer, aggregated, with communities and LOCAL_PREF), the
 * kernel-table routes of a VIP, and what cannot be honoured reported with object and field.
 * The scenario with every field (test/fixtures/bgp/parity/objects.yaml) renders to a golden
 * bird.conf that the real `bird -p` parses.
 */
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { parseAllDocuments } from "yaml";
import { assertGolden } from "../../../test/golden.ts";
import {
  decodeBgpAdvertisement,
  type LoadBalancerBGPAdvertisement,
} from "../../k8s/load-balancer-bgp-advertisement.ts";
import {
  decodeBgpPeer,
  durationSeconds,
  formatBgpPeerProblem,
  type LoadBalancerBGPPeer,
} from "../../k8s/load-balancer-bgp-peer.ts";
import { rangeCidrs, routesFor } from "./bgp-advertisements.ts";
import { bgpSettingsFor, type SecretRead } from "./bgp-peer-config.ts";
import { sessionResets } from "./bgp-session-resets.ts";
import { renderBirdConfig } from "./bird-config.ts";
import { birdAvailable } from "./bird-speaker.ts";

const FIX = "test/fixtures/bgp/parity";

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

function scenario() {
  const docs = parseAllDocuments(readFileSync(join(FIX, "objects.yaml"), "utf8")).map((d) => d.toJS());
  const peers = docs.filter((d) => d.kind === "LoadBalancerBGPPeer").map((d) => decodeBgpPeer(d).peer!);
  const advertisements = docs
    .filter((d) => d.kind === "LoadBalancerBGPAdvertisement")
    .map((d) => decodeBgpAdvertisement(d).advertisement!);
  const pools = docs
    .filter((d) => d.kind === "LoadBalancerIPPool")
    .map((d) => ({ name: d.metadata.name, labels: d.metadata.labels ?? {}, addresses: d.spec.addresses }));
  const secrets = new Map<string, SecretRead>([
    ["passlb-system/tor-md5", { type: "kubernetes.io/basic-auth", password: "tor-key-1" }],
  ]);
  return { peers, advertisements, pools, secrets };
}

test("defaults: every host, BFD at 100 ms × 3 per session, the peer's ASNs and family, host routes to all", () => {
  const r = bgpSettingsFor(input([peer("tor-a", {})]));
  assert.deepEqual(r.findings, []);
  assert.deepEqual(r.selected, ["tor-a"]);
  assert.equal(r.settings.holdSeconds, 9);
  assert.deepEqual(r.settings.peers, [
    {
      address: "192.0.2.1",
      asn: 64500,
      family: "IPv4",
      source: "tor-a",
      localAsn: 64512,
      bfd: true,
      bfdTiming: { receiveMs: 100, transmitMs: 100, multiplier: 3, passive: false },
      exports: { IPv4: [{ from: "implicit", prefixes: ["0.0.0.0/0{32,32}"], communities: [] }] },
    },
  ]);
  assert.deepEqual(routesFor("198.51.100.7", r.aggregates), ["198.51.100.7"]);
});

test("every session field of the scenario: golden bird.conf, BIRD parses it, findings name object and field", (t) => {
  const s = scenario();
  const r = bgpSettingsFor({ ...input(s.peers), ...s, namespace: "passlb-system" });
  assert.deepEqual(r.selected, ["edge-red", "rr", "tor-loopback"]);
  assertGolden(
    join(FIX, "findings-lb-1.json"),
    r.findings.map((f) => `${f.code} ${f.subject}: ${f.message}`),
  );
  const text = renderBirdConfig(r.settings);
  assertGolden(join(FIX, "bird-lb-1.conf"), text);
  // the advertisement more specific than its aggregate is refused, by name, on this host
  const bad = r.advertisements.find((v) => v.name === "d-bad-aggregate");
  assert.equal(bad?.accepted, false);
  assert.match(bad!.messages[0]!, /203\.0\.113\.16\/28 is more specific/);
  // aggregates: a VIP of the public pool is also its /24 (the rr advertisement); internal: host only
  assert.deepEqual(routesFor("198.51.100.10", r.aggregates), ["198.51.100.0/24", "198.51.100.10"]);
  assert.deepEqual(routesFor("fd00:198:51:100::5", r.aggregates), ["fd00:198:51:100::5", "fd00:198:51::/48"]);
  assert.deepEqual(routesFor("203.0.113.20", r.aggregates), ["203.0.113.20"]);
  if (!birdAvailable()) return t.diagnostic("bird is not installed: checked against the golden file only");
  const dir = mkdtempSync(join(tmpdir(), "plb-bird-"));
  try {
    writeFileSync(join(dir, "bird.conf"), text);
    const p = spawnSync("bird", ["-p", "-c", join(dir, "bird.conf")], { encoding: "utf8" });
    assert.equal(p.status, 0, `bird -p refused it: ${p.stderr}`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("another host (rack r2, no sourceAddress there): its own peers and advertisements", () => {
  const s = scenario();
  const r = bgpSettingsFor({
    ...input(s.peers, { rack: "r2" }),
    ...s,
    host: "lb-2",
    hostAddresses: ["192.0.2.11"],
  });
  assert.deepEqual(r.selected, ["edge-red", "rr", "tor-r2"]);
  const tor = r.settings.peers.find((p) => p.source === "tor-r2")!;
  // c-internal selects rack r1 only; e-rack-r2 (every pool) applies here
  assert.deepEqual(
    tor.exports?.IPv4?.map((x) => x.from),
    ["LoadBalancerBGPAdvertisement a-public-hosts", "LoadBalancerBGPAdvertisement e-rack-r2"],
  );
});

test("passwordSecret: MetalLB's contract (basic-auth, key password); the key is never in a message", () => {
  const p = peer("tor", { passwordSecret: { name: "md5" } });
  const run = (secret: SecretRead | undefined) =>
    bgpSettingsFor({
      ...input([p]),
      namespace: "passlb-system",
      secrets: new Map(secret === undefined ? [] : [["passlb-system/md5", secret]]),
    });
  const why = (secret: SecretRead | undefined) => run(secret).findings.map((f) => `${f.code}: ${f.message}`);
  assert.deepEqual(why("missing"), [
    "bgp_password_unavailable: spec.passwordSecret: Secret passlb-system/md5 does not exist; no session to 192.0.2.1 until it is fixed",
    "bgp_no_peer: no LoadBalancerBGPPeer selects this host: it announces nothing",
  ]);
  assert.match(
    why(undefined)[0]!,
    /was not read \(is it in passlb's namespace, and named in the passlb-lb Role\?\)/,
  );
  assert.match(why({ type: "Opaque", password: "k" })[0]!, /of type Opaque, not kubernetes.io\/basic-auth/);
  assert.match(why({ type: "kubernetes.io/basic-auth" })[0]!, /has no key "password"/);
  const quoted = why({ type: "kubernetes.io/basic-auth", password: 'a"b-SECRET' });
  assert.match(quoted[0]!, /double quote.*BIRD's configuration strings have no escapes/);
  assert.doesNotMatch(quoted.join("\n"), /SECRET/);
  const ok = run({ type: "kubernetes.io/basic-auth", password: "good key" });
  assert.deepEqual(ok.findings, []);
  assert.equal(ok.settings.peers[0]?.password, "good key");
  assert.match(renderBirdConfig(ok.settings), /password "good key";/);
});

test("advertisements: per peer, per pool, localPref iBGP only and one value per route, aggregates", () => {
  const ad = (name: string, spec: Record<string, unknown>): LoadBalancerBGPAdvertisement =>
    decodeBgpAdvertisement({
      apiVersion: "passlb.io/v1alpha1",
      kind: "LoadBalancerBGPAdvertisement",
      metadata: { name },
      spec,
    }).advertisement!;
  const pools = [
    { name: "a", labels: {}, addresses: ["198.51.100.0/25"] },
    { name: "b", labels: {}, addresses: ["198.51.100.128/25"] },
  ];
  const r = bgpSettingsFor({
    ...input([peer("ebgp", {}), peer("ibgp", { peerASN: 64512, peerAddress: "192.0.2.2" })]),
    pools,
    advertisements: [
      ad("x", { ipAddressPools: ["a"], localPref: 100, peers: ["ibgp", "ebgp", "gone"] }),
      ad("y", { ipAddressPools: ["a"], localPref: 200 }),
      ad("z", { ipAddressPools: ["b"], aggregationLength: 25, peers: ["ebgp"] }),
    ],
  });
  const lines = r.findings.map((f) => `${f.subject}: ${f.message}`);
  assert.deepEqual(lines, [
    "LoadBalancerBGPAdvertisement x: spec.peers: gone has no session on this host",
    "LoadBalancerBGPAdvertisement x: spec.localPref 100: not sent to ebgp, an external peer (RFC 4271 §5.1.5)",
    "LoadBalancerBGPAdvertisement y: spec.localPref 200: not sent to ebgp, an external peer (RFC 4271 §5.1.5)",
    "LoadBalancerBGPAdvertisement y: spec.localPref 200: LoadBalancerBGPAdvertisement x already gives 100 to these routes toward ibgp; not applied",
  ]);
  const ibgp = r.settings.peers.find((p) => p.source === "ibgp")!;
  assert.deepEqual(ibgp.exports?.IPv4, [
    {
      from: "LoadBalancerBGPAdvertisement x",
      prefixes: ["198.51.100.0/25{32,32}"],
      communities: [],
      localPref: 100,
    },
    { from: "LoadBalancerBGPAdvertisement y", prefixes: ["198.51.100.0/25{32,32}"], communities: [] },
  ]);
  const ebgp = r.settings.peers.find((p) => p.source === "ebgp")!;
  assert.deepEqual(ebgp.exports?.IPv4?.at(-1)?.prefixes, ["198.51.100.128/25{25,25}"]);
  assert.deepEqual(routesFor("198.51.100.200", r.aggregates), ["198.51.100.128/25", "198.51.100.200"]);
  assert.deepEqual(
    rangeCidrs({ family: "IPv4", first: 3405803792n, last: 3405803807n }).map((c) => c.prefix),
    [28],
  );
});

test("duplicate sessions: one per (address, port, VRF), as BIRD's neighbour lock allows", () => {
  const r = bgpSettingsFor(
    input([peer("a", {}), peer("b", {}), peer("c", { peerPort: 1179 }), peer("d", { vrf: "red" })]),
  );
  assert.deepEqual(r.selected, ["a", "c", "d"]);
  assert.deepEqual(
    r.findings.map((f) => f.message),
    [
      "192.0.2.1 port 179 vrf default is also LoadBalancerBGPPeer a's, and BIRD runs one session per neighbour, port and VRF; only a is used",
    ],
  );
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
});

test("the object's own checks: addresses, timers, ASN choice, password, multihop", () => {
  assert.equal(durationSeconds("1m30s"), 90);
  assert.equal(durationSeconds("500ms"), 0.5);
  assert.equal(durationSeconds("9"), undefined);
  const problems = (spec: Record<string, unknown>) =>
    decodeBgpPeer({
      apiVersion: "passlb.io/v1alpha1",
      kind: "LoadBalancerBGPPeer",
      metadata: { name: "x" },
      spec,
    }).problems.map(formatBgpPeerProblem);
  assert.deepEqual(
    problems({
      myASN: 1,
      peerASN: 2,
      peerAddress: "192.0.2.300",
      routerID: "fd00::1",
      holdTime: "2s",
      keepaliveTime: "1500ms",
    }),
    [
      'LoadBalancerBGPPeer x: spec.peerAddress: "192.0.2.300" is not an IP address',
      'LoadBalancerBGPPeer x: spec.routerID: "fd00::1" is not an IPv4 address (a BGP identifier is 32 bits, RFC 6286)',
      "LoadBalancerBGPPeer x: spec.holdTime: 2s: must be 0s or 3s..65535s in whole seconds (RFC 4271 §4.2)",
      "LoadBalancerBGPPeer x: spec.keepaliveTime: 1500ms: must be 1s..65535s in whole seconds",
    ],
  );
  // keepalive alone: hold is three of it (MetalLB parseTimers), not passlb's 9 s
  assert.deepEqual(problems({ myASN: 1, peerASN: 2, peerAddress: "192.0.2.1", keepaliveTime: "30s" }), []);
  const k = bgpSettingsFor(input([peer("k", { keepaliveTime: "30s" })])).settings.peers[0]!;
  assert.deepEqual([k.holdSeconds, k.keepaliveSeconds], [90, 30]);
  assert.deepEqual(problems({ myASN: 1, peerAddress: "192.0.2.1" }), [
    "LoadBalancerBGPPeer x: spec.peerASN: one of peerASN and dynamicASN is required",
  ]);
  assert.deepEqual(problems({ myASN: 1, peerASN: 2, dynamicASN: "external", peerAddress: "192.0.2.1" }), [
    "LoadBalancerBGPPeer x: spec.dynamicASN: peerASN and dynamicASN are mutually exclusive",
  ]);
  const secret = "hunter2";
  assert.deepEqual(
    problems({ myASN: 1, peerASN: 1, peerAddress: "192.0.2.1", password: `${secret}"`, ebgpMultiHop: true }),
    [
      "LoadBalancerBGPPeer x: spec.password: contains a double quote, a line break or a NUL: BIRD's configuration strings have no escapes, so it cannot carry this key; choose another",
      "LoadBalancerBGPPeer x: spec.ebgpMultiHop: is for external peers: this session is iBGP (the AS numbers are equal)",
      "LoadBalancerBGPPeer x: spec.sourceAddress: is required with ebgpMultiHop and BFD (BIRD's multihop BFD needs a local address); or set bfd.enabled false",
    ],
  );
  assert.deepEqual(problems({ myASN: 1, peerASN: 2, peerAddress: "192.0.2.1", password: "k".repeat(81) }), [
    "LoadBalancerBGPPeer x: spec.password: is longer than 80 bytes, the kernel's TCP MD5 key limit",
  ]);
  assert.deepEqual(
    problems({ myASN: 1, peerASN: 2, peerAddress: "192.0.2.1", sourceAddress: "fd00::1", vrf: "bad name" }),
    [
      "LoadBalancerBGPPeer x: spec.sourceAddress: fd00::1 is not of peerAddress 192.0.2.1's family",
      'LoadBalancerBGPPeer x: spec.vrf: "bad name" is not an interface name (1..15 of A-Z a-z 0-9 _ . -)',
    ],
  );
});

test("session resets: only protocol options restart a session; exports and BFD timing apply in place", () => {
  const before = bgpSettingsFor(input([peer("a", {}), peer("b", { peerAddress: "192.0.2.2" })])).settings;
  const same = (spec: Partial<LoadBalancerBGPPeer["spec"]>) =>
    sessionResets(
      before,
      bgpSettingsFor(input([peer("a", spec), peer("b", { peerAddress: "192.0.2.2" })])).settings,
    );
  assert.deepEqual(same({ ipv4: { communities: ["64512:1"] } }), [], "an export filter change");
  assert.deepEqual(same({ bfd: { receiveInterval: 300 } }), [], "BFD options (bgp_update_bfd)");
  assert.deepEqual(same({ enableGracefulRestart: true, holdTime: "30s" }), [
    { protocol: "p_a", source: "a", changed: ["holdTime", "enableGracefulRestart"] },
  ]);
  // another object appearing renames nothing, so nothing restarts
  const more = bgpSettingsFor(
    input([
      peer("0-first", { peerAddress: "192.0.2.9" }),
      peer("a", {}),
      peer("b", { peerAddress: "192.0.2.2" }),
    ]),
  ).settings;
  assert.deepEqual(sessionResets(before, more), []);
  assert.doesNotMatch(
    JSON.stringify(same({ password: "secret-key" })),
    /secret-key/,
    "a password change is named, the key is not",
  );
  assert.deepEqual(same({ password: "secret-key" })[0]?.changed, ["password"]);
});
