import assert from "node:assert/strict";
import { test } from "node:test";
import { PasslbError } from "../errors.ts";
import { FakeClock } from "../health/clock.ts";
import type { LoadBalancerIPPool } from "../k8s/load-balancer-ip-pool.ts";
import type { Service } from "../k8s/objects.ts";
import type { ControllerEvent } from "./controller-events.ts";
import { ControllerLoop, type ControllerView } from "./controller-loop.ts";
import type { ControllerApi } from "./kube-controller-api.ts";

const pool: LoadBalancerIPPool = {
  apiVersion: "passlb.io/v1alpha1",
  kind: "LoadBalancerIPPool",
  metadata: { name: "p", resourceVersion: "1" },
  spec: { addresses: ["203.0.113.10-203.0.113.19"], autoAssign: true, avoidBuggyIPs: false, disabled: false },
};

const service = (name: string, rv = "1"): Service => ({
  apiVersion: "v1",
  kind: "Service",
  metadata: { name, namespace: "default", resourceVersion: rv, generation: 1 },
  spec: { type: "LoadBalancer", loadBalancerClass: "passlb.io/l4", ports: [{ port: 80, protocol: "TCP" }] },
});

/** An API server in memory: resourceVersions, 409 on a stale one, a call log. */
class MemoryApi implements ControllerApi {
  readonly services = new Map<string, Service>();
  readonly calls: string[] = [];
  readonly events: ControllerEvent[] = [];
  #rv = 100;
  beforeWrite: (what: string) => void = () => {};

  put(svc: Service): void {
    this.services.set(svc.metadata.name ?? "", structuredClone(svc));
  }
  #write(svc: Service, what: string, part: "meta" | "status"): Service {
    this.beforeWrite(what);
    this.calls.push(what);
    const stored = this.services.get(svc.metadata.name ?? "");
    if (!stored) throw new PasslbError("api_not_found", "gone");
    if (stored.metadata.resourceVersion !== svc.metadata.resourceVersion)
      throw new PasslbError("api_conflict", "stale");
    const next: Service =
      part === "status"
        ? { ...stored, status: structuredClone(svc.status) }
        : { ...structuredClone(svc), status: stored.status };
    next.metadata = { ...next.metadata, resourceVersion: String(++this.#rv) };
    this.services.set(svc.metadata.name ?? "", next);
    return structuredClone(next);
  }
  async readService(_ns: string, name: string) {
    this.calls.push(`get ${name}`);
    const s = this.services.get(name);
    return s && structuredClone(s);
  }
  async replaceService(svc: Service) {
    return this.#write(svc, `update ${svc.metadata.name}`, "meta");
  }
  async replaceServiceStatus(svc: Service) {
    return this.#write(svc, `status ${svc.metadata.name}`, "status");
  }
  async readPool() {
    return pool;
  }
  async replacePoolStatus(p: LoadBalancerIPPool) {
    this.calls.push("pool status");
    return { ...p, metadata: { ...p.metadata, resourceVersion: String(++this.#rv) } };
  }
  async recordEvent(e: ControllerEvent) {
    this.events.push(e);
  }
}

function loop(api: MemoryApi, view: () => ControllerView, isLeader: () => boolean) {
  return new ControllerLoop({
    api,
    view,
    isLeader,
    options: { defaultClass: false, ipMode: "VIP" },
    clock: new FakeClock(),
  });
}

test("a 409 is read again and the same write applied to the fresh copy", async () => {
  const api = new MemoryApi();
  const seen = service("web", "1");
  api.put({ ...seen, metadata: { ...seen.metadata, resourceVersion: "7", labels: { added: "meanwhile" } } });
  const l = loop(
    api,
    () => ({ services: [seen], pools: [pool] }),
    () => true,
  );
  const outcome = await l.reconcileOnce();
  assert.equal(outcome.kind, "ok");
  assert.deepEqual(api.calls.slice(0, 3), ["update web", "get web", "update web"]);
  const stored = api.services.get("web")!;
  assert.deepEqual(stored.metadata.labels, { added: "meanwhile" }, "the other writer's change is kept");
  assert.deepEqual(stored.metadata.finalizers, ["service.kubernetes.io/load-balancer-cleanup"]);
  assert.deepEqual(stored.status?.loadBalancer?.ingress, [{ ip: "203.0.113.10", ipMode: "VIP" }]);
});

test("a Service whose spec changed under a 409 is left to the next pass", async () => {
  const api = new MemoryApi();
  const seen = service("web", "1");
  api.put({
    ...seen,
    metadata: { ...seen.metadata, resourceVersion: "7" },
    spec: { ...seen.spec, ports: [{ port: 81, protocol: "TCP" }] },
  });
  const l = loop(
    api,
    () => ({ services: [seen], pools: [pool] }),
    () => true,
  );
  const outcome = await l.reconcileOnce();
  assert.equal(outcome.kind, "retry");
  assert.deepEqual(
    api.calls.filter((c) => c.includes("web")),
    ["update web", "get web"],
  );
});

test("losing the lease mid-pass stops the writes at once", async () => {
  const api = new MemoryApi();
  const services = ["a", "b", "c"].map((n) => service(n));
  for (const s of services) api.put(s);
  let leader = true;
  api.beforeWrite = () => {
    if (api.calls.length === 2) leader = false; // the lease is lost after two writes
  };
  const l = loop(
    api,
    () => ({ services, pools: [pool] }),
    () => leader,
  );
  const outcome = await l.reconcileOnce();
  assert.equal(outcome.kind, "ok");
  assert.equal(api.calls.length, 3, "the write in flight completes; nothing after it");
  assert.equal(
    (
      await loop(
        api,
        () => ({ services, pools: [pool] }),
        () => false,
      ).reconcileOnce()
    ).writes,
    0,
    "a follower writes nothing",
  );
});

test("its own writes stand in for the source until the source catches up: no second write", async () => {
  const api = new MemoryApi();
  const stale = service("web", "1");
  api.put(stale);
  const l = loop(
    api,
    () => ({ services: [stale], pools: [pool] }),
    () => true,
  );
  await l.reconcileOnce();
  const writes = api.calls.length;
  const again = await l.reconcileOnce(); // the source still shows resourceVersion 1
  assert.equal(again.writes, 0);
  assert.equal(api.calls.length, writes, "no call at all");
});

test("API unreachable: retry with the cause; the Service in error does not stop the others", async () => {
  const api = new MemoryApi();
  const services = [service("a"), service("b")];
  for (const s of services) api.put(s);
  api.beforeWrite = (what) => {
    if (what.endsWith(" a")) throw new PasslbError("api_unreachable", "connection refused");
  };
  const outcome = await loop(
    api,
    () => ({ services, pools: [pool] }),
    () => true,
  ).reconcileOnce();
  assert.equal(outcome.kind, "retry");
  assert.match(outcome.kind === "retry" ? outcome.cause : "", /default\/a: connection refused/);
  assert.deepEqual(api.services.get("b")?.status?.loadBalancer?.ingress?.length, 1);
});
