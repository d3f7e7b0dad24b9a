/**
 * `passlb lb --in-cluster`: Events on Services for what an LB host sees and the controller
 * cannot (the wire checks of lb-wire.ts: `DuplicateAnswer`, `ForeignMac`, `NoAnswer`,
 * `BgpNotExported`, `BgpUnexpectedExport`, `WireOk`). The same core/v1 Event body as the
 * controller's (controller/kube-controller-api.ts `eventBody`), reported by component
 * `passlb-lb` with this host as the instance, so `kubectl describe service` shows which LB
 * host saw it. A refused or failed write is logged, never retried in a loop: the finding is
 * in the log, the metrics and the dashboard anyway. deploy/rbac-lb.yaml grants `create`
 * on events for this.
 */
import { CoreV1Api, type KubeConfig } from "@kubernetes/client-node";
import { reasonFromCode } from "../controller/conditions.ts";
import { eventBody } from "../controller/kube-controller-api.ts";

export type ServiceEventRecorder = (
  services: readonly string[],
  type: "Normal" | "Warning",
  reason: string,
  message: string,
) => void;

export function serviceEventRecorder(
  config: KubeConfig,
  host: string,
  onError: (message: string) => void,
  now: () => number = Date.now,
): ServiceEventRecorder {
  const core = config.makeApiClient(CoreV1Api);
  return (services, type, reason, message) => {
    for (const service of services) {
      const [namespace, name] = service.split("/");
      if (!namespace || !name) continue;
      const body = eventBody(
        {
          target: { kind: "Service", apiVersion: "v1", namespace, name, uid: undefined },
          type,
          reason: reasonFromCode(reason),
          message,
        },
        now(),
        { component: "passlb-lb", instance: host },
      );
      core
        .createNamespacedEvent({ namespace, body })
        .catch((e: unknown) =>
          onError(`Event ${body.reason} on Service ${service}: ${(e as Error).message ?? String(e)}`),
        );
    }
  };
}
