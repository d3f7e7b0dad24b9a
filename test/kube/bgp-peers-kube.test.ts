/**
 * `passlb lb --in-cluster --announce bgp` with no --bgp-peer: the sessions come from
 * LoadBalancerBGPPeer objects (deploy/crd-loadbalancerbgppeers.yaml) on the strict test API
 * server, which validates them with the CRD's schema and authorizes the LB with
 * deploy/rbac-lb.yaml. Wired as the command wires it (runNftablesLb) with the real BGP
 * engine over a fake speaker and route table (no root): the BIRD configuration rendered
 * follows the objects that select this host's Node, an object that fails passlb's own
 * checks is left out with its field named, and a change reaches the running speaker.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { type ApiException, CustomObjectsApi } from "@kubernetes/client-node";
import type { SpeakerState } from "../../src/announce/bgp/bgp-types.ts";
import { fakeSpeaker } from "../../src/announce/bgp/bird-speaker.ts";
import { fakeVipRoutes } from "../../src/announce/bgp/kernel-vip-routes.ts";
import { kubeReadHandler } from "../../src/cli/lb-kube.ts";
import { type NftLbFlags, runNftablesLb } from "../../src/cli/lb-nftables.ts";
import { FakeNftApplier } from "../../src/dataplane/fake-nft-applier.ts";
import { eventually, fakeCluster, kubeSource } from "./kube-fixture.ts";

const FLAGS: NftLbFlags = {
  filename: [],
  manifests: [],
  table: "passlb",
  seed: "1",
  maxTableSize: "4093",
  routes: false,
  probe: false,
  pollMs: "1000",
  driftCheckMs: "0",
  announce: "bgp",
  peers: [],
  hostName: "lb-1",
  bgpPollMs: "100",
};

const IDS = { group: "passlb.io", version: "v1alpha1", plural: "loadbalancerbgppeers" };

const peer = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: "passlb.io/v1alpha1",
  kind: "LoadBalancerBGPPeer",
  metadata: { name },
  spec: { myASN: 64512, peerASN: 64500, ...spec },
});

const UP: SpeakerState = { running: true, sessions: [], bfd: [], health: "healthy", findings: [] };

test("LoadBalancerBGPPeer through the API server: the CRD's schema refuses what it can, naming the field", async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const custom = api.kubeConfig("admin").makeApiClient(CustomObjectsApi);
  await custom.createClusterCustomObject({
    ...IDS,
    body: peer("tor-a", { peerAddress: "192.0.2.1", holdTime: "9s", bfd: { receiveInterval: 100 } }),
  });
  await assert.rejects(
    custom.createClusterCustomObject({
      ...IDS,
      body: peer("bad", { peerAddress: "192.0.2.2", peerASN: 0, bfd: { detectMultiplier: 300 } }),
    }),
    (e: ApiException<string>) =>
      e.code === 422 &&
      /spec\.peerASN: Invalid value: 0/.test(String(e.body)) &&
      /spec\.bfd\.detectMultiplier: Invalid value: 300: .*less than or equal to 255/.test(String(e.body)),
  );
  await assert.rejects(
    custom.createClusterCustomObject({ ...IDS, body: { ...peer("no-address", {}) } }),
    (e: ApiException<string>) => e.code === 422 && /spec\.peerAddress: Required value/.test(String(e.body)),
  );
});

test("--announce bgp from LoadBalancerBGPPeers: the host's peers, a bad one named and left out, changes reach BIRD", {
  timeout: 30_000,
}, async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  api.put({
    apiVersion: "v1",
    kind: "Node",
    metadata: { name: "lb-1", labels: { "passlb.io/lb-host": "true", rack: "r1" } },
    status: {
      addresses: [{ type: "InternalIP", address: "198.51.100.21" }],
      conditions: [{ type: "Ready", status: "True" }],
    },
  });
  const custom = api.kubeConfig("admin").makeApiClient(CustomObjectsApi);
  const create = (body: unknown) => custom.createClusterCustomObject({ ...IDS, body: body as object });
  await create(
    peer("tor-a", {
      peerAddress: "192.0.2.1",
      holdTime: "3s",
      nodeSelectors: [{ matchLabels: { rack: "r1" } }],
      bfd: { receiveInterval: 300, transmitInterval: 200, detectMultiplier: 4 },
      ipv4: { communities: ["64512:100"], localPref: 200 },
    }),
  );
  await create(peer("tor-b", { peerAddress: "192.0.2.2", nodeSelectors: [{ matchLabels: { rack: "r2" } }] }));
  // passes the CRD's pattern, fails passlb's rule (RFC 4271: 0 or ≥ 3 s)
  await create(peer("tor-c", { peerAddress: "192.0.2.3", holdTime: "2s" }));

  const speaker = fakeSpeaker(UP);
  const nft = new FakeNftApplier();
  let stderr = "";
  const io = {
    stdout: () => {},
    stderr: (s: string) => {
      stderr += s;
    },
    readStdin: async () => "",
  };
  const stop = new AbortController();
  t.after(() => stop.abort());
  const source = kubeSource(api, { bgpPeers: true });
  const running = runNftablesLb(
    FLAGS,
    io,
    () => stop.signal,
    undefined,
    {
      source,
      prepare: kubeReadHandler(undefined, (line) => io.stderr(`passlb lb: ${line}\n`)),
      bgpPeers: () => source.bgpPeers,
    },
    { nft, bgp: { speaker, routes: fakeVipRoutes() } },
  );
  const last = () => speaker.configs.at(-1) ?? "";
  await eventually(() => last().includes("neighbor 192.0.2.1 as 64500"), "tor-a in bird.conf", 10_000);
  const text = last();
  assert.match(text, /description "tor-a";\n {2}local as 64512;/);
  assert.match(text, /hold time 3;\n {2}keepalive time 1;/);
  assert.match(text, /interface "\*" \{ min rx interval 300 ms; min tx interval 200 ms; multiplier 4; \};/);
  assert.match(text, /bgp_community\.add\(\(64512, 100\)\);/);
  assert.doesNotMatch(text, /bgp_local_pref/, "LOCAL_PREF is not rendered on an eBGP session");
  assert.doesNotMatch(text, /192\.0\.2\.2|192\.0\.2\.3/, "tor-b selects another rack; tor-c is invalid");
  assert.doesNotMatch(stderr, /bgp_no_peer/, "no false alarm before the first read");
  assert.match(stderr, /object left out: LoadBalancerBGPPeer tor-c: spec\.holdTime: 2s: must be 0s or 3s/);
  assert.match(
    stderr,
    /bgp: LoadBalancerBGPPeer tor-a: spec\.ipv4\.localPref 200 is not sent: .*RFC 4271 §5\.1\.5\) \[bgp_local_pref_ebgp\]/,
  );

  // tor-b now selects this rack too: BIRD is reconfigured with both sessions
  const b = api.find("passlb.io/v1alpha1", "LoadBalancerBGPPeer", "tor-b") as unknown as { spec: object };
  api.put({ ...b, spec: { ...b.spec, nodeSelectors: [{ matchLabels: { rack: "r1" } }] } });
  await eventually(() => last().includes("neighbor 192.0.2.2 as 64500"), "tor-b added", 10_000);
  assert.match(last(), /protocol bgp peer2 \{\n {2}description "tor-b";/);
  assert.match(stderr, /bird reloaded: the BGP configuration changed/);
  stop.abort();
  assert.equal(await running, 0);
  assert.equal(speaker.stopped, true, "a graceful stop stops the speaker");
  assert.deepEqual(api.forbidden(), [], "deploy/rbac-lb.yaml lets the LB read LoadBalancerBGPPeers");
});

test("--announce bgp with neither flags nor the cluster: exit 2, saying what is missing", async () => {
  let stderr = "";
  const io = {
    stdout: () => {},
    stderr: (s: string) => {
      stderr += s;
    },
    readStdin: async () => "",
  };
  const code = await runNftablesLb(
    { ...FLAGS, filename: ["examples/quickstart"] },
    io,
    () => new AbortController().signal,
    undefined,
    undefined,
    { nft: new FakeNftApplier() },
  );
  assert.equal(code, 2);
  assert.match(
    stderr,
    /--announce bgp needs --bgp-asn and --bgp-peer \(in Kubernetes mode: LoadBalancerBGPPeer objects instead\)/,
  );
});
