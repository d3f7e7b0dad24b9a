/**
 * The controller's API adapters with every call reported to a KubeApiCallSink
 * (cluster/kube-api-health.ts): same interfaces (ControllerApi, LeaseApi), same results and
 * errors, so the loop and the elector do not know they are watched.
 *
 * Writes report success and failure; reads (a re-read after a 409, the Lease read before
 * each election step) report only failures — a read that works says nothing about the write
 * that follows. The Lease channel's successes come from the elector (an attempt that ended
 * in a renewal, a takeover or a wait for a live holder: controller-runtime.ts).
 */
import type { KubeApiCallSink, KubeApiChannel } from "../cluster/kube-api-health.ts";
import type { ControllerApi, LeaseApi } from "./kube-controller-api.ts";

async function observe<T>(
  sink: KubeApiCallSink,
  channel: KubeApiChannel,
  verb: string,
  resource: string,
  reportOk: boolean,
  run: () => Promise<T>,
): Promise<T> {
  let result: T;
  try {
    result = await run();
  } catch (e) {
    sink.failed(channel, { verb, resource }, e);
    throw e;
  }
  if (reportOk) sink.ok(channel);
  return result;
}

export function observedControllerApi(api: ControllerApi, sink: KubeApiCallSink): ControllerApi {
  return {
    readService: (namespace, name) =>
      observe(sink, "service_writes", "get", "services", false, () => api.readService(namespace, name)),
    replaceService: (svc) =>
      observe(sink, "service_writes", "update", "services", true, () => api.replaceService(svc)),
    replaceServiceStatus: (svc) =>
      observe(sink, "service_writes", "update", "services/status", true, () => api.replaceServiceStatus(svc)),
    readPool: (name) =>
      observe(sink, "pool_status", "get", "loadbalancerippools", false, () => api.readPool(name)),
    replacePoolStatus: (pool) =>
      observe(sink, "pool_status", "update", "loadbalancerippools/status", true, () =>
        api.replacePoolStatus(pool),
      ),
    recordEvent: (event, nowMs) =>
      observe(sink, "events", "create", "events", true, () => api.recordEvent(event, nowMs)),
  };
}

export function observedLeaseApi(api: LeaseApi, sink: KubeApiCallSink): LeaseApi {
  return {
    read: () => observe(sink, "lease", "get", "leases", false, () => api.read()),
    create: (spec) => observe(sink, "lease", "create", "leases", false, () => api.create(spec)),
    replace: (spec, rv) => observe(sink, "lease", "update", "leases", false, () => api.replace(spec, rv)),
  };
}
