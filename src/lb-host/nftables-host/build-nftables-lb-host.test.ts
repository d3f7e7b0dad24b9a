/**
 * The nftables LB host as built from a config (build-nftables-lb-host.ts): which parts each
 * config yields and in which order, and what a part that cannot start does — the parts
 * started before it are undone newest first, and `passlb lb` exits with the part's code
 * (the announcer: 1, with the data plane stopped; unreadable manifests: 2; nft unusable: 1,
 * before anything else). Every driver is a fake (fake-drivers.ts); the manifests are
 * examples/quickstart.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { lbFlags } from "../../../test/support/lb-flags.ts";
import type { Announcer } from "../../announce/announcer.ts";
import { type NftLbFlags, runNftablesLb } from "../../cli/lb-nftables.ts";
import { nftablesLbHostConfig } from "../lb-host-config.ts";
import { buildNftablesLbHost } from "./build-nftables-lb-host.ts";
import { fakeLbHostDrivers } from "./fake-drivers.ts";

/** `passlb lb -f examples/quickstart` with commander's defaults */
const flags = (change: Partial<NftLbFlags> = {}) =>
  lbFlags("examples/quickstart", { handoverMs: "1000", ...change });

const readStdin = async () => "";

function partsOf(change: Partial<NftLbFlags>, kube = false): readonly string[] {
  const given = nftablesLbHostConfig(flags(change), { kube, bgpPeers: false });
  assert.ok(given.ok, given.ok ? "" : given.message);
  const source = { start: async () => {}, close: async () => {} };
  const built = buildNftablesLbHost(
    given.config,
    fakeLbHostDrivers(),
    { say: () => {} },
    {
      host: "lb-1",
      readStdin,
      ...(kube && { kube: { source, prepare: () => ({ snapshot: undefined as never, degraded: false }) } }),
    },
  );
  return built.host.parts;
}

test("the parts a config yields, in start order", () => {
  assert.deepEqual(partsOf({}), [
    "preflight",
    "conntrack",
    "health",
    "generations",
    "manifests",
    "dataplane",
    "input",
    "watch",
  ]);
  assert.deepEqual(
    partsOf({ once: true }),
    ["preflight", "conntrack", "manifests", "dataplane", "input"],
    "--once: one sync, nothing that keeps running",
  );
  assert.deepEqual(partsOf({ probe: false, driftCheckMs: "0", claimNat: true }), [
    "preflight",
    "conntrack",
    "nat-claim",
    "manifests",
    "dataplane",
    "input",
    "watch",
  ]);
  assert.deepEqual(partsOf({ forward: "encap", encapCheck: true }), [
    "preflight",
    "conntrack",
    "health",
    "tunnel-check",
    "generations",
    "manifests",
    "dataplane",
    "input",
    "watch",
  ]);
  assert.deepEqual(
    partsOf({ announce: "l2", interface: "eth0", hostName: "lb-1", peers: ["lb-1=192.0.2.2"] }, true),
    ["preflight", "conntrack", "health", "generations", "dataplane", "input", "announcer"],
    "Kubernetes mode: the source is the input, started after the data plane; no manifests watch",
  );
});

async function run(change: Partial<NftLbFlags>, drivers = fakeLbHostDrivers()) {
  let stderr = "";
  const io = {
    stdout: () => {},
    stderr: (s: string) => {
      stderr += s;
    },
    readStdin,
  };
  const stop = new AbortController();
  const running = runNftablesLb(
    flags({ probe: false, routes: false, ...change }),
    io,
    () => stop.signal,
    undefined,
    undefined,
    {
      drivers,
    },
  );
  return { running, stop, stderr: () => stderr, drivers };
}

test("an announcer that cannot start: exit 1, and the parts before it undone newest first", async () => {
  const stopped: string[] = [];
  const refusing: Announcer = {
    start: async () => {
      throw new Error("keepalived: no such interface");
    },
    update: async () => {},
    status: () => {
      throw new Error("not started");
    },
    stop: async () => {},
  };
  const given = nftablesLbHostConfig(
    flags({ probe: false, announce: "l2", interface: "eth0", hostName: "lb-1", peers: ["lb-1=192.0.2.2"] }),
    { kube: false, bgpPeers: false },
  );
  assert.ok(given.ok);
  const drivers = fakeLbHostDrivers({ keepalived: () => refusing });
  const lines: string[] = [];
  const built = buildNftablesLbHost(
    given.config,
    drivers,
    { say: (l) => lines.push(l) },
    { host: "lb-1", readStdin, events: { stopped: (part) => stopped.push(part) } },
  );
  await assert.rejects(built.host.start(), /announcer: .*keepalived: no such interface/);
  assert.deepEqual(stopped, ["input", "dataplane", "manifests", "generations", "conntrack", "preflight"]);
  assert.equal(built.host.state, "stopped");
  assert.ok(
    lines.some((l) => /^passlb lb: full sync/.test(l)),
    "it waited for the first sync",
  );
  assert.deepEqual(drivers.calls.slice(-1), ["generations.close"]);

  // the same through `passlb lb`: the line and exit 1
  const lb = await run(
    { announce: "l2", interface: "eth0", hostName: "lb-1", peers: ["lb-1=192.0.2.2"] },
    fakeLbHostDrivers({ keepalived: () => refusing }),
  );
  assert.equal(await lb.running, 1);
  assert.match(lb.stderr(), /error: --announce l2: keepalived: no such interface\n/);
  assert.doesNotMatch(lb.stderr(), /stopped; the kernel keeps forwarding/);
});

test("unreadable manifests at start: exit 2 before the data plane starts; nft unusable: exit 1 before anything", async () => {
  const missing = await run({ filename: ["/nonexistent/passlb-manifests"] });
  assert.equal(await missing.running, 2);
  assert.doesNotMatch(missing.stderr(), /sync/);
  assert.ok(!missing.drivers.calls.includes("nft.run"), "nothing was applied");

  const drivers = fakeLbHostDrivers();
  drivers.fail.add("nft.dump");
  const unusable = await run({}, drivers);
  assert.equal(await unusable.running, 1);
  assert.match(
    unusable.stderr(),
    /^error: the nftables data plane is not usable here \(.*fake nft\.dump refused.*\); run as root with nft ≥ 1\.0, or use the userspace proxy\n$/,
  );
  assert.deepEqual(drivers.calls, ["nft.dump"]);
});

test("--once: one sync, exit 0, and nothing left running", async () => {
  const once = await run({ once: true });
  assert.equal(await once.running, 0);
  assert.match(once.stderr(), /passlb lb: full sync, \d+ bytes\n/);
  assert.doesNotMatch(once.stderr(), /stopped; the kernel/);
  const failing = fakeLbHostDrivers();
  failing.fail.add("nft.run");
  const failed = await run({ once: true }, failing);
  assert.equal(await failed.running, 1);
  assert.match(failed.stderr(), /passlb lb: sync failed: fake nft\.run refused\n/);
});

test("a host that runs until the signal: stopped newest first, the kernel left forwarding", async () => {
  const lb = await run({});
  await new Promise((r) => setTimeout(r, 200));
  lb.stop.abort();
  assert.equal(await lb.running, 0);
  assert.match(lb.stderr(), /passlb lb: full sync/);
  assert.match(lb.stderr(), /passlb lb: stopped; the kernel keeps forwarding with the last table\n$/);
  assert.deepEqual(
    lb.drivers.calls.filter((c) => c.startsWith("generations")),
    ["generations.open", "generations.close"],
  );
});
