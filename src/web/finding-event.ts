/**
 * A finding about a Service as a Kubernetes Event (events.k8s.io/v1) on that Service, so
 * `kubectl describe service` shows what the logs and the dashboard show. Pure data: the
 * Kubernetes adapter creates it (or bumps the series of an Event with the same name).
 *
 * Rules (Kubernetes API reference, events.k8s.io/v1 Event; API conventions "Events"):
 *   - `type` is `Normal` or `Warning`: error and warning findings are Warnings;
 *   - `reason` is short UpperCamelCase: the finding's snake_case code, converted
 *     (`pool_exhausted` → `PoolExhausted`), so it stays as stable as the code;
 *   - `note` is human text of at most 1 kB: the message, cut with an ellipsis;
 *   - `regarding` is the Service; `reportingController` names passlb;
 *   - the name is stable per (Service, code), so a repeating finding updates one Event
 *     instead of creating many.
 * Findings about something else (a Node, a pool) are not Service Events: undefined.
 */
import type { Finding } from "../plan/load-balancer-plan.ts";

export const REPORTING_CONTROLLER = "passlb.io/passlb";
const NOTE_MAX_BYTES = 1024;

export interface ServiceRef {
  readonly namespace: string;
  readonly name: string;
  readonly uid: string | undefined;
}

export interface KubeEvent {
  readonly apiVersion: "events.k8s.io/v1";
  readonly kind: "Event";
  readonly metadata: { readonly namespace: string; readonly name: string };
  readonly eventTime: string;
  readonly reportingController: string;
  readonly reportingInstance: string;
  readonly action: string;
  readonly reason: string;
  readonly note: string;
  readonly type: "Normal" | "Warning";
  readonly regarding: {
    readonly apiVersion: "v1";
    readonly kind: "Service";
    readonly namespace: string;
    readonly name: string;
    readonly uid?: string;
  };
}

export function upperCamel(code: string): string {
  return code
    .split("_")
    .filter((p) => p !== "")
    .map((p) => p[0]!.toUpperCase() + p.slice(1))
    .join("");
}

/** FNV-1a, 32 bits, hex: a short stable suffix for the Event name */
function fnv(text: string): string {
  let h = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193) >>> 0;
  return h.toString(16).padStart(8, "0");
}

function cut(text: string): string {
  if (Buffer.byteLength(text) <= NOTE_MAX_BYTES) return text;
  let s = text.slice(0, NOTE_MAX_BYTES - 3);
  while (Buffer.byteLength(`${s}…`) > NOTE_MAX_BYTES) s = s.slice(0, -1);
  return `${s}…`;
}

export function findingEvent(
  f: Finding,
  service: ServiceRef,
  options: { now: number; instance: string; action: string },
): KubeEvent | undefined {
  if (f.subject !== `Service ${service.namespace}/${service.name}`) return undefined;
  return {
    apiVersion: "events.k8s.io/v1",
    kind: "Event",
    metadata: {
      namespace: service.namespace,
      name: `${service.name}.passlb-${fnv(`${f.code}/${service.uid ?? ""}`)}`,
    },
    eventTime: new Date(options.now).toISOString(),
    reportingController: REPORTING_CONTROLLER,
    reportingInstance: options.instance,
    action: options.action,
    reason: upperCamel(f.code),
    note: cut(f.message),
    type: f.severity === "info" ? "Normal" : "Warning",
    regarding: {
      apiVersion: "v1",
      kind: "Service",
      namespace: service.namespace,
      name: service.name,
      ...(service.uid !== undefined && { uid: service.uid }),
    },
  };
}
