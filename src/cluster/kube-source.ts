/**
 * Adapter: the Kubernetes API server as a live SnapshotSource (issue #8 §1). One
 * ResourceReflector (list + watch, kube-watch.ts) per resource — Services,
 * EndpointSlices, Nodes, Namespaces; Pods only when asked (a consumer that computes
 * EndpointSlices itself), LoadBalancerIPPools when asked (their pools join config.pools),
 * LoadBalancerBGPPeers when asked (`passlb lb --announce bgp`: the `bgpPeers` of the last read).
 * Each lists in pages of `pageSize` items (500 by default; kube-list-pager.ts).
 *
 * - Level-triggered and debounced: any change asks a CoalescingRunner for a read (100 ms
 *   quiet, 1 s at most by default; coalescing-runner.ts), which builds the whole Snapshot and hands it to `onRead`; a burst of
 *   a thousand updates is a handful of reads. `onChange` fires at once for every change.
 * - The first read waits until every resource has been listed once.
 * - Decoded at the boundary by our schemas (k8s/decode.ts, one object at a time): an
 *   object that fails is left out and reported (`Service ns/name: field: message`) in the
 *   read's `problems`; the others are unaffected. So is an object of another kind than
 *   its collection serves, and every list item or watch event the reflector could not
 *   store (`Service list item 3: metadata.name is a number, not a string; left out`).
 * - Unchanged objects keep their decoded identity and unchanged kinds their array, so the
 *   planner's memo (object identity) re-plans only what changed.
 * - API server away: the reflectors back off and retry; no read is produced, so the
 *   consumer keeps its last snapshot; when they are back the next read is the new truth.
 *
 * Deliberately not: Endpoints (passlb reads EndpointSlices; the snapshot's endpoints stay
 * empty), writing anything, namespace or label filtering.
 */

import type { SecretRead } from "../announce/bgp/bgp-peer-config.ts";
import type { Clock } from "../health/clock.ts";
import { decodeDocuments, formatPath, type InputProblem } from "../k8s/decode.ts";
import {
  BGP_ADVERTISEMENT_API_VERSION,
  BGP_ADVERTISEMENT_KIND,
  BGP_ADVERTISEMENT_PLURAL,
  decodeBgpAdvertisement,
  type LoadBalancerBGPAdvertisement,
} from "../k8s/load-balancer-bgp-advertisement.ts";
import {
  BGP_PEER_API_VERSION,
  BGP_PEER_KIND,
  BGP_PEER_PLURAL,
  decodeBgpPeer,
  formatBgpPeerProblem,
  type LoadBalancerBGPPeer,
} from "../k8s/load-balancer-bgp-peer.ts";
import {
  type LoadBalancerIPPool,
  LoadBalancerIPPoolSchema,
  orderPools,
  POOL_API_VERSION,
  POOL_KIND,
  poolOf,
} from "../k8s/load-balancer-ip-pool.ts";
import type { PasslbConfigSpec } from "../k8s/objects.ts";
import { DEFAULT_CONFIG, type Snapshot } from "../k8s/snapshot.ts";
import { CoalescingRunner } from "./coalescing-runner.ts";
import type { KubeTransport } from "./kube-transport.ts";
import {
  type BackoffOptions,
  type RawObject,
  ResourceReflector,
  type RestartReason,
  type WatchState,
} from "./kube-watch.ts";
import { readPasswordSecrets } from "./password-secrets.ts";
import type { SnapshotSource, SourceHandlers, SourceRead } from "./snapshot-source.ts";

export type KubeResourceName =
  | "services"
  | "endpointslices"
  | "nodes"
  | "namespaces"
  | "pods"
  | "loadbalancerippools"
  | "loadbalancerbgppeers"
  | "loadbalancerbgpadvertisements";

interface ResourceInfo {
  readonly path: string;
  readonly kind: string;
  readonly apiVersion: string;
  readonly snapshotField?: "services" | "endpointSlices" | "nodes" | "namespaces" | "pods";
}

export const KUBE_RESOURCES: Readonly<Record<KubeResourceName, ResourceInfo>> = {
  services: { path: "/api/v1/services", kind: "Service", apiVersion: "v1", snapshotField: "services" },
  endpointslices: {
    path: "/apis/discovery.k8s.io/v1/endpointslices",
    kind: "EndpointSlice",
    apiVersion: "discovery.k8s.io/v1",
    snapshotField: "endpointSlices",
  },
  nodes: { path: "/api/v1/nodes", kind: "Node", apiVersion: "v1", snapshotField: "nodes" },
  namespaces: {
    path: "/api/v1/namespaces",
    kind: "Namespace",
    apiVersion: "v1",
    snapshotField: "namespaces",
  },
  pods: { path: "/api/v1/pods", kind: "Pod", apiVersion: "v1", snapshotField: "pods" },
  loadbalancerippools: {
    path: `/apis/${POOL_API_VERSION}/loadbalancerippools`,
    kind: POOL_KIND,
    apiVersion: POOL_API_VERSION,
  },
  loadbalancerbgppeers: {
    path: `/apis/${BGP_PEER_API_VERSION}/${BGP_PEER_PLURAL}`,
    kind: BGP_PEER_KIND,
    apiVersion: BGP_PEER_API_VERSION,
  },
  loadbalancerbgpadvertisements: {
    path: `/apis/${BGP_ADVERTISEMENT_API_VERSION}/${BGP_ADVERTISEMENT_PLURAL}`,
    kind: BGP_ADVERTISEMENT_KIND,
    apiVersion: BGP_ADVERTISEMENT_API_VERSION,
  },
};

/** A read waits until changes have been quiet for `quietMs`, at most `maxMs` after the first. */
export interface DebounceOptions {
  readonly quietMs: number;
  readonly maxMs: number;
}

export const DEFAULT_DEBOUNCE: DebounceOptions = { quietMs: 100, maxMs: 1000 };

export interface KubeSourceOptions {
  readonly transport: KubeTransport;
  readonly clock: Clock;
  /** in [0, 1): backoff and watch-timeout jitter */
  readonly random: () => number;
  /** also watch Pods (only when passlb computes EndpointSlices itself) */
  readonly pods?: boolean;
  /** also watch LoadBalancerIPPools; their pools follow config.pools in the snapshot */
  readonly pools?: boolean;
  /** also watch LoadBalancerBGPPeers, LoadBalancerBGPAdvertisements and (for the
   * advertisements' pool selection only, not for address management) LoadBalancerIPPools:
   * the routers of `--announce bgp` and what each is told */
  readonly bgpPeers?: boolean;
  /** with bgpPeers: passlb's namespace, the only one passwordSecret Secrets are read from */
  readonly secretNamespace?: string;
  /** the configuration the snapshot carries (defaultClass, zones, limits); DEFAULT_CONFIG otherwise */
  readonly config?: PasslbConfigSpec;
  readonly debounce?: DebounceOptions;
  readonly backoff?: BackoffOptions;
  readonly minWatchTimeoutSeconds?: number;
  /** items per list request (default 500); 0 lists each resource in one request */
  readonly pageSize?: number;
  readonly onRestart?: (
    resource: KubeResourceName,
    reason: RestartReason,
    detail: string,
    delayMs: number,
    status?: number,
  ) => void;
  readonly onState?: (resource: KubeResourceName, state: WatchState, detail: string) => void;
}

interface Decoded {
  readonly raw: RawObject;
  readonly object: unknown;
  readonly problems: readonly string[];
}

interface KindCache {
  version: number;
  byKey: Map<string, Decoded>;
  objects: readonly unknown[];
}

export class KubeSnapshotSource implements SnapshotSource {
  readonly #o: KubeSourceOptions;
  readonly #reflectors = new Map<KubeResourceName, ResourceReflector>();
  readonly #caches = new Map<KubeResourceName, KindCache>();
  readonly #reader: CoalescingRunner;
  #handlers: SourceHandlers | undefined;
  #snapshot: Snapshot | undefined;
  #pools: readonly LoadBalancerIPPool[] = [];
  #poolsKey = "";
  #config: PasslbConfigSpec;
  #reads = 0;
  #secrets: ReadonlyMap<string, SecretRead> = new Map();
  #secretsKey = "";
  #secretsAt = Number.NEGATIVE_INFINITY;
  #secretsBusy = false;
  #firstRead: (() => void) | undefined;
  #closed = false;

  constructor(options: KubeSourceOptions) {
    this.#o = options;
    this.#config = options.config ?? DEFAULT_CONFIG;
    const debounce = options.debounce ?? DEFAULT_DEBOUNCE;
    this.#reader = new CoalescingRunner(
      async () => {
        try {
          await this.#read();
        } catch {
          // the consumer's handler reports its own failures; the next change reads again
        }
      },
      {
        clock: options.clock,
        delayMs: debounce.quietMs,
        maxDelayMs: debounce.maxMs,
        // a read per event-loop turn at most, also without a quiet period (the benchmark's baseline)
        startFromTimer: true,
      },
    );
    const names: KubeResourceName[] = ["services", "endpointslices", "nodes", "namespaces"];
    if (options.pods) names.push("pods");
    if (options.pools || options.bgpPeers) names.push("loadbalancerippools");
    if (options.bgpPeers) names.push("loadbalancerbgppeers", "loadbalancerbgpadvertisements");
    for (const name of names) {
      const info = KUBE_RESOURCES[name];
      this.#reflectors.set(
        name,
        new ResourceReflector({
          resource: name,
          path: info.path,
          kind: info.kind,
          apiVersion: info.apiVersion,
          transport: options.transport,
          clock: options.clock,
          random: options.random,
          ...(options.backoff && { backoff: options.backoff }),
          ...(options.minWatchTimeoutSeconds !== undefined && {
            minWatchTimeoutSeconds: options.minWatchTimeoutSeconds,
          }),
          ...(options.pageSize !== undefined && { pageSize: options.pageSize }),
          onChange: () => this.#changed(),
          onRestart: (reason, detail, delay, status) =>
            options.onRestart?.(name, reason, detail, delay, status),
          onState: (state, detail) => options.onState?.(name, state, detail),
        }),
      );
      this.#caches.set(name, { version: -1, byKey: new Map(), objects: [] });
    }
  }

  /** Starts every list+watch; resolves after the first read was handled (or on close). */
  start(handlers: SourceHandlers): Promise<void> {
    this.#handlers = handlers;
    const first = new Promise<void>((resolve) => {
      this.#firstRead = resolve;
    });
    for (const r of this.#reflectors.values()) r.start();
    return first;
  }

  async close(): Promise<void> {
    this.#closed = true;
    for (const r of this.#reflectors.values()) r.stop();
    await this.#reader.stop();
    this.#firstRead?.();
  }

  /** The last snapshot handed out, if any. */
  get snapshot(): Snapshot | undefined {
    return this.#snapshot;
  }

  /** The decoded LoadBalancerIPPool objects of the last read (with `pools: true`). */
  get ipPools(): readonly LoadBalancerIPPool[] {
    return this.#pools;
  }

  /** The decoded LoadBalancerBGPPeer objects of the last read (with `bgpPeers: true`), by name;
   * an object that failed decoding is left out and named in the read's problems. */
  get bgpPeers(): readonly LoadBalancerBGPPeer[] {
    return (this.#caches.get("loadbalancerbgppeers")?.objects ?? []) as readonly LoadBalancerBGPPeer[];
  }

  /** The decoded LoadBalancerBGPAdvertisement objects of the last read (with `bgpPeers: true`). */
  get bgpAdvertisements(): readonly LoadBalancerBGPAdvertisement[] {
    return (this.#caches.get("loadbalancerbgpadvertisements")?.objects ??
      []) as readonly LoadBalancerBGPAdvertisement[];
  }

  /** The passwordSecret Secrets of the LoadBalancerBGPPeers, by `namespace/name`, as last read. */
  get bgpSecrets(): ReadonlyMap<string, SecretRead> {
    return this.#secrets;
  }

  /** How many reads were handed out (tests count reconciles with it). */
  get reads(): number {
    return this.#reads;
  }

  /** Every resource listed at least once. */
  get synced(): boolean {
    return [...this.#reflectors.values()].every((r) => r.synced);
  }

  /** resource → its watch state, for logs and the dashboard */
  states(): ReadonlyMap<KubeResourceName, WatchState> {
    return new Map([...this.#reflectors].map(([name, r]) => [name, r.state]));
  }

  /** Builds a read now if one is pending (tests; a consumer never needs it). */
  flush(): Promise<void> {
    return this.#reader.flush();
  }

  #changed(): void {
    if (this.#closed) return;
    if (this.synced) this.#handlers?.onChange();
    this.#reader.run();
  }

  async #read(): Promise<void> {
    if (this.#closed || !this.synced || !this.#handlers) return;
    const read = this.#build();
    this.#refreshSecrets();
    this.#reads++;
    try {
      await this.#handlers.onRead(read);
    } finally {
      const first = this.#firstRead;
      this.#firstRead = undefined;
      first?.();
    }
  }

  #build(): SourceRead {
    const problems: string[] = [];
    const fields: Partial<Record<NonNullable<ResourceInfo["snapshotField"]>, readonly unknown[]>> = {};
    for (const [name, reflector] of this.#reflectors) {
      const cache = this.#caches.get(name)!;
      if (cache.version !== reflector.version) this.#refresh(name, reflector, cache);
      for (const d of cache.byKey.values()) problems.push(...d.problems);
      for (const r of reflector.rejects) problems.push(`${KUBE_RESOURCES[name].kind} ${r}`);
      const field = KUBE_RESOURCES[name].snapshotField;
      if (field) fields[field] = cache.objects;
    }
    if (this.#reflectors.has("loadbalancerippools")) {
      // the controller's order (oldest first) and its rule for disabled pools, so an address
      // is attributed to the same pool on every LB host as by the controller
      const pools = orderPools(this.#caches.get("loadbalancerippools")!.objects as LoadBalancerIPPool[]);
      const key = JSON.stringify(pools.map((p) => [p.metadata.name, p.metadata.creationTimestamp, p.spec]));
      if (key !== this.#poolsKey) {
        this.#poolsKey = key;
        this.#pools = pools;
        const base = this.#o.config ?? DEFAULT_CONFIG;
        const usable = pools.filter((p) => !p.spec.disabled).map(poolOf);
        if (this.#o.pools) this.#config = { ...base, pools: [...base.pools, ...usable] };
      }
    }
    const prev = this.#snapshot;
    const pick = <T>(field: NonNullable<ResourceInfo["snapshotField"]>, previous: readonly T[] | undefined) =>
      (fields[field] as readonly T[] | undefined) ?? previous ?? [];
    const snapshot: Snapshot = {
      services: pick("services", prev?.services),
      endpointSlices: pick("endpointSlices", prev?.endpointSlices),
      nodes: pick("nodes", prev?.nodes),
      namespaces: pick("namespaces", prev?.namespaces),
      pods: pick("pods", prev?.pods),
      endpoints: prev?.endpoints ?? [],
      config: this.#config,
    };
    this.#snapshot = snapshot;
    problems.sort();
    return { ok: true, snapshot, notices: [], problems };
  }

  /**
   * Re-reads the peers' passwordSecret Secrets when the names change, and otherwise at most
   * every 30 s with the cluster's reads (password-secrets.ts: each by name, in passlb's
   * namespace only); a changed result is a change of the source, so BIRD follows a rotated key.
   */
  #refreshSecrets(): void {
    if (!this.#o.bgpPeers || this.#secretsBusy || this.#closed) return;
    const ns = this.#o.secretNamespace ?? "passlb-system";
    const keys = [
      ...new Set(
        this.bgpPeers.flatMap((p) =>
          p.spec.passwordSecret
            ? [`${p.spec.passwordSecret.namespace ?? ns}/${p.spec.passwordSecret.name}`]
            : [],
        ),
      ),
    ].sort();
    const key = keys.join(",");
    const now = this.#o.clock.now();
    if (key === this.#secretsKey && now - this.#secretsAt < 30_000) return;
    this.#secretsBusy = true;
    void readPasswordSecrets(this.#o.transport, ns, keys, this.#secrets).then((next) => {
      this.#secretsBusy = false;
      this.#secretsKey = key;
      this.#secretsAt = this.#o.clock.now();
      const same = JSON.stringify([...next]) === JSON.stringify([...this.#secrets]);
      this.#secrets = next;
      if (!same) this.#changed();
    });
  }

  /** Decodes what changed in one resource; unchanged raw objects keep their decoded object. */
  #refresh(name: KubeResourceName, reflector: ResourceReflector, cache: KindCache): void {
    const byKey = new Map<string, Decoded>();
    const keys = [...reflector.objects.keys()].sort();
    const objects: unknown[] = [];
    let same = keys.length === cache.byKey.size;
    for (const key of keys) {
      const raw = reflector.objects.get(key)!;
      const old = cache.byKey.get(key);
      const d = old && old.raw === raw ? old : decodeOne(name, raw);
      if (d !== old) same = false;
      byKey.set(key, d);
      if (d.object !== undefined) objects.push(d.object);
    }
    cache.version = reflector.version;
    cache.byKey = byKey;
    if (!same) cache.objects = objects;
  }
}

function decodeOne(name: KubeResourceName, raw: RawObject): Decoded {
  if (name === "loadbalancerbgpadvertisements") {
    const d = decodeBgpAdvertisement(raw);
    return {
      raw,
      object: d.advertisement,
      problems: d.problems.map((p) => `${p.object}: ${formatPath([...p.path])}: ${p.message}`),
    };
  }
  if (name === "loadbalancerbgppeers") {
    const d = decodeBgpPeer(raw);
    return { raw, object: d.peer, problems: d.problems.map(formatBgpPeerProblem) };
  }
  if (name === "loadbalancerippools") {
    const r = LoadBalancerIPPoolSchema.safeParse(raw);
    if (r.success) return { raw, object: r.data, problems: [] };
    const label = `${POOL_KIND} ${raw.metadata.name}`;
    return {
      raw,
      object: undefined,
      problems: r.error.issues.map((i) => {
        const path = i.path.filter((p): p is string | number => typeof p !== "symbol");
        return `${label}: ${path.length > 0 ? `${formatPath(path)}: ` : ""}${i.message}`;
      }),
    };
  }
  const decoded = decodeDocuments([{ source: "kube-api", index: 1, value: raw }]);
  if (decoded.problems.length > 0)
    return { raw, object: undefined, problems: decoded.problems.map(describe) };
  const field = KUBE_RESOURCES[name].snapshotField!;
  const object = (decoded.snapshot[field] as readonly unknown[])[0];
  if (object === undefined) {
    // the collection answered with another kind (or apiVersion) than it serves: a broken
    // server or proxy; before, such an object vanished without a word
    const info = KUBE_RESOURCES[name];
    const where = raw.metadata.namespace
      ? `${raw.metadata.namespace}/${raw.metadata.name}`
      : raw.metadata.name;
    return {
      raw,
      object: undefined,
      problems: [
        `${info.kind} ${where}: kind: ${JSON.stringify(raw.kind).slice(0, 80)} (apiVersion ${JSON.stringify(raw.apiVersion).slice(0, 80)}) is not a ${info.kind} (${info.apiVersion}); left out`,
      ],
    };
  }
  return { raw, object, problems: [] };
}

function describe(p: InputProblem): string {
  return `${p.object}: ${p.path.length > 0 ? `${formatPath(p.path)}: ` : ""}${p.message}`;
}
