/**
 * Adapter for `--manage-endpointslices`: applies passlbSliceWrites (passlb-slices.ts) to the
 * API server while this replica leads — creates (generateName), replaces with the
 * resourceVersion read (a 409 leaves the slice to the next pass), deletes. Passes run on a
 * CoalescingRunner (cluster/coalescing-runner.ts): one at a time; a failed pass is retried
 * after `retryMs`, and every read of the source runs one at once.
 * Like Kubernetes' controller, it keeps expectations: after writing, it waits until the
 * source shows them (or 10 s pass) before deciding again, so a read that arrives before the
 * watch delivers the new slices never creates them twice.
 */
import { DiscoveryV1Api, type KubeConfig, type V1EndpointSlice } from "@kubernetes/client-node";
import { CoalescingRunner, type RunOutcome } from "../cluster/coalescing-runner.ts";
import type { KubeApiCallSink } from "../cluster/kube-api-health.ts";
import type { Clock } from "../health/clock.ts";
import type { Snapshot } from "../k8s/snapshot.ts";
import { apiError } from "./kube-controller-api.ts";
import { passlbSliceWrites } from "./passlb-slices.ts";

export interface SliceSyncOptions {
  readonly kubeConfig: KubeConfig;
  readonly defaultClass: boolean;
  readonly acceptClasses?: readonly string[];
  readonly isLeader: () => boolean;
  readonly snapshot: () => Snapshot | undefined;
  readonly clock: Clock;
  readonly retryMs?: number;
  /** told of every write's outcome (the `endpointslices` channel) */
  readonly calls?: KubeApiCallSink;
  readonly onError?: (what: string, error: Error) => void;
  readonly onWrites?: (n: number) => void;
}

export class SliceSync {
  readonly #o: SliceSyncOptions;
  readonly #api: DiscoveryV1Api;
  readonly #passes: CoalescingRunner;
  /** what the last writes should look like in the source, and until when to wait for it */
  #expect:
    | { created: Set<string>; changed: Map<string, string | undefined>; gone: Set<string>; untilMs: number }
    | undefined;

  constructor(o: SliceSyncOptions) {
    this.#o = o;
    this.#api = o.kubeConfig.makeApiClient(DiscoveryV1Api);
    const retryMs = o.retryMs ?? 1000;
    // a pass now replaces a pending retry; the retry does not grow
    this.#passes = new CoalescingRunner(() => this.#pass(), {
      clock: o.clock,
      backoff: { initialMs: retryMs, maxMs: retryMs },
    });
  }

  notify(): void {
    this.#passes.run();
  }

  stop(): Promise<void> {
    return this.#passes.stop();
  }

  async #pass(): Promise<RunOutcome> {
    const snapshot = this.#o.snapshot();
    if (!snapshot || !this.#o.isLeader()) return undefined;
    if (this.#expect && this.#o.clock.now() < this.#expect.untilMs) {
      const e = this.#expect;
      const seen = new Map(snapshot.endpointSlices.map((x) => [key(x), x.metadata.resourceVersion]));
      const met =
        [...e.created].every((k) => seen.has(k)) &&
        [...e.changed].every(([k, rv]) => !seen.has(k) || seen.get(k) !== rv) &&
        [...e.gone].every((k) => !seen.has(k));
      // the next read brings them; if none comes before the wait runs out, decide again then
      if (!met) return { kind: "ok", againInMs: Math.max(0, e.untilMs - this.#o.clock.now()) };
    }
    this.#expect = undefined;
    const expect = {
      created: new Set<string>(),
      changed: new Map<string, string | undefined>(),
      gone: new Set<string>(),
      untilMs: this.#o.clock.now() + 10_000,
    };
    let failed = false;
    let writes = 0;
    for (const w of passlbSliceWrites(snapshot, this.#o.defaultClass, this.#o.acceptClasses)) {
      const calls: [string, () => Promise<unknown>][] = [
        ...w.create.map((s): [string, () => Promise<unknown>] => [
          `create EndpointSlice for ${w.service}`,
          () =>
            this.#api.createNamespacedEndpointSlice({
              namespace: s.metadata.namespace ?? "default",
              body: s as unknown as V1EndpointSlice,
            }),
        ]),
        ...w.update.map((s): [string, () => Promise<unknown>] => [
          `update EndpointSlice ${s.metadata.namespace}/${s.metadata.name}`,
          () =>
            this.#api.replaceNamespacedEndpointSlice({
              name: s.metadata.name ?? "",
              namespace: s.metadata.namespace ?? "default",
              body: s as unknown as V1EndpointSlice,
            }),
        ]),
        ...w.delete.map((s): [string, () => Promise<unknown>] => [
          `delete EndpointSlice ${s.metadata.namespace}/${s.metadata.name}`,
          () =>
            this.#api.deleteNamespacedEndpointSlice({
              name: s.metadata.name ?? "",
              namespace: s.metadata.namespace ?? "default",
            }),
        ]),
      ];
      for (const s of w.update) expect.changed.set(key(s), s.metadata.resourceVersion);
      for (const s of w.delete) expect.gone.add(key(s));
      for (const [what, call] of calls) {
        if (!this.#o.isLeader()) return undefined;
        try {
          const result = (await call()) as { metadata?: { name?: string; namespace?: string } } | undefined;
          writes++;
          this.#o.calls?.ok("endpointslices");
          if (what.startsWith("create") && result?.metadata?.name)
            expect.created.add(`${result.metadata.namespace ?? "default"}/${result.metadata.name}`);
        } catch (e) {
          const err = apiError(e, what);
          this.#o.calls?.failed(
            "endpointslices",
            { verb: what.split(" ")[0] ?? "", resource: "endpointslices" },
            err,
          );
          if (err.code === "api_not_found") continue;
          failed = true;
          this.#o.onError?.(what, err);
        }
      }
    }
    if (writes > 0) {
      this.#expect = expect;
      this.#o.onWrites?.(writes);
    }
    return failed ? { kind: "retry" } : undefined;
  }
}

const key = (s: { metadata: { namespace?: string | undefined; name?: string | undefined } }) =>
  `${s.metadata.namespace ?? "default"}/${s.metadata.name ?? ""}`;
