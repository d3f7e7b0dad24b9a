/**
 * Adapter: the API calls `passlb controller` makes, through @kubernetes/client-node 1.x,
 * behind two narrow interfaces the loop and the elector use (ControllerApi, LeaseApi).
 * Every write carries the resourceVersion it was computed from, so a stale write is a 409
 * (`api_conflict`) rather than a lost update. Objects come back decoded by passlb's zod
 * schemas; client-node's Date fields are turned back into their JSON strings first.
 *
 * Times on the wire are the server's own forms: MicroTime (Lease acquireTime/renewTime)
 * with six fractional digits through client-node's V1MicroTime; Time (Event timestamps,
 * condition lastTransitionTime, anything read back and written again) to the second through
 * KubeTime and `plain` (kube-wire-times.test.ts checks the bytes sent).
 *
 * Errors: one PasslbError per failure — `api_conflict` (409), `api_not_found` (404),
 * `api_request_failed` (other 4xx), `api_unreachable` (no answer, 429, 5xx). Deliberately not
 * here: retries and backoff (the loop owns them).
 */
import {
  ApiException,
  CoordinationV1Api,
  CoreV1Api,
  type CoreV1Event,
  CustomObjectsApi,
  type KubeConfig,
  type V1Lease,
  V1MicroTime,
  type V1Service,
} from "@kubernetes/client-node";
import { PasslbError } from "../errors.ts";
import {
  type LoadBalancerIPPool,
  LoadBalancerIPPoolSchema,
  POOL_GROUP,
  POOL_PLURAL,
  POOL_VERSION,
} from "../k8s/load-balancer-ip-pool.ts";
import { type Service, ServiceSchema } from "../k8s/objects.ts";
import type { ControllerEvent } from "./controller-events.ts";
import type { LeaseSpec } from "./leader-election.ts";

export interface ControllerApi {
  readService(namespace: string, name: string): Promise<Service | undefined>;
  /** PUT the object (metadata changes: finalizers) */
  replaceService(svc: Service): Promise<Service>;
  /** PUT the status subresource */
  replaceServiceStatus(svc: Service): Promise<Service>;
  readPool(name: string): Promise<LoadBalancerIPPool | undefined>;
  replacePoolStatus(pool: LoadBalancerIPPool): Promise<LoadBalancerIPPool>;
  recordEvent(event: ControllerEvent, nowMs: number): Promise<void>;
}

export interface LeaseRecord {
  readonly spec: LeaseSpec;
  readonly resourceVersion: string;
}

export interface LeaseApi {
  read(): Promise<LeaseRecord | undefined>;
  create(spec: LeaseSpec): Promise<LeaseRecord>;
  replace(spec: LeaseSpec, resourceVersion: string): Promise<LeaseRecord>;
}

/** The stable error for a failed call. */
export function apiError(e: unknown, what: string): PasslbError {
  if (e instanceof PasslbError) return e;
  if (e instanceof ApiException) {
    const code = e.code;
    const details = { status: code };
    const message = `${what}: HTTP ${code}${statusMessage(e.body)}`;
    if (code === 409) return new PasslbError("api_conflict", message, { cause: e, details });
    if (code === 404) return new PasslbError("api_not_found", message, { cause: e, details });
    if (code >= 400 && code < 500 && code !== 429)
      return new PasslbError("api_request_failed", message, { cause: e, details });
    return new PasslbError("api_unreachable", message, { cause: e, details });
  }
  return new PasslbError("api_unreachable", `${what}: ${(e as Error)?.message ?? String(e)}`, { cause: e });
}

function statusMessage(body: unknown): string {
  try {
    const parsed = typeof body === "string" ? JSON.parse(body) : body;
    const m = (parsed as { message?: unknown })?.message;
    return typeof m === "string" ? `: ${m}` : "";
  } catch {
    return "";
  }
}

/**
 * metav1.Time on the wire: RFC 3339 to the second (apimachinery pkg/apis/meta/v1/time.go,
 * MarshalJSON: `t.UTC().Format(time.RFC3339)`). A plain Date would serialise milliseconds,
 * which kube-apiserver happens to accept on input (Go's time.Parse takes a fraction the
 * layout lacks) but never sends; passlb writes what the server writes. The counterpart of
 * client-node's V1MicroTime (six digits, micro_time.go RFC3339Micro).
 */
export class KubeTime extends Date {
  override toISOString(): string {
    return `${super.toISOString().slice(0, 19)}Z`;
  }
}

/**
 * client-node model objects back to plain JSON: the generated deserialiser turns every
 * metav1.Time into a Date (and leaves MicroTime fields as the server's strings); such a
 * Date goes back as the server sent it, to the second, not as toISOString's milliseconds.
 */
export function plain(o: unknown): unknown {
  return JSON.parse(
    JSON.stringify(o, function (this: Record<string, unknown>, key, value: unknown) {
      const raw = this[key];
      return raw instanceof Date && !(raw instanceof V1MicroTime)
        ? new KubeTime(raw.getTime()).toISOString()
        : value;
    }),
  );
}

/** The core/v1 Event the controller creates for `event` (Time fields to the second). */
export function eventBody(
  event: ControllerEvent,
  nowMs: number,
  identity: { component: string; instance: string },
): CoreV1Event {
  const t = event.target;
  const namespace = t.namespace ?? "default";
  const time = new KubeTime(nowMs);
  return {
    metadata: { generateName: `${t.name}.`, namespace },
    involvedObject: {
      apiVersion: t.apiVersion,
      kind: t.kind,
      name: t.name,
      ...(t.namespace === undefined ? {} : { namespace: t.namespace }),
      ...(t.uid === undefined ? {} : { uid: t.uid }),
    },
    reason: event.reason,
    message: event.message.slice(0, 1024),
    type: event.type,
    count: 1,
    firstTimestamp: time,
    lastTimestamp: time,
    source: { component: identity.component },
    reportingComponent: identity.component,
    reportingInstance: identity.instance,
  };
}

function decodeService(o: unknown): Service {
  return ServiceSchema.parse({ apiVersion: "v1", kind: "Service", ...(plain(o) as object) });
}

function decodePool(o: unknown): LoadBalancerIPPool {
  return LoadBalancerIPPoolSchema.parse(plain(o));
}

async function call<T>(what: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (e) {
    throw apiError(e, what);
  }
}

export class KubeControllerApi implements ControllerApi {
  readonly #core: CoreV1Api;
  readonly #custom: CustomObjectsApi;
  readonly #component: string;
  readonly #instance: string;

  constructor(kc: KubeConfig, identity: { component: string; instance: string }) {
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#custom = kc.makeApiClient(CustomObjectsApi);
    this.#component = identity.component;
    this.#instance = identity.instance;
  }

  async readService(namespace: string, name: string): Promise<Service | undefined> {
    try {
      return decodeService(await this.#core.readNamespacedService({ name, namespace }));
    } catch (e) {
      const err = apiError(e, `read Service ${namespace}/${name}`);
      if (err.code === "api_not_found") return undefined;
      throw err;
    }
  }

  async replaceService(svc: Service): Promise<Service> {
    const { name = "", namespace = "default" } = svc.metadata;
    return call(`update Service ${namespace}/${name}`, async () =>
      decodeService(
        await this.#core.replaceNamespacedService({ name, namespace, body: svc as unknown as V1Service }),
      ),
    );
  }

  async replaceServiceStatus(svc: Service): Promise<Service> {
    const { name = "", namespace = "default" } = svc.metadata;
    return call(`update status of Service ${namespace}/${name}`, async () =>
      decodeService(
        await this.#core.replaceNamespacedServiceStatus({
          name,
          namespace,
          body: svc as unknown as V1Service,
        }),
      ),
    );
  }

  async readPool(name: string): Promise<LoadBalancerIPPool | undefined> {
    try {
      return decodePool(
        await this.#custom.getClusterCustomObject({
          group: POOL_GROUP,
          version: POOL_VERSION,
          plural: POOL_PLURAL,
          name,
        }),
      );
    } catch (e) {
      const err = apiError(e, `read LoadBalancerIPPool ${name}`);
      if (err.code === "api_not_found") return undefined;
      throw err;
    }
  }

  async replacePoolStatus(pool: LoadBalancerIPPool): Promise<LoadBalancerIPPool> {
    const name = pool.metadata.name ?? "";
    return call(`update status of LoadBalancerIPPool ${name}`, async () =>
      decodePool(
        await this.#custom.replaceClusterCustomObjectStatus({
          group: POOL_GROUP,
          version: POOL_VERSION,
          plural: POOL_PLURAL,
          name,
          body: pool,
        }),
      ),
    );
  }

  async recordEvent(event: ControllerEvent, nowMs: number): Promise<void> {
    const t = event.target;
    const body = eventBody(event, nowMs, { component: this.#component, instance: this.#instance });
    await call(`record Event ${event.reason} on ${t.kind} ${t.name}`, () =>
      this.#core.createNamespacedEvent({ namespace: t.namespace ?? "default", body }),
    );
  }
}

const leaseRecord = (l: V1Lease): LeaseRecord => {
  const s = (plain(l.spec ?? {}) ?? {}) as LeaseSpec;
  return { spec: s, resourceVersion: l.metadata?.resourceVersion ?? "" };
};

export const leaseSpec = (s: LeaseSpec): NonNullable<V1Lease["spec"]> => ({
  ...(s.holderIdentity == null ? {} : { holderIdentity: s.holderIdentity }),
  ...(s.leaseDurationSeconds == null ? {} : { leaseDurationSeconds: s.leaseDurationSeconds }),
  // MicroTime on the wire: RFC 3339 with exactly six fractional digits (apimachinery
  // pkg/apis/meta/v1/micro_time.go, RFC3339Micro); a plain Date serialises milliseconds,
  // which kube-apiserver refuses with 400. client-node's V1MicroTime writes six digits.
  ...(s.acquireTime == null ? {} : { acquireTime: new V1MicroTime(s.acquireTime) }),
  ...(s.renewTime == null ? {} : { renewTime: new V1MicroTime(s.renewTime) }),
  ...(s.leaseTransitions == null ? {} : { leaseTransitions: s.leaseTransitions }),
});

/** The coordination.k8s.io/v1 Lease `name` in `namespace`. */
export class KubeLeaseApi implements LeaseApi {
  readonly #api: CoordinationV1Api;
  readonly #name: string;
  readonly #namespace: string;

  constructor(kc: KubeConfig, namespace: string, name: string) {
    this.#api = kc.makeApiClient(CoordinationV1Api);
    this.#namespace = namespace;
    this.#name = name;
  }

  async read(): Promise<LeaseRecord | undefined> {
    try {
      return leaseRecord(
        await this.#api.readNamespacedLease({ name: this.#name, namespace: this.#namespace }),
      );
    } catch (e) {
      const err = apiError(e, `read Lease ${this.#namespace}/${this.#name}`);
      if (err.code === "api_not_found") return undefined;
      throw err;
    }
  }

  async create(spec: LeaseSpec): Promise<LeaseRecord> {
    return call(`create Lease ${this.#namespace}/${this.#name}`, async () =>
      leaseRecord(
        await this.#api.createNamespacedLease({
          namespace: this.#namespace,
          body: { metadata: { name: this.#name, namespace: this.#namespace }, spec: leaseSpec(spec) },
        }),
      ),
    );
  }

  async replace(spec: LeaseSpec, resourceVersion: string): Promise<LeaseRecord> {
    return call(`update Lease ${this.#namespace}/${this.#name}`, async () =>
      leaseRecord(
        await this.#api.replaceNamespacedLease({
          name: this.#name,
          namespace: this.#namespace,
          body: {
            metadata: { name: this.#name, namespace: this.#namespace, resourceVersion },
            spec: leaseSpec(spec),
          },
        }),
      ),
    );
  }
}
