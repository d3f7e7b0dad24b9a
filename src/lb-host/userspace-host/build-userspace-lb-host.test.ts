/**
 * The userspace LB host built with fake drivers (userspace-host/fake-drivers.ts): its parts in
 * order and the one teardown in reverse; the watched paths follow every good read (a new
 * Service served, a removed one dropped); a read with problems keeps the last good state
 * and says so once, naming the file; a first read with problems refuses to start and
 * leaves nothing running; in Kubernetes mode a degraded read keeps the Services that
 * vanished from it; a pushed input (passlb up's, cluster/pushed-source.ts) starts at once
 * and serves each push as it comes, with the caller's seed.
 */
import assert from "node:assert/strict";
import { test } from "node:test";
import { readManifests } from "../../cluster/manifest-files.ts";
import { PushedSource } from "../../cluster/pushed-source.ts";
import type { SourceRead } from "../../cluster/snapshot-source.ts";
import { decodeDocuments } from "../../k8s/decode.ts";
import { loopbackSnapshot } from "../../quickstart/loopback-rewrite.ts";
import { LbHostStartError } from "../lb-host.ts";
import {
  buildUserspaceLbHost,
  InputRefusedError,
  type UserspaceLbHostConfig,
} from "./build-userspace-lb-host.ts";
import { fakeUserspaceDrivers, fakeUserspaceSink } from "./fake-drivers.ts";

const FIXTURES = "test/fixtures/userspace/lb-watch";

async function read(files: readonly string[]): Promise<SourceRead> {
  const r = await readManifests(
    files.map((f) => `${FIXTURES}/${f}`),
    async () => "",
  );
  return { ok: true, snapshot: decodeDocuments(r.documents).snapshot, notices: [], problems: [] };
}

const PROBLEM = "dir/web.yaml (document 1): Service t/web: spec.ports[0].port: must be at least 1";
const BAD: SourceRead = { ok: false, problems: [PROBLEM] };

const CONFIG: UserspaceLbHostConfig = {
  paths: ["dir", "-"],
  pollMs: 100,
  loopback: true,
  proxyProtocol: false,
  tcp: "net",
  reason: "requested",
};

test("parts start in order and stop in reverse; the paths are watched with the config's poll", async () => {
  const drivers = fakeUserspaceDrivers(await read(["start/cluster.yaml", "start/web.yaml"]));
  const { sink, out } = fakeUserspaceSink();
  const stdin = async () => "";
  const { host } = buildUserspaceLbHost(CONFIG, drivers, sink, { readStdin: stdin });
  assert.deepEqual(host.parts, ["dataplane", "health", "input", "reporter"]);
  await host.start();
  assert.deepEqual(drivers.folderOptions()?.path, ["dir", "-"]);
  assert.equal(drivers.folderOptions()?.pollMs, 100);
  assert.equal(drivers.folderOptions()?.readStdin, stdin);
  assert.deepEqual(out, [
    "passlb lb: data plane userspace (requested); TCP on node:net sockets\n",
    "  t/web: ingress 127.0.1.140 ipMode Proxy\n",
    "  dashboard: http://127.0.0.1:9797/ (metrics at http://127.0.0.1:9797/metrics)\n",
  ]);
  assert.deepEqual(drivers.served(), ["t/web 127.0.1.140:21740"], "the loopback rewrite applied");
  await host.stop();
  assert.deepEqual(drivers.journal, [
    "source.start",
    "health.setPlans t/web",
    "proxy.apply",
    "source.close",
    "health.close",
    "proxy.stop",
  ]);
});

test("manifests: good reads are followed, a bad one keeps the last good state and says so once", async () => {
  const drivers = fakeUserspaceDrivers(await read(["start/cluster.yaml", "start/web.yaml"]));
  const { sink, out, err } = fakeUserspaceSink();
  const { host, sync } = buildUserspaceLbHost(CONFIG, drivers, sink);
  await host.start();
  await drivers.push(await read(["start/cluster.yaml", "start/web.yaml", "edits/worker.yaml"]));
  assert.deepEqual(drivers.served(), ["t/web 127.0.1.140:21740", "t/worker 127.0.1.141:21740"]);
  assert.ok(out.includes("  t/worker: ingress 127.0.1.141 ipMode Proxy\n"));
  const updates = drivers.journal.filter((c) => c === "proxy.apply").length;
  await drivers.push(BAD);
  await drivers.push(BAD);
  assert.equal(drivers.journal.filter((c) => c === "proxy.apply").length, updates, "nothing applied");
  assert.deepEqual(
    sync.plans.map((p) => p.service),
    ["t/web", "t/worker"],
  );
  assert.deepEqual(err, [
    `passlb lb: the manifests have problems; keeping the last good state:\n  ${PROBLEM}\n`,
  ]);
  await drivers.push(await read(["start/cluster.yaml", "start/web.yaml"]));
  assert.deepEqual(drivers.served(), ["t/web 127.0.1.140:21740"], "the removed Service dropped");
  assert.equal(err.at(-1), "passlb lb: the manifests are valid again\n");
  await host.stop();
});

test("manifests: a first read with problems refuses to start and leaves nothing running", async () => {
  const drivers = fakeUserspaceDrivers(BAD);
  const { sink, err } = fakeUserspaceSink();
  const { host } = buildUserspaceLbHost(CONFIG, drivers, sink);
  await assert.rejects(
    host.start(),
    (e) => e instanceof LbHostStartError && e.part === "input" && e.cause instanceof InputRefusedError,
  );
  assert.deepEqual(err, ["error: the input has 1 problem:\n", `  ${PROBLEM}\n`]);
  assert.deepEqual(drivers.journal, ["source.start", "source.close", "health.close", "proxy.stop"]);
});

test("Kubernetes mode: a degraded read keeps the Services that vanished from it", async () => {
  const full = await read(["start/cluster.yaml", "start/web.yaml", "edits/worker.yaml"]);
  const drivers = fakeUserspaceDrivers(full);
  const { sink } = fakeUserspaceSink();
  const { host, sync } = buildUserspaceLbHost({ ...CONFIG, paths: [] }, drivers, sink, {
    kube: {
      source: drivers.source,
      prepare: (r) => ({ snapshot: r.snapshot, degraded: r.problems.length > 0 }),
    },
  });
  await host.start(); // does not wait for the cluster's first read
  await sync.idle();
  assert.equal(drivers.folderOptions(), undefined, "no folder in Kubernetes mode");
  assert.deepEqual(
    sync.plans.map((p) => p.service),
    ["t/web", "t/worker"],
  );
  const webOnly = await read(["start/cluster.yaml", "start/web.yaml"]);
  assert.ok(webOnly.ok);
  await drivers.push({ ...webOnly, problems: ["Service t/worker: spec.ports[0].port: must be at least 1"] });
  assert.deepEqual(
    sync.plans.map((p) => p.service),
    ["t/web", "t/worker"],
    "the broken one is kept",
  );
  await drivers.push(webOnly);
  assert.deepEqual(
    sync.plans.map((p) => p.service),
    ["t/web"],
    "a clean read drops it",
  );
  await host.stop();
});

test("a pushed input: the host starts before any read, serves each push, and uses the caller's seed", async () => {
  const drivers = fakeUserspaceDrivers(BAD); // never read: no folder is watched
  const { sink, out } = fakeUserspaceSink();
  const pushed = new PushedSource();
  const seeds: number[] = [];
  const { host, sync, lookup, tcpPlumbing } = buildUserspaceLbHost(
    { ...CONFIG, paths: [], loopback: false, seed: 7 },
    {
      ...drivers,
      proxy: (o) => {
        seeds.push(o.seed);
        return drivers.proxy(o);
      },
    },
    sink,
    { pushed },
  );
  await host.start();
  assert.equal(drivers.folderOptions(), undefined);
  assert.deepEqual([sync.plans, seeds, tcpPlumbing], [[], [7], "net"]);
  const web = await read(["start/cluster.yaml", "start/web.yaml"]);
  assert.ok(web.ok);
  // passlb up pushes its Snapshots rewritten already: the host does not rewrite them again
  await pushed.push(loopbackSnapshot(web.snapshot).snapshot);
  assert.deepEqual(drivers.served(), ["t/web 127.0.1.140:21740"]);
  assert.ok(out.includes("  t/web: ingress 127.0.1.140 ipMode Proxy\n"));
  assert.deepEqual(sync.findings, []);
  assert.equal(lookup("t/web", "any", "n1").state, "healthy", "the prober's lookup");
  await host.stop();
  assert.deepEqual(drivers.journal, ["health.setPlans t/web", "proxy.apply", "health.close", "proxy.stop"]);
});
