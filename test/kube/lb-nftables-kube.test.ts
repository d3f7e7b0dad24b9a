/**
 * `passlb lb --dataplane nftables` in Kubernetes mode, wired as the command wires it
 * (runNftablesLb) but with the fake drivers (fake nft applier), so it runs without root: the table gets
 * the VIPs from Service status only, a Service without one stays out, the table is left
 * alone while the API server is away, and the changes made meanwhile converge. With
 * `--announce l2` (a fake engine): the engine starts after the first sync with the VIPs the
 * data plane programs as ready, hears of a VIP once it is programmed, and is stopped
 * gracefully at shutdown.
 */
import assert from "node:assert/strict";
import { type TestContext, test } from "node:test";
import { FakeAnnouncer } from "../../src/announce/fake-announcer.ts";
import { kubeReadHandler } from "../../src/cli/lb-kube.ts";
import { type NftLbFlags, runNftablesLb } from "../../src/cli/lb-nftables.ts";
import { FakeNft } from "../../src/drivers/fake-nft.ts";
import { createNftDriver, type NftDriver } from "../../src/drivers/nft.ts";
import { PasslbError } from "../../src/errors.ts";
import { fakeLbHostDrivers } from "../../src/lb-host/nftables-host/fake-drivers.ts";
import { createNetns, deleteNetns, kernelSkipReason } from "../netns.ts";
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
  announce: "none",
  peers: [],
};

/** The scenario; the API server stays away `outageMs`. Returns how long, once it was back,
 * the table took to converge (the VIP written while it was away programmed). */
async function scenario(
  t: TestContext,
  nft: NftDriver,
  sent: () => number,
  outageMs = 400,
  flags: NftLbFlags = FLAGS,
): Promise<number> {
  const api = await fakeCluster();
  t.after(() => api.close());
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
  const source = kubeSource(api);
  const running = runNftablesLb(
    flags,
    io,
    () => stop.signal,
    undefined,
    { source, prepare: kubeReadHandler(undefined, (line) => io.stderr(`passlb lb: ${line}\n`)) },
    { drivers: fakeLbHostDrivers({ nft }) },
  );
  const vips = async () => {
    const state = await nft.dump("passlb");
    return [...(state?.sets.get("dispatch4")?.elements.keys() ?? [])]
      .map((k) => k.split(" ")[0] ?? "")
      .sort();
  };
  // the first sync (generous: a loaded machine starts the source and the loop slowly)
  await eventually(async () => (await vips()).includes("203.0.113.10"), "the web VIP in the table", 20_000);
  assert.deepEqual([...new Set(await vips())], ["203.0.113.10"], "no address for the Service without status");
  assert.match(stderr, /shop\/pending: no address in status/);
  assert.match(stderr, /object left out: Service shop\/broken/);

  const table = await nft.dump("passlb");
  await api.stop();
  const scripts = sent();
  const pending = api.find("v1", "Service", "pending", "shop")!;
  api.put({ ...pending, status: { loadBalancer: { ingress: [{ ip: "203.0.113.11" }] } } });
  await new Promise((r) => setTimeout(r, outageMs));
  assert.equal(sent(), scripts, "nothing is sent to the kernel while the API server is away");
  assert.deepEqual(await nft.dump("passlb"), table, "the table as it was before the API server went");

  await api.start();
  const back = Date.now();
  await eventually(
    async () => (await vips()).includes("203.0.113.11"),
    "the VIP written while the API was down",
    20_000,
  );
  const converged = Date.now() - back;
  stop.abort();
  assert.equal(await running, 0);
  return converged;
}

test("nftables data plane (fake nft) follows the cluster: status VIPs only, kept while the API is down, converges after", {
  timeout: 30_000,
}, async (t) => {
  const nft = new FakeNft();
  await scenario(t, nft, () => nft.scripts.length);
});

test("the same against the kernel: real nft in a throwaway network namespace", {
  timeout: 60_000,
  skip: kernelSkipReason(),
}, async (t) => {
  const ns = createNetns("kube");
  t.after(() => deleteNetns(ns));
  const real = createNftDriver({ netns: ns });
  let sent = 0;
  const counting: NftDriver = {
    run: (tx) => {
      sent++;
      return real.run(tx);
    },
    check: (tx) => real.check(tx),
    dump: (table, options) => real.dump(table, options),
    counters: (table) => real.counters(table),
  };
  await scenario(t, counting, () => sent);
});

test("--announce l2: the engine is told which VIPs this host can serve, and stopped gracefully", {
  timeout: 30_000,
}, async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const nft = new FakeNft();
  const fake = new FakeAnnouncer("lb-1");
  let peersGiven: unknown;
  const stop = new AbortController();
  t.after(() => stop.abort());
  const io = { stdout: () => {}, stderr: () => {}, readStdin: async () => "" };
  const running = runNftablesLb(
    {
      ...FLAGS,
      announce: "l2",
      interface: "eth0",
      hostName: "lb-1",
      peers: ["lb-1=192.0.2.2,lb-2=192.0.2.3"],
    },
    io,
    () => stop.signal,
    undefined,
    { source: kubeSource(api), prepare: kubeReadHandler(undefined, () => {}) },
    {
      drivers: fakeLbHostDrivers({
        nft,
        keepalived: (_config, peers) => {
          peersGiven = peers;
          return fake;
        },
      }),
    },
  );
  const ready = (vip: string) => fake.last?.vips.find((v) => v.vip === vip);
  await eventually(async () => ready("203.0.113.10")?.ready === true, "the web VIP announced as ready");
  assert.deepEqual([...(peersGiven as Map<string, unknown>).keys()], ["lb-1", "lb-2"]);
  assert.equal(ready("203.0.113.11"), undefined, "a Service without a VIP in status is not announced");
  const pending = api.find("v1", "Service", "pending", "shop")!;
  api.put({ ...pending, status: { loadBalancer: { ingress: [{ ip: "203.0.113.11" }] } } });
  await eventually(async () => ready("203.0.113.11")?.ready === true, "the new VIP, once programmed");
  stop.abort();
  assert.equal(await running, 0);
  assert.deepEqual(fake.stopped, { graceful: true });
});

test("--announce bgp: the same Announcer calls and readiness; a failed pass makes every VIP not ready until the next one", {
  timeout: 30_000,
}, async (t) => {
  const api = await fakeCluster();
  t.after(() => api.close());
  const nft = new FakeNft();
  const fake = new FakeAnnouncer("lb-1", "bird");
  let hostGiven: string | undefined;
  const stop = new AbortController();
  t.after(() => stop.abort());
  const io = { stdout: () => {}, stderr: () => {}, readStdin: async () => "" };
  const running = runNftablesLb(
    { ...FLAGS, announce: "bgp", hostName: "lb-1", bgpAsn: "64512", bgpPeer: ["198.51.100.1:64500"] },
    io,
    () => stop.signal,
    undefined,
    { source: kubeSource(api), prepare: kubeReadHandler(undefined, () => {}) },
    {
      drivers: fakeLbHostDrivers({
        nft,
        bird: (_config, host) => {
          hostGiven = host;
          return fake;
        },
      }),
    },
  );
  const ready = (vip: string) => fake.last?.vips.find((v) => v.vip === vip);
  await eventually(async () => ready("203.0.113.10")?.ready === true, "the web VIP announced as ready");
  assert.equal(hostGiven, "lb-1", "BIRD's engine, for this host (a routed tier has no segment peers)");
  assert.equal(fake.status().engine, "bird");
  assert.equal(fake.status().vips.find((v) => v.vip === "203.0.113.10")?.state, "held");
  // the next pass fails: nothing is known to match the plan any more, so nothing is ready
  nft.failNext = new PasslbError("nft_failed", "fake nft: refused");
  const pending = api.find("v1", "Service", "pending", "shop")!;
  api.put({ ...pending, status: { loadBalancer: { ingress: [{ ip: "203.0.113.11" }] } } });
  await eventually(
    async () => ready("203.0.113.10")?.reason === "sync_failed",
    "withdrawn after the failed pass",
  );
  // and the pass after it succeeds (a retry): both VIPs ready
  await eventually(
    async () => ready("203.0.113.10")?.ready === true && ready("203.0.113.11")?.ready === true,
    "ready again once a pass succeeds",
  );
  stop.abort();
  assert.equal(await running, 0);
  assert.deepEqual(fake.stopped, { graceful: true });
});

test("API server gone for 60 s, then back (issue 16 §1): the table untouched meanwhile, converged within 10 s after", {
  timeout: 120_000,
}, async (t) => {
  const nft = new FakeNft();
  // with the LB's default drift check running through the outage
  const converged = await scenario(t, nft, () => nft.scripts.length, 60_000, {
    ...FLAGS,
    driftCheckMs: "5000",
  });
  t.diagnostic(`converged ${converged} ms after the API server came back from a 60 s outage`);
  assert.ok(converged <= 10_000, `converged after ${converged} ms, more than 10 s`);
});
