/**
 * The switch from MetalLB to passlb against the test API server (test/support/fake-api-server.ts)
 * through the real client-node: a cluster full of MetalLB-annotated Services that already
 * hold addresses, the pools `passlb import` makes of examples/migrate/metallb-l2, and
 * `passlb controller --default-class`. Not one address changes — watched all along, not
 * only at the end — while older Services without an address get free ones; a foreign-class
 * Service's address is never handed out; a conflicting request is refused with a condition
 * and an Event naming both sources; deprecated keys get a Normal Event.
 */
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { CoreV1Api } from "@kubernetes/client-node";
import { readManifests } from "../../src/cluster/manifest-files.ts";
import { ControllerRuntime } from "../../src/controller/controller-runtime.ts";
import { realClock } from "../../src/health/clock.ts";
import { importObjects } from "../../src/migrate/import-result.ts";
import { runCli } from "../run-cli.ts";
import { FakeApiServer } from "../support/fake-api-server.ts";
import { eventually } from "./kube-fixture.ts";

// biome-ignore lint/suspicious/noExplicitAny: JSON from the fake API server, read only in assertions
type Obj = Record<string, any>;

const HOLDERS = 48;
const NEWCOMERS = 6;

function service(
  name: string,
  ns: string,
  created: string,
  annotations: Record<string, string>,
  ip: string | undefined,
  spec: Obj = {},
): Obj {
  return {
    apiVersion: "v1",
    kind: "Service",
    metadata: { name, namespace: ns, creationTimestamp: created, annotations },
    spec: {
      type: "LoadBalancer",
      selector: { app: name },
      ports: [{ name: "http", port: 80, protocol: "TCP", targetPort: 8080 }],
      ...spec,
    },
    ...(ip && { status: { loadBalancer: { ingress: [{ ip }] } } }),
  };
}

const ingress = (o: Obj | undefined): string[] =>
  (o?.status?.loadBalancer?.ingress ?? []).map((i: Obj) => i.ip as string);

test("a MetalLB cluster switches to passlb and not one address changes", async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const read = await readManifests(["examples/migrate/metallb-l2"], async () => "");
  const imported = importObjects(read.documents);
  assert.deepEqual(imported.problems, []);
  for (const p of imported.pools) api.put({ ...p, metadata: { ...p.metadata } });
  api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: "passlb-system" } });

  // the example's Services, plus a cluster full of MetalLB-annotated ones holding the
  // addresses of pool "wide" — created newest-address-first, so that allocation in
  // creation order would renumber them if adoption did not come first
  const wide = {
    apiVersion: "passlb.io/v1alpha1",
    kind: "LoadBalancerIPPool",
    metadata: { name: "wide", creationTimestamp: "2026-01-01T00:00:00Z" },
    spec: { addresses: ["198.51.100.128/26"], autoAssign: true },
  };
  api.put(wide);
  const originals = new Map<string, string[]>();
  for (const d of read.documents) {
    const o = d.value as Obj;
    if (o.kind !== "Service") continue;
    api.put(o);
    originals.set(`${o.metadata.namespace}/${o.metadata.name}`, ingress(o));
  }
  for (let i = 0; i < HOLDERS; i++) {
    const ip = `198.51.100.${128 + HOLDERS - 1 - i}`;
    const annotations =
      i % 3 === 0
        ? { "metallb.io/loadBalancerIPs": ip }
        : i % 3 === 1
          ? { "metallb.universe.tf/address-pool": "wide" }
          : { "metallb.io/allow-shared-ip": `k${i}` };
    const s = service(
      `app-${i}`,
      "apps",
      `2025-01-01T00:${String(10 + i).padStart(2, "0")}:00Z`,
      annotations,
      ip,
      {
        ...(i % 4 === 0 && { allocateLoadBalancerNodePorts: false }),
      },
    );
    api.put(s);
    originals.set(`apps/app-${i}`, [ip]);
  }
  // older than every holder, no address yet: must get free ones, never a holder's
  for (let i = 0; i < NEWCOMERS; i++)
    api.put(service(`new-${i}`, "apps", `2024-01-01T00:0${i}:00Z`, {}, undefined));
  // another implementation's Service showing an address of the pool: never handed out
  api.put(
    service("foreign", "apps", "2024-01-01T00:00:00Z", {}, "198.51.100.176", {
      loadBalancerClass: "example.com/other",
    }),
  );
  // annotation and spec.loadBalancerIP disagree: refused, the address in status kept
  api.put(
    service(
      "conflict",
      "apps",
      "2025-02-01T00:00:00Z",
      { "metallb.io/loadBalancerIPs": "198.51.100.190" },
      "198.51.100.190",
      {
        loadBalancerIP: "198.51.100.191",
      },
    ),
  );
  originals.set("apps/conflict", ["198.51.100.190"]);
  // every namespace the Services live in exists (a real server refuses Events elsewhere)
  for (const ns of new Set([...originals.keys()].map((k) => k.split("/")[0] as string)))
    api.put({ apiVersion: "v1", kind: "Namespace", metadata: { name: ns } });

  const c = new ControllerRuntime({
    kubeConfig: api.kubeConfig("controller"),
    namespace: "passlb-system",
    identity: "migrate-compat",
    controller: { defaultClass: true, ipMode: "VIP" },
    election: { leaseDurationMs: 3000, renewDeadlineMs: 2000, retryPeriodMs: 250 },
    clock: realClock(),
    random: Math.random,
    tuning: {
      debounce: { quietMs: 20, maxMs: 200 },
      sourceBackoff: { initialMs: 20, maxMs: 200 },
      loopBackoff: { initialMs: 20, maxMs: 200 },
    },
  });
  // watch every address all along: a change at any moment fails the test
  const changed: string[] = [];
  let watching = true;
  const watcher = (async () => {
    while (watching) {
      for (const [key, ips] of originals) {
        const [ns, name] = key.split("/") as [string, string];
        const now = ingress(api.find("v1", "Service", name, ns) as Obj | undefined);
        if (now.length > 0 && now.join(",") !== ips.join(",")) changed.push(`${key}: ${ips} → ${now}`);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  t.after(async () => {
    watching = false;
    await watcher;
    await c.stop();
    await api.close();
  });
  await c.start();
  const condition = (o: Obj | undefined) =>
    (o?.status?.conditions ?? []).find((x: Obj) => x.type === "passlb.io/LoadBalancerReady");
  const all = () => [...originals.keys()].map((k) => k.split("/") as [string, string]);
  await eventually(
    () =>
      all().every(([ns, name]) => condition(api.find("v1", "Service", name, ns) as Obj) !== undefined) &&
      Array.from({ length: NEWCOMERS }, (_, i) =>
        ingress(api.find("v1", "Service", `new-${i}`, "apps") as Obj),
      ).every((x) => x.length === 1),
    "every Service has passlb's condition and every newcomer an address",
    15_000,
  );
  await c.loop.idle();
  watching = false;
  await watcher;

  assert.deepEqual(changed, [], "no address changed at any moment");
  for (const [key, ips] of originals) {
    const [ns, name] = key.split("/") as [string, string];
    const o = api.find("v1", "Service", name, ns) as Obj;
    assert.deepEqual(ingress(o), ips, `${key} kept its address`);
    assert.ok(
      o.status.loadBalancer.ingress.every((i: Obj) => i.ipMode === "VIP"),
      `${key}: ipMode VIP`,
    );
  }
  const held = new Set([...originals.values()].flat());
  const given = Array.from(
    { length: NEWCOMERS },
    (_, i) => ingress(api.find("v1", "Service", `new-${i}`, "apps") as Obj)[0]!,
  );
  assert.equal(new Set(given).size, NEWCOMERS, "the newcomers got distinct addresses");
  for (const ip of given) {
    assert.ok(!held.has(ip), `${ip} was a holder's`);
    assert.notEqual(ip, "198.51.100.176", "the foreign Service's address is never handed out");
  }
  const foreign = api.find("v1", "Service", "foreign", "apps") as Obj;
  assert.equal(condition(foreign), undefined, "another class is never touched");
  assert.deepEqual(ingress(foreign), ["198.51.100.176"]);

  const refused = condition(api.find("v1", "Service", "conflict", "apps") as Obj);
  assert.equal(refused?.status, "False");
  assert.equal(refused?.reason, "ConflictingIpRequest");
  const core = api.kubeConfig("admin").makeApiClient(CoreV1Api);
  const events = (await core.listNamespacedEvent({ namespace: "apps" })).items;
  const conflictEvent = events.find(
    (e) => e.involvedObject.name === "conflict" && e.reason === "ConflictingIpRequest",
  );
  assert.equal(conflictEvent?.type, "Warning");
  assert.match(
    conflictEvent?.message ?? "",
    /metallb\.io\/loadBalancerIPs asks for 198\.51\.100\.190, spec\.loadBalancerIP asks for 198\.51\.100\.191/,
  );
  const deprecated = events.find(
    (e) => e.involvedObject.name === "app-1" && e.reason === "DeprecatedAnnotation",
  );
  assert.equal(deprecated?.type, "Normal");
  assert.match(deprecated?.message ?? "", /passlb reads it as metallb\.io\/address-pool/);
});

test("passlb import --kubeconfig reads the live cluster: resources it does not serve are skipped, the report is the same as from files", async (t) => {
  const api = new FakeApiServer();
  await api.start();
  const dir = mkdtempSync(join(tmpdir(), "passlb-compat-import-"));
  t.after(async () => {
    rmSync(dir, { recursive: true, force: true });
    await api.close();
  });
  const kubeconfig = join(dir, "kubeconfig");
  // the user running the import reads with their own (here: admin) credentials
  writeFileSync(kubeconfig, api.kubeconfigYaml("admin"));
  const read = await readManifests(["examples/migrate/metallb-l2"], async () => "");
  const imported = importObjects(read.documents);
  // the pools already applied (step 1 of the cut-over) and the example's Services
  for (const p of imported.pools) api.put({ ...p, metadata: { ...p.metadata } });
  for (const d of read.documents) if ((d.value as Obj).kind === "Service") api.put(d.value as Obj);
  const run = await runCli(["import", "--kubeconfig", kubeconfig]);
  assert.equal(run.exitCode, 0, run.stderr);
  assert.equal(run.stdout, "", "no foreign pools in this cluster: nothing to print");
  assert.match(run.stderr, /6 addresses kept, 0 cannot be kept/);
  assert.match(run.stderr, /dns\/pihole-udp: passlb, with --default-class\n {4}keeps 203\.0\.113\.2/);
  const files = await runCli(["import", "-f", "examples/migrate/metallb-l2"]);
  const services = (text: string) =>
    text.slice(text.indexOf("Services ("), text.indexOf("Foreign controllers"));
  assert.equal(services(run.stderr), services(files.stderr), "the same per-Service report");
});
