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
import { bgpConditions } from "../../src/announce/bgp/bgp-conditions.ts";
import { bgpSettingsFor } from "../../src/announce/bgp/bgp-peer-config.ts";
import type { SpeakerState } from "../../src/announce/bgp/bgp-types.ts";
import { peerProtocolNames } from "../../src/announce/bgp/bird-config.ts";
import { fakeSpeaker } from "../../src/announce/bgp/bird-speaker.ts";
import { fakeVipRoutes } from "../../src/announce/bgp/kernel-vip-routes.ts";
import { bgpAnnouncer } from "../../src/cli/lb-announce-bgp.ts";
import { kubeReadHandler } from "../../src/cli/lb-kube.ts";
import { type NftLbFlags, runNftablesLb } from "../../src/cli/lb-nftables.ts";
import { BgpStatusWriter } from "../../src/cluster/bgp-status-writer.ts";
import { FakeNft } from "../../src/drivers/fake-nft.ts";
import { decodeBgpAdvertisement } from "../../src/k8s/load-balancer-bgp-advertisement.ts";
import { decodeBgpPeer } from "../../src/k8s/load-balancer-bgp-peer.ts";
import { fakeLbHostDrivers } from "../../src/lb-host/nftables-host/fake-drivers.ts";
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
  // the new fields, by the CRD's schema (deploy/crd-loadbalancerbgppeers.yaml)
  await assert.rejects(
    custom.createClusterCustomObject({
      ...IDS,
      body: peer("md5", { peerAddress: "192.0.2.4", password: 'a"b-KEY', dynamicASN: "sideways" }),
    }),
    (e: ApiException<string>) =>
      e.code === 422 &&
      !/KEY/.test(String(e.body)) &&
      /spec\.dynamicASN: Unsupported value: .*sideways.*supported values: .*internal.*external/.test(
        String(e.body),
      ),
  );
  // LoadBalancerBGPAdvertisement (deploy/crd-loadbalancerbgpadvertisements.yaml)
  const ADS = { ...IDS, plural: "loadbalancerbgpadvertisements" };
  const ad = (name: string, spec: object) => ({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerBGPAdvertisement",
    metadata: { name },
    spec,
  });
  await custom.createClusterCustomObject({
    ...ADS,
    body: ad("agg", { aggregationLength: 24, communities: ["no-export", "large:1:2:3"], peers: ["tor-a"] }),
  });
  await assert.rejects(
    custom.createClusterCustomObject({
      ...ADS,
      body: ad("bad", { aggregationLength: 33, communities: ["65536"] }),
    }),
    (e: ApiException<string>) =>
      e.code === 422 &&
      /spec\.aggregationLength: Invalid value: 33: .*less than or equal to 32/.test(String(e.body)) &&
      /spec\.communities\[0\]: Invalid value: .*65536.*should match/.test(String(e.body)),
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
  const nft = new FakeNft();
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
      bgpExtras: () => ({
        advertisements: source.bgpAdvertisements,
        pools: source.ipPools.map((p) => ({
          name: p.metadata.name,
          labels: {},
          addresses: p.spec.addresses,
        })),
      }),
      bgpStatus: (objects) =>
        new BgpStatusWriter({ kubeConfig: api.kubeConfig("lb"), host: "lb-1", now: Date.now }).write(objects),
    },
    {
      drivers: fakeLbHostDrivers({
        nft,
        bird: (config, host, onEvent, cluster) =>
          bgpAnnouncer(config, host, onEvent, cluster, { speaker, routes: fakeVipRoutes() }),
      }),
    },
  );
  const last = () => speaker.configs.at(-1) ?? "";
  await eventually(() => last().includes("neighbor 192.0.2.1 as 64500"), "tor-a in bird.conf", 10_000);
  const text = last();
  assert.match(text, /description "tor-a";\n {2}local as 64512;/);
  assert.match(text, /hold time 3;\n {2}keepalive time 1;/);
  assert.match(text, /bfd \{ min rx interval 300 ms; min tx interval 200 ms; multiplier 4; passive off; \};/);
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
  assert.match(last(), /protocol bgp p_tor_b \{\n {2}description "tor-b";/);
  assert.match(stderr, /bird reloaded: the BGP configuration changed/);

  // a pool and an advertisement: tor-a gets the pool's /24 aggregate, tor-b nothing of it
  api.put({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name: "web" },
    spec: { addresses: ["203.0.113.0/24"] },
  });
  api.put({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerBGPAdvertisement",
    metadata: { name: "agg" },
    spec: { ipAddressPools: ["web"], aggregationLength: 24, peers: ["tor-a"], communities: ["no-export"] },
  });
  await eventually(() => last().includes("203.0.113.0/24{24,24}"), "the aggregate in tor-a's filter", 10_000);
  const filterOf = (name: string) => last().split(`filter ${name} {`)[1]?.split("\n}\n")[0] ?? "";
  assert.match(
    filterOf("passlb_out_p_tor_a_ipv4"),
    /if net ~ \[ 203\.0\.113\.0\/24\{24,24\} \] then accept;/,
  );
  assert.match(filterOf("passlb_out_p_tor_a_ipv4"), /bgp_community\.add\(\(65535, 65281\)\)/);
  assert.match(
    last(),
    /filter passlb_out_p_tor_b_ipv4 \{\n {2}if proto != "vips4" then reject;\n {2}bgp_origin = ORIGIN_IGP;\n {2}reject;/,
  );
  // a hold-time change restarts tor-a's session: said before it is loaded
  const a = api.find("passlb.io/v1alpha1", "LoadBalancerBGPPeer", "tor-a") as unknown as { spec: object };
  api.put({ ...a, spec: { ...a.spec, holdTime: "6s" } });
  await eventually(() => last().includes("hold time 6;"), "tor-a's new hold time", 10_000);
  assert.match(
    stderr,
    /bgp: BGP session p_tor_a \(LoadBalancerBGPPeer tor-a\) restarts: holdTime changed, which BIRD applies only by restarting the session/,
  );
  assert.doesNotMatch(stderr, /p_tor_b \(LoadBalancerBGPPeer tor-b\) restarts/, "tor-b is untouched");
  // passlb lb writes its conditions: tor-a accepted on lb-1
  await eventually(
    () =>
      // biome-ignore lint/suspicious/noExplicitAny: the stored object, read in assertions
      (api.find("passlb.io/v1alpha1", "LoadBalancerBGPPeer", "tor-a") as any)?.status?.hosts?.["lb-1"]
        ?.conditions?.[0]?.reason === "Selected",
    "tor-a's status written by lb-1",
    15_000,
  );
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
    { drivers: fakeLbHostDrivers({ nft: new FakeNft() }) },
  );
  assert.equal(code, 2);
  assert.match(
    stderr,
    /--announce bgp needs --bgp-asn and --bgp-peer \(in Kubernetes mode: LoadBalancerBGPPeer objects instead\)/,
  );
});

test("passwordSecret: the LB host reads exactly the Secrets its Role names, in passlb's namespace", {
  timeout: 30_000,
}, async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const custom = api.kubeConfig("admin").makeApiClient(CustomObjectsApi);
  await custom.createClusterCustomObject({
    ...IDS,
    body: peer("granted", { peerAddress: "192.0.2.1", passwordSecret: { name: "passlb-bgp-password" } }),
  });
  await custom.createClusterCustomObject({
    ...IDS,
    body: peer("not-granted", { peerAddress: "192.0.2.2", passwordSecret: { name: "other-key" } }),
  });
  await custom.createClusterCustomObject({
    ...IDS,
    body: peer("elsewhere", {
      peerAddress: "192.0.2.3",
      passwordSecret: { name: "x", namespace: "default" },
    }),
  });
  for (const [name, ns] of [
    ["passlb-bgp-password", "passlb-system"],
    ["other-key", "passlb-system"],
    ["x", "default"],
  ] as const)
    api.put({
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name, namespace: ns },
      type: "kubernetes.io/basic-auth",
      data: { password: Buffer.from(`key of ${name}`).toString("base64") },
    });
  const source = kubeSource(api, { bgpPeers: true });
  t.after(() => source.close());
  await source.start({ onChange: () => {}, onRead: () => {} });
  await eventually(() => source.bgpSecrets.size > 0, "a Secret read", 10_000);
  assert.deepEqual(
    [...source.bgpSecrets],
    [
      [
        "passlb-system/passlb-bgp-password",
        { type: "kubernetes.io/basic-auth", password: "key of passlb-bgp-password" },
      ],
    ],
  );
  // other-key is not in the Role: the API server refuses the list (403), so nothing is read;
  // default/x is never asked for (another namespace)
  await eventually(() => api.forbidden().length > 0, "the refused list", 10_000);
  assert.deepEqual(
    api.forbidden().map((f) => [f.verb, f.resource, f.namespace, f.name]),
    [["list", "secrets", "passlb-system", "other-key"]],
  );
  assert.match(api.forbidden()[0]!.message, /secrets "other-key" is forbidden/);
});

test("status: each LB host merge-patches its own key of status.hosts, refused and accepted objects say why", {
  timeout: 30_000,
}, async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const custom = api.kubeConfig("admin").makeApiClient(CustomObjectsApi);
  await custom.createClusterCustomObject({ ...IDS, body: peer("tor-a", { peerAddress: "192.0.2.1" }) });
  await custom.createClusterCustomObject({
    ...IDS,
    body: peer("tor-r2", { peerAddress: "192.0.2.2", nodeSelectors: [{ matchLabels: { rack: "r2" } }] }),
  });
  const ADS = { ...IDS, plural: "loadbalancerbgpadvertisements" };
  const adBody = (name: string, spec: object) => ({
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerBGPAdvertisement",
    metadata: { name },
    spec,
  });
  await custom.createClusterCustomObject({
    ...ADS,
    body: adBody("too-short", { ipAddressPools: ["web"], aggregationLength: 16 }),
  });
  const decoded = [
    decodeBgpPeer(peer("tor-a", { peerAddress: "192.0.2.1" })).peer!,
    decodeBgpPeer(
      peer("tor-r2", { peerAddress: "192.0.2.2", nodeSelectors: [{ matchLabels: { rack: "r2" } }] }),
    ).peer!,
  ];
  const ads = [
    decodeBgpAdvertisement(adBody("too-short", { ipAddressPools: ["web"], aggregationLength: 16 }))
      .advertisement!,
  ];
  const pools = [{ name: "web", labels: {}, addresses: ["203.0.113.0/24"] }];
  const speaker: SpeakerState = {
    running: true,
    sessions: [{ name: "p_tor_a", peer: "192.0.2.1", state: "Active", established: false, exported: 0 }],
    bfd: [],
    health: "down",
    findings: [],
  };
  const write = async (host: string, s: SpeakerState) => {
    const config = bgpSettingsFor({
      host,
      labels: { rack: "r1" },
      peers: decoded,
      advertisements: ads,
      pools,
      kernelTable: 4242,
    });
    const names = peerProtocolNames(config.settings.peers);
    const protocols = new Map(config.settings.peers.map((p, i) => [p.source!, names[i]!]));
    const writer = new BgpStatusWriter({
      kubeConfig: api.kubeConfig("lb"),
      host,
      now: () => Date.parse("2026-12-02T05:00:00Z"),
    });
    return writer.write(
      bgpConditions({
        peers: ["tor-a", "tor-r2"],
        advertisements: ["too-short"],
        config,
        protocols,
        speaker: s,
      }),
    );
  };
  assert.deepEqual(await write("lb-1", speaker), []);
  assert.deepEqual(
    await write("lb-2", {
      ...speaker,
      sessions: [{ ...speaker.sessions[0]!, state: "Established", established: true, exported: 2 }],
    }),
    [],
  );
  const stored = (kind: string, name: string) =>
    // biome-ignore lint/suspicious/noExplicitAny: the stored object, read in assertions
    (api.find("passlb.io/v1alpha1", kind, name) as any).status.hosts;
  const a = stored("LoadBalancerBGPPeer", "tor-a");
  assert.deepEqual(
    Object.keys(a).sort(),
    ["lb-1", "lb-2"],
    "each host its own key; neither overwrote the other",
  );
  assert.deepEqual(
    a["lb-1"].conditions.map((c: { type: string; status: string; reason: string }) => [
      c.type,
      c.status,
      c.reason,
    ]),
    [
      ["Accepted", "True", "Selected"],
      ["SessionEstablished", "False", "Active"],
    ],
  );
  assert.equal(a["lb-2"].conditions[1].status, "True");
  assert.equal(a["lb-1"].conditions[0].lastTransitionTime, "2026-12-02T05:00:00Z");
  assert.deepEqual(
    stored("LoadBalancerBGPPeer", "tor-r2")["lb-1"].conditions.map((c: { reason: string }) => c.reason),
    ["NotSelected"],
  );
  const ad = stored("LoadBalancerBGPAdvertisement", "too-short")["lb-1"].conditions[0];
  assert.deepEqual([ad.status, ad.reason], ["False", "Refused"]);
  assert.match(ad.message, /pool prefix 203\.0\.113\.0\/24 is more specific/);
  assert.deepEqual(api.forbidden(), [], "deploy/rbac-lb.yaml grants the status patch");
});
