/**
 * Loads test/fixtures/kube/*.yaml into a FakeApiServer (test hooks, status included) and
 * builds KubeSnapshotSources against it with short backoffs for the tests, each speaking as
 * one of deploy/'s ServiceAccounts (so RBAC is the shipped one).
 */
import { readFileSync } from "node:fs";
import { parseAllDocuments } from "yaml";
import { KubeSnapshotSource, type KubeSourceOptions } from "../../src/cluster/kube-source.ts";
import { clientNodeTransport } from "../../src/cluster/kube-transport.ts";
import { realClock } from "../../src/health/clock.ts";
import { FakeApiServer, type FakeIdentity } from "../support/fake-api-server.ts";

export function fixtureObjects(name: string): Record<string, unknown>[] {
  const text = readFileSync(new URL(`../fixtures/kube/${name}`, import.meta.url), "utf8");
  return parseAllDocuments(text).map((d) => d.toJS() as Record<string, unknown>);
}

export async function fakeCluster(fixture = "cluster.yaml"): Promise<FakeApiServer> {
  const api = new FakeApiServer();
  await api.start();
  for (const o of fixtureObjects(fixture)) api.put(o);
  return api;
}

/** A cluster source speaking as `as` (default: passlb lb's ServiceAccount, which reads no Pods or pools). */
export function kubeSource(
  api: FakeApiServer,
  extra: Partial<KubeSourceOptions> = {},
  as: FakeIdentity = "lb",
): KubeSnapshotSource {
  return new KubeSnapshotSource({
    transport: clientNodeTransport(api.kubeConfig(as)),
    clock: realClock(),
    random: Math.random,
    backoff: { initialMs: 20, maxMs: 200 },
    debounce: { quietMs: 30, maxMs: 300 },
    ...extra,
  });
}

export async function eventually(
  cond: () => boolean | Promise<boolean>,
  what: string,
  ms = 5000,
): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
